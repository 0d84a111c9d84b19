"""CRC32C (Castagnoli) in Python, for the test servers that check what the
client sends: a table implementation, a GF(2) combine, and a lane-parallel
fast path (numpy) for large bodies. crc32c(b"123456789") == 0xE3069283."""
from __future__ import annotations

import base64


_POLY = 0x82F63B78
_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE.append(_c)


def _crc32c_py(data: bytes, crc: int = 0) -> int:
    """crc32c(A + data) from crc = crc32c(A)."""
    crc ^= 0xFFFFFFFF
    table = _TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _gf2_apply(mat: list[int], vec: int) -> int:
    out, i = 0, 0
    while vec:
        if vec & 1:
            out ^= mat[i]
        vec >>= 1
        i += 1
    return out


def _gf2_compose(a: list[int], b: list[int]) -> list[int]:
    return [_gf2_apply(a, b[i]) for i in range(32)]


def _zeros_operator(nbytes: int) -> list[int]:
    """The GF(2) matrix that appends nbytes zero bytes to a CRC (zlib's crc32_combine):
    crc32c(A + B) = apply(zeros_operator(len(B)), crc32c(A)) ^ crc32c(B)."""
    op = [_POLY] + [1 << i for i in range(31)]  # one zero bit
    for _ in range(3):
        op = _gf2_compose(op, op)  # 2, 4, 8 bits
    result = [1 << i for i in range(32)]
    while nbytes:
        if nbytes & 1:
            result = _gf2_compose(op, result)
        op = _gf2_compose(op, op)
        nbytes >>= 1
    return result


def crc32c(data: bytes) -> int:
    """CRC32C of data: table-driven, over many lanes at once with numpy for large bodies."""
    lane = 4096
    if len(data) < 64 * lane:
        return _crc32c_py(data)
    try:
        import numpy as np  # noqa: PLC0415  (test dependency; the slow path works without it)
    except ImportError:
        return _crc32c_py(data)
    lanes = len(data) // lane
    cols = np.ascontiguousarray(np.frombuffer(data, dtype=np.uint8, count=lanes * lane).reshape(lanes, lane).T)
    table = np.array(_TABLE, dtype=np.uint32)
    reg = np.full(lanes, 0xFFFFFFFF, dtype=np.uint32)
    for i in range(lane):
        reg = table[(reg ^ cols[i]) & 0xFF] ^ (reg >> 8)
    shift = _zeros_operator(lane)
    total = 0
    for i, c in enumerate((reg ^ 0xFFFFFFFF).tolist()):
        total = c if i == 0 else _gf2_apply(shift, total) ^ c
    return _crc32c_py(data[lanes * lane:], total)  # the tail, continuing from the lanes' CRC


def crc32c_b64(data: bytes) -> str:
    return base64.b64encode(crc32c(data).to_bytes(4, "big")).decode()
