"""The bytes of one DCP item, in the stock FileSystemWriter format of torch 2.13.

FileSystemWriter stores each tensor as a ``torch.save`` archive (a zip file)
and each bytes item raw, back to back in ``__<rank>_<n>.distcp`` files; the
metadata locates each item by ``_StorageInfo(relative_path, offset, length)``
and FileSystemReader ``torch.load``s the slice. We write the same archives,
but without an intermediate buffer:

* :func:`tensor_layout` runs ``torch.save`` under ``torch.serialization.
  skip_data()`` on a stand-in tensor of the same dtype and shape. That yields
  every byte of the archive except the tensor's data, and where the data goes
  (one hole, 64-byte aligned as torch lays it out). Layouts are cached by
  (dtype, shape), so steady-state saves do not serialize anything.
* The writer puts the header bytes in place and copies the tensor straight
  into the hole: one copy from the source tensor (CPU or GPU, contiguous or
  not) to its final place in shared memory.

The data record's zip CRC-32 is 0, as ``torch.save`` writes it with
``torch.serialization.set_crc32_options(False)``; ``torch.load`` (and so
FileSystemReader) does not check it. Integrity is the object checksum's job.

:func:`load_tensor` reads an archive back without copying the data. When
the caller knows the tensor's dtype and shape (the reader takes them from the
checkpoint's metadata) and the archive's bytes outside the data record are
exactly the cached layout's head and tail for them, the archive *is*
``torch.save`` of such a tensor, and its data is viewed at the layout's
offset: two byte comparisons and no parsing (a steady load of 1,500 small
tensors paid ~0.3 ms per item for the zip parse and the unpickler). Otherwise
it parses the zip directory, unpickles ``data.pkl`` with torch's weights-only
unpickler and wraps the data record in place. Anything unexpected falls back
to ``torch.load`` of a copy.
"""
from __future__ import annotations

import io
import struct
import sys
import threading
import warnings
import zipfile
from collections import OrderedDict
from dataclasses import dataclass

import torch

from . import _dcp_compat

__all__ = ["ALIGNMENT", "TensorLayout", "can_place", "load_tensor", "stock_tensor_bytes", "tensor_layout"]

# Items start at multiples of this within an object, so every tensor's data
# (64-byte aligned inside its archive) is 64-byte aligned in memory.
ALIGNMENT = 64
_LAYOUT_CACHE_ENTRIES = 4096


@dataclass(frozen=True)
class TensorLayout:
    """A torch.save archive of a contiguous tensor: head + data + tail."""

    head: bytes  # archive bytes before the data
    tail: bytes  # archive bytes after it
    data_len: int

    @property
    def size(self) -> int:
        return len(self.head) + self.data_len + len(self.tail)

    @property
    def data_offset(self) -> int:
        return len(self.head)


class _SparseSink:
    """A file-like that records (position, bytes) writes and allows seeking past holes."""

    def __init__(self) -> None:
        self.pos = 0
        self.end = 0
        self.writes: list[tuple[int, bytes]] = []

    def write(self, b) -> int:
        data = bytes(memoryview(b).cast("B"))
        self.writes.append((self.pos, data))
        self.pos += len(data)
        self.end = max(self.end, self.pos)
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.end}[whence]
        self.pos = base + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def flush(self) -> None:
        pass


_cache_lock = threading.Lock()
_cache: OrderedDict[tuple[torch.dtype, tuple[int, ...]], TensorLayout] = OrderedDict()


def _build_layout(dtype: torch.dtype, shape: tuple[int, ...]) -> TensorLayout:
    standin = torch.empty(shape, dtype=dtype)  # never touched: skip_data writes no data
    sink = _SparseSink()
    with torch.serialization.skip_data():
        torch.save(standin, sink)
    data_len = standin.numel() * standin.element_size()
    image = bytearray(sink.end)
    covered = bytearray(sink.end)
    for pos, data in sink.writes:
        image[pos:pos + len(data)] = data
        covered[pos:pos + len(data)] = b"\x01" * len(data)
    holes = []
    i = 0
    while i < len(covered):
        if covered[i]:
            i += 1
            continue
        j = covered.find(b"\x01", i)
        j = len(covered) if j < 0 else j
        holes.append((i, j - i))
        i = j
    if data_len == 0:
        if holes:
            raise RuntimeError(f"torch.save of an empty {dtype} tensor left holes {holes}")
        return TensorLayout(bytes(image), b"", 0)
    if len(holes) != 1 or holes[0][1] != data_len:
        raise RuntimeError(f"torch.save of a {dtype}{list(shape)} tensor did not leave exactly one hole of "
                           f"{data_len} bytes for its data (holes {holes}); tierckpt.torch "
                           "relies on that layout (_dcp_compat.py)")
    start = holes[0][0]
    return TensorLayout(bytes(image[:start]), bytes(image[start + data_len:]), data_len)


def tensor_layout(dtype: torch.dtype, shape) -> TensorLayout:
    """The archive layout of a contiguous CPU tensor of dtype and shape (cached)."""
    key = (dtype, tuple(int(s) for s in shape))
    with _cache_lock:
        layout = _cache.get(key)
        if layout is not None:
            _cache.move_to_end(key)
            return layout
    layout = _build_layout(*key)
    with _cache_lock:
        _cache[key] = layout
        while len(_cache) > _LAYOUT_CACHE_ENTRIES:
            _cache.popitem(last=False)
    return layout


