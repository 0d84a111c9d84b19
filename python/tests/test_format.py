"""tierckpt.torch._format: archives laid out without copying through a buffer are
byte-for-byte torch.save archives (bar the data record's CRC), and are read
back in place."""
from __future__ import annotations

import io

import pytest
import torch

from tierckpt.torch import _format

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
          torch.int32, torch.int64, torch.bool, torch.complex64, torch.float8_e4m3fn]
SHAPES = [(), (0,), (1,), (3, 5), (2, 3, 4), (70_000,)]


def _random(dtype, shape):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 10).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -1000), min(info.max, 1000), shape, generator=g, dtype=dtype)


def _lay_out(t: torch.Tensor) -> bytearray:
    lay = _format.tensor_layout(t.dtype, t.shape)
    buf = bytearray(lay.size)
    buf[:lay.data_offset] = lay.head
    if lay.data_len:
        dst = torch.frombuffer(buf, dtype=torch.uint8)[lay.data_offset:lay.data_offset + lay.data_len]
        dst.view(t.dtype).view(t.shape).copy_(t)
    buf[lay.data_offset + lay.data_len:] = lay.tail
    return buf


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_layout_is_a_torch_save_archive(dtype, shape):
    t = _random(dtype, shape)
    buf = _lay_out(t)
    stock = io.BytesIO()
    torch.save(t, stock)
    assert len(buf) == len(stock.getvalue()), "the archive size differs from torch.save's"
    loaded = torch.load(io.BytesIO(bytes(buf)), weights_only=True)
    assert loaded.dtype == dtype and loaded.shape == t.shape
    assert torch.equal(loaded.view(torch.uint8) if dtype == torch.float8_e4m3fn else loaded,
                       t.view(torch.uint8) if dtype == torch.float8_e4m3fn else t)
    if t.numel():
        assert (len(_format.tensor_layout(dtype, shape).head)) % 64 == 0, "tensor data is not 64-byte aligned"


def test_non_contiguous_sources_are_copied_by_value():
    base = torch.arange(60, dtype=torch.float32).view(6, 10)
    for view in (base.t(), base[::2, 3:], base[:, 1], base.expand(2, 6, 10)):
        loaded = torch.load(io.BytesIO(bytes(_lay_out(view))), weights_only=True)
        assert loaded.is_contiguous() and torch.equal(loaded, view)


def test_load_tensor_views_the_buffer_in_place():
    t = torch.randn(128, 16)
    data = bytes(_lay_out(t))
    mv = memoryview(data)
    loaded = _format.load_tensor(mv)
    assert torch.equal(loaded, t)
    start = torch.frombuffer(data, dtype=torch.uint8).data_ptr()
    assert start <= loaded.data_ptr() < start + len(data), "load_tensor copied the data"


def test_load_tensor_falls_back_to_torch_load_for_other_archives():
    sparse = torch.eye(4).to_sparse()
    assert not _format.can_place(sparse)
    archive = _format.stock_tensor_bytes(sparse)
    assert torch.equal(_format.load_tensor(memoryview(bytes(archive))).to_dense(), torch.eye(4))
    view = torch.arange(10.0)[2:5]
    assert torch.equal(_format.load_tensor(memoryview(bytes(_format.stock_tensor_bytes(view)))), view)


def test_layouts_are_cached_and_deterministic():
    a = _format.tensor_layout(torch.float32, (7, 3))
    assert _format.tensor_layout(torch.float32, [7, 3]) is a
    _format._cache.clear()
    assert _format.tensor_layout(torch.float32, (7, 3)) == a
