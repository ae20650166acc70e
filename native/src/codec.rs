//! Record-area decompression (`replay/kafka/codecs.py`): the same libraries' semantics (zlib's inflate, the snap
//! crate cramjam uses, liblz4's frame API, libzstd's streaming API) and the same leniency (concatenated gzip
//! members / lz4 frames / zstd frames, zero padding after gzip, raw snappy without the xerial header, repeated
//! xerial headers). Past the limit is `Err(Fail::Limit)`; any other failure is `Err(Fail::Bad)`, and the caller then
//! asks the Python codecs for the exact message.

use flate2::{Decompress, FlushDecompress, Status};

const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";

/// Why a records area did not decompress: past the limit (`codecs.DecompressionLimitError`), or anything else.
#[derive(Debug, PartialEq)]
pub enum Fail {
    Limit,
    Bad,
}

pub type CodecResult = Result<Vec<u8>, Fail>;

/// `codecs.decompress(codec, data, limit)`: at most `limit` bytes out.
pub fn decompress(codec: i64, data: &[u8], limit: usize) -> CodecResult {
    match codec {
        1 => gunzip(data, limit),
        2 => unsnappy(data, limit),
        3 => unlz4(data, limit),
        4 => unzstd(data, limit),
        _ => Err(Fail::Bad),
    }
}

fn gunzip(data: &[u8], limit: usize) -> CodecResult {
    let mut out: Vec<u8> = Vec::with_capacity(data.len() * 4 + 64);
    let mut rest = data;
    loop {
        let mut d = Decompress::new_gzip(15);
        let mut eof = false;
        loop {
            if out.len() == out.capacity() {
                // grow by doubling, but not far past the limit (a bomb stops there)
                out.reserve(out.capacity().max(4096).min(limit + 1 - out.len() + 4096));
            }
            let before_in = d.total_in() as usize;
            let before_out = out.len();
            let status =
                d.decompress_vec(&rest[before_in..], &mut out, FlushDecompress::None).map_err(|_| Fail::Bad)?;
            if out.len() > limit {
                return Err(Fail::Limit);
            }
            match status {
                Status::StreamEnd => {
                    eof = true;
                    break;
                }
                _ => {
                    let progressed = d.total_in() as usize != before_in || out.len() != before_out;
                    if !progressed && out.len() < out.capacity() {
                        break; // needs more input: truncated
                    }
                }
            }
        }
        if !eof {
            return Err(Fail::Bad);
        }
        rest = &rest[d.total_in() as usize..];
        if rest.is_empty() || rest.iter().all(|&b| b == 0) {
            break;
        }
        if rest.len() < 2 || rest[0] != 0x1f || rest[1] != 0x8b {
            return Err(Fail::Bad);
        }
    }
    Ok(out)
}

fn unsnappy_raw(block: &[u8], limit: usize) -> CodecResult {
    let n = snap::raw::decompress_len(block).map_err(|_| Fail::Bad)?;
    if n > limit {
        return Err(Fail::Limit);
    }
    snap::raw::Decoder::new().decompress_vec(block).map_err(|_| Fail::Bad)
}

fn unsnappy(data: &[u8], limit: usize) -> CodecResult {
    if !data.starts_with(XERIAL_MAGIC) {
        return unsnappy_raw(data, limit);
    }
    let mut out = Vec::new();
    let mut pos = 0;
    let n = data.len();
    while pos < n {
        if data[pos..].starts_with(XERIAL_MAGIC) {
            if pos + 16 > n {
                return Err(Fail::Bad);
            }
            let compatible = i32::from_be_bytes(data[pos + 12..pos + 16].try_into().unwrap());
            if compatible > 1 {
                return Err(Fail::Bad);
            }
            pos += 16;
            continue;
        }
        if pos + 4 > n {
            return Err(Fail::Bad);
        }
        let size = i32::from_be_bytes(data[pos..pos + 4].try_into().unwrap());
        pos += 4;
        if size < 0 || pos + size as usize > n {
            return Err(Fail::Bad);
        }
        let chunk = unsnappy_raw(&data[pos..pos + size as usize], limit - out.len())?;
        out.extend_from_slice(&chunk);
        pos += size as usize;
    }
    Ok(out)
}

struct Lz4Ctx(lz4_sys::LZ4FDecompressionContext);

impl Drop for Lz4Ctx {
    fn drop(&mut self) {
        unsafe {
            lz4_sys::LZ4F_freeDecompressionContext(self.0);
        }
    }
}

fn unlz4(data: &[u8], limit: usize) -> CodecResult {
    let mut out: Vec<u8> = Vec::new();
    let mut rest = data;
    loop {
        let mut raw = lz4_sys::LZ4FDecompressionContext(std::ptr::null_mut());
        let code = unsafe { lz4_sys::LZ4F_createDecompressionContext(&mut raw, 100) };
        if unsafe { lz4_sys::LZ4F_isError(code) } != 0 {
            return Err(Fail::Bad);
        }
        let ctx = Lz4Ctx(raw);
        let mut src = 0usize;
        let mut eof = false;
        let mut buf = vec![0u8; 256 * 1024];
        // as python-lz4's decompress: call until the input is used up or the frame ends
        loop {
            let mut src_size = rest.len() - src;
            let mut dst_size = buf.len();
            let r = unsafe {
                lz4_sys::LZ4F_decompress(
                    ctx.0,
                    buf.as_mut_ptr(),
                    &mut dst_size,
                    rest[src..].as_ptr(),
                    &mut src_size,
                    std::ptr::null(),
                )
            };
            if unsafe { lz4_sys::LZ4F_isError(r) } != 0 {
                return Err(Fail::Bad);
            }
            src += src_size;
            out.extend_from_slice(&buf[..dst_size]);
            if out.len() > limit {
                return Err(Fail::Limit);
            }
            if r == 0 {
                eof = true;
                break;
            }
            if src >= rest.len() && dst_size < buf.len() {
                break;
            }
        }
        if !eof {
            return Err(Fail::Bad);
        }
        rest = &rest[src..];
        if rest.is_empty() {
            break;
        }
    }
    Ok(out)
}

fn unzstd(data: &[u8], limit: usize) -> CodecResult {
    let mut out: Vec<u8> = Vec::new();
    let mut dctx = zstd_safe::DCtx::create();
    let mut pos = 0usize;
    let mut eof = false;
    let mut buf = vec![0u8; zstd_safe::DCtx::out_size().max(1 << 17)];
    let mut pending = false; // the last call filled the output: more may come without input
    while pos < data.len() || pending {
        let mut input = zstd_safe::InBuffer::around(&data[pos..]);
        let mut output = zstd_safe::OutBuffer::around(&mut buf[..]);
        let r = dctx.decompress_stream(&mut output, &mut input).map_err(|_| Fail::Bad)?;
        let produced = output.pos();
        let consumed = input.pos();
        out.extend_from_slice(&buf[..produced]);
        if out.len() > limit {
            return Err(Fail::Limit);
        }
        pos += consumed;
        pending = r != 0 && produced == buf.len();
        if r == 0 {
            eof = true;
            if pos < data.len() {
                dctx.reset(zstd_safe::ResetDirective::SessionOnly).map_err(|_| Fail::Bad)?;
                eof = false;
            }
        } else {
            eof = false;
            if consumed == 0 && produced == 0 {
                return Err(Fail::Bad);
            }
        }
    }
    if !eof {
        return Err(Fail::Bad);
    }
    Ok(out)
}