def can_place(t: torch.Tensor) -> bool:
    """Whether t's archive can be laid out here with its data copied in place.

    Plain dense tensors (and nn.Parameter) of any device qualify; sparse,
    quantized, nested tensors and other subclasses go through
    stock_tensor_bytes instead.
    """
    return (type(t) in (torch.Tensor, torch.nn.Parameter) and t.layout == torch.strided
            and not t.is_quantized and not t.is_nested and t.device.type != "meta")


def stock_tensor_bytes(t: torch.Tensor) -> memoryview:
    """The archive FileSystemWriter writes for t (torch.save of a CPU copy)."""
    t = t.detach().cpu()
    if t.layout == torch.strided and t.untyped_storage().size() != t.nbytes:
        t = t.clone()
    buf = io.BytesIO()
    torch.save(t, buf)
    return buf.getbuffer()


# ---- Reading ----

class _MemoryFile(io.RawIOBase):
    """A read-only, seekable file over a memoryview (zipfile reads the directory through it)."""

    def __init__(self, mv: memoryview) -> None:
        super().__init__()
        self._mv = mv
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: len(self._mv)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, b) -> int:
        n = max(0, min(len(b), len(self._mv) - self._pos))
        b[:n] = self._mv[self._pos:self._pos + n]
        self._pos += n
        return n


_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")  # zip local file header, 30 bytes
_LOCAL_MAGIC = 0x04034B50


def _record_slice(mv: memoryview, info: zipfile.ZipInfo) -> memoryview:
    fields = _LOCAL_HEADER.unpack_from(mv, info.header_offset)
    if fields[0] != _LOCAL_MAGIC or info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"record {info.filename} is not a stored zip entry")
    start = info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]
    if start + info.file_size > len(mv):
        raise ValueError(f"record {info.filename} runs past the end of the archive")
    return mv[start:start + info.file_size]


def _load_in_place(mv: memoryview) -> torch.Tensor:
    zf = zipfile.ZipFile(_MemoryFile(mv))
    names = zf.namelist()
    prefix = names[0].split("/", 1)[0]
    byteorder = f"{prefix}/byteorder"
    if byteorder in names and zf.read(byteorder).decode() != sys.byteorder:
        raise ValueError("archive of another byte order")

    def persistent_load(saved_id):
        typename, storage_type, key, _location, numel = saved_id
        if typename != "storage":
            raise ValueError(f"unexpected persistent id {typename!r}")
        dtype = torch.uint8 if storage_type is torch.UntypedStorage else storage_type.dtype
        data = _record_slice(mv, zf.getinfo(f"{prefix}/data/{key}"))
        if len(data) != numel * _dcp_compat.element_size(dtype):
            raise ValueError(f"storage {key} holds {len(data)} bytes for {numel} elements of {dtype}")
        if len(data) == 0:
            untyped = torch.UntypedStorage(0)
        else:
            with warnings.catch_warnings():
                # The mapping is read-only; the tensor is only ever a copy source.
                warnings.filterwarnings("ignore", message="The given buffer is not writable")
                untyped = torch.frombuffer(data, dtype=torch.uint8).untyped_storage()
        return torch.storage.TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True)

    unpickler = _dcp_compat.weights_only_unpickler(io.BytesIO(zf.read(f"{prefix}/data.pkl")))
    unpickler.persistent_load = persistent_load
    result = unpickler.load()
    if not isinstance(result, torch.Tensor):
        raise ValueError(f"archive holds a {type(result).__name__}, not a tensor")
    return result


def _view_laid_out(mv: memoryview, dtype: torch.dtype, shape, base: torch.Tensor | None,
                   base_offset: int) -> torch.Tensor | None:
    """mv's tensor if mv is byte for byte tensor_layout(dtype, shape) around its data, else None."""
    lay = tensor_layout(dtype, shape)
    if len(mv) != lay.size:
        return None
    start, end = lay.data_offset, lay.data_offset + lay.data_len
    # bytes(): one copy and a memcmp; a memoryview's == compares element by element (4x slower)
    if bytes(mv[:start]) != lay.head or bytes(mv[end:]) != lay.tail:
        return None
    if lay.data_len == 0:
        return torch.empty(tuple(shape), dtype=dtype)
    if base is None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given buffer is not writable")
            base = torch.frombuffer(mv, dtype=torch.uint8)
        base_offset = 0
    try:
        return base[base_offset + start:base_offset + end].view(dtype).view(tuple(shape))
    except RuntimeError:  # data not aligned for dtype in this buffer: parse and copy instead
        return None


def load_tensor(mv: memoryview, dtype: torch.dtype | None = None, shape=None, *,
                base: torch.Tensor | None = None, base_offset: int = 0) -> torch.Tensor:
    """The tensor saved in the torch.save archive mv, viewing mv's bytes where possible.

    dtype and shape, when given, are what the archive is expected to hold: an
    archive laid out as tensor_layout(dtype, shape) is then viewed without
    parsing (any other archive is parsed as below, so a wrong guess costs time,
    never correctness). base, if given, is a uint8 tensor over the buffer mv
    is a slice of, mv starting at base[base_offset] (one torch.frombuffer per
    object instead of one per item).

    The result may alias mv (read-only memory): use it as a copy source only.
    """
    if dtype is not None and shape is not None:
        t = _view_laid_out(mv, dtype, shape, base, base_offset)
        if t is not None:
            return t
    try:
        return _load_in_place(mv)
    except (ValueError, KeyError, IndexError, zipfile.BadZipFile, struct.error, AttributeError, TypeError):
        return torch.load(io.BytesIO(mv), map_location="cpu", weights_only=True)
