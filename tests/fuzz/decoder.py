"""Coverage-guided fuzzing of the decoders (issue 18 item 2), with atheris (libFuzzer for Python).

Each input is decoded as a binary metadata log by both decoders (the compiled one and the pure-Python reference;
their items must be identical, so a difference is a finding too) and as `kafka-dump-log` text. A finding is an
exception, a difference, an input that takes more than a second (`-timeout`) or a process over `-rss_limit_mb`.
The mutator is structure-aware: after libFuzzer's byte mutations it gives every batch that still frames a correct
CRC half of the time, so that damage reaches the records and values, not only the CRC check.

    python -m tests.fuzz.decoder [libFuzzer flags] [CORPUS_DIR ...]   # e.g. -max_total_time=3600 work/ seeds/
    python -m tests.fuzz.decoder --seeds DIR                         # write the seed corpus into DIR

`make fuzz` runs it for hours; `tests/fuzz/test_fuzz.py` runs it briefly in CI and replays every saved finding
(`tests/fuzz/findings/`, where `make fuzz` writes them) as a test.
"""

from __future__ import annotations

import io
import os
import random
import sys
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["replay"]):
    from replay.kafka import batch, dumplog, native, writer
    from replay.kafka.acl import AclBinding
    from replay.kafka.model import Batch, Problem

FINDINGS = Path(__file__).parent / "findings"
NAMES = ("00000000000000000042.log", "00000000000000000010-0000000002.checkpoint", "")
_CRC_START = 21


def _items(data: bytes, name: str, pure: bool) -> list[Batch | Problem]:
    os.environ[native.PURE_PYTHON_ENV] = "1" if pure else "0"
    native.refresh()
    return list(batch.read_batches(io.BytesIO(data), name, snapshot=name.endswith(".checkpoint")))


def _same(a: object, b: object) -> bool:
    return a == b or repr(a) == repr(b)  # NaN floats in record data are unequal to themselves


def check(data: bytes) -> None:
    """One input: the first byte picks the file name; the rest is decoded both ways, and read as text."""
    if not data:
        return
    name, body = NAMES[data[0] % len(NAMES)], data[1:]
    ours = _items(body, name, pure=True)
    if native.installed():
        theirs = _items(body, name, pure=False)
        if not _same(ours, theirs):
            raise AssertionError(f"the decoders differ on this input ({len(ours)} items against {len(theirs)})")
    for _ in dumplog.parse_text(body.decode("utf-8", "replace").splitlines(), "fuzz.txt"):
        pass


def recrc(data: bytes) -> bytes:
    """Every batch that frames gets a correct CRC (walking the chain of batch lengths from the start)."""
    out = bytearray(data)
    at = 0
    while at + batch.RECORD_BATCH_OVERHEAD <= len(out):
        size = int.from_bytes(out[at + 8: at + 12], "big", signed=True) + batch.LOG_OVERHEAD
        if size < batch.RECORD_BATCH_OVERHEAD or at + size > len(out):
            break
        crc = batch.crc32c(memoryview(out)[at + _CRC_START: at + size])
        out[at + 17: at + 21] = crc.to_bytes(4, "big")
        at += size
    return bytes(out)


def mutate(data: bytes, max_size: int, seed: int) -> bytes:
    mutated = atheris.Mutate(data, max_size)
    if seed % 2 and mutated:
        mutated = mutated[:1] + recrc(mutated[1:])
    return mutated


def seeds() -> dict[str, bytes]:
    """Small valid files of every shape (codecs, control batches, snapshots, transactions), a few damaged ones,
    dump-log text, and the sample dumps' smallest files: where the fuzzer starts."""
    rng = random.Random(18)
    bob = AclBinding.of("TOPIC", "payments", "LITERAL", "User:bob", "*", "READ", "ALLOW")
    out: dict[str, bytes] = {}
    for i, codec in enumerate(("none", "gzip", "snappy", "lz4", "zstd")):
        records = [writer.acl_record(f"AAAAAAAAAAAAAAAAAAAA{i:02d}", bob), writer.noop()]
        segment = b"".join(writer.encode_batch(o * 2, records, 1, 1000 + o, codec) for o in range(3))
        out[f"segment-{codec}"] = bytes([0]) + segment
        out[f"snapshot-{codec}"] = bytes([1]) + writer.snapshot_bytes(records, 2, 1000, batch_size=1, codec=codec)
    plain = out["segment-none"][1:]
    out["damaged-length"] = bytes([0]) + writer.with_batch_length(plain[:80], 5) + plain[80:]
    out["damaged-crc"] = bytes([0]) + writer.corrupt_crc(plain)
    out["truncated"] = bytes([0]) + plain[: len(plain) - rng.randint(1, 40)]
    with io.StringIO() as text:
        path = FINDINGS.parent / ".seed.log"
        path.write_bytes(plain)
        try:
            text.write("\n".join(dumplog.render_file(str(path))) + "\n")
        finally:
            path.unlink()
        out["dump-log-text"] = bytes([2]) + text.getvalue().encode()
    data = Path(__file__).resolve().parents[2] / "data"
    for f in sorted(data.glob("*/__cluster_metadata-0/*.checkpoint"))[:3]:
        out[f"sample-{f.parent.parent.name}-{f.stem}"] = bytes([1]) + f.read_bytes()
    return out


def write_seeds(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in seeds().items():
        (directory / name).write_bytes(data)


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[1] == "--seeds":
        write_seeds(Path(argv[2]))
        return
    atheris.Setup(argv, check, custom_mutator=mutate)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
