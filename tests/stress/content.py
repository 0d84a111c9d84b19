"""The bytes tc_test_writer writes, recomputed in Python (tools/testing/test_writer.cc, Fill).

Object i of step `step` written with `--seed seed` holds a splitmix64 stream
seeded by seed * 1000003 + step * 7919 + i (mod 2^64), little-endian 8-byte
words, the last size % 8 bytes being (object_seed + j) & 0xff. The oracle
keeps only the SHA-256 of each expected object.
"""
import hashlib

import numpy as np

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def object_seed(seed: int, step: int, i: int) -> int:
    return (seed * 1000003 + step * 7919 + i) & M64


def object_bytes(seed: int, step: int, i: int, size: int) -> bytes:
    s = object_seed(seed, step, i)
    words = size // 8
    with np.errstate(over="ignore"):
        x = np.arange(1, words + 1, dtype=np.uint64) * np.uint64(GOLDEN) + np.uint64(s)
        z = x
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    body = z.astype("<u8").tobytes()
    tail = bytes(((s + j) & 0xFF) for j in range(words * 8, size))
    return body + tail


_cache = {}


def object_sha(seed: int, step: int, i: int, size: int) -> str:
    key = (seed, step, i, size)
    if key not in _cache:
        _cache[key] = hashlib.sha256(object_bytes(seed, step, i, size)).hexdigest()
    return _cache[key]


def step_shas(seed: int, step: int, objects: int, size: int) -> dict:
    """{object name: sha256} of a whole step as tc_test_writer writes it."""
    return {f"obj_{i}.bin": object_sha(seed, step, i, size) for i in range(objects)}
