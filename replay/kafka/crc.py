"""CRC-32C (Castagnoli), the checksum of v2 record batches (spec §2).

Uses the `crc32c` C extension when it imports; otherwise a table-driven pure-Python version with the same
results (reflected polynomial 0x82F63B78, init and final XOR 0xFFFFFFFF). Both accept a running value so a CRC
can be computed over pieces: `crc32c(b, crc32c(a)) == crc32c(a + b)`.
"""

from __future__ import annotations

from collections.abc import Callable

_POLY = 0x82F63B78


def _make_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()


def crc32c_py(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """Pure-Python CRC-32C; slow (about a few MB/s) but dependency-free."""
    crc = value ^ 0xFFFFFFFF
    table = _TABLE
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_crc32c_c: Callable[..., int] | None
try:
    from crc32c import crc32c as _crc32c_c
except ImportError:  # pragma: no cover - exercised only where the extension is missing
    _crc32c_c = None

IMPLEMENTATION = "crc32c" if _crc32c_c is not None else "python"


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of `data`, continuing from `value` (the CRC of the bytes before it; 0 to start)."""
    if _crc32c_c is not None:
        return int(_crc32c_c(data, value))
    return crc32c_py(data, value)
