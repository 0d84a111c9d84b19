"""The file objects of tierckpt.fsspec: a committed object read through its verified mapping, and
a file written into this process's memory that becomes one object when it is closed.

Neither decides anything about steps: the filesystem (fsspec.py) hands each a callback that
stores or drops the bytes.
"""
from __future__ import annotations

import io

__all__ = ["ObjectReader", "PendingFile"]


class _ObjectRaw(io.RawIOBase):
    """Reads a committed object's read-only mapping (an ObjectView of open_verified); seekable."""

    def __init__(self, view, name: str) -> None:
        super().__init__()
        self._view = view
        self._data = view.data
        self._pos = 0
        self.name = name

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = max(0, min(len(buffer), len(self._data) - self._pos))
        memoryview(buffer).cast("B")[:n] = self._data[self._pos:self._pos + n]
        self._pos += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._data)}[whence]
        if base + offset < 0:
            raise ValueError(f"{self.name}: negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        if self.closed:
            return
        super().close()
        view, self._view = self._view, None
        self._data.release()
        # The mapping was verified when it was opened; unchanged() checks that it still holds
        # those bytes (a damaged memory copy is caught after the read, not only before).
        view.unchanged()


def ObjectReader(view, name: str, buffer_size: int = 1 << 20) -> io.BufferedReader:
    """A binary, seekable file over a verified object view; closing it releases the mapping."""
    return io.BufferedReader(_ObjectRaw(view, name), buffer_size=buffer_size)


class PendingFile(io.RawIOBase):
    """A file opened for writing: its bytes stay in this process until close, which calls
    ``store(name, chunks, size)`` once. A file closed by an exception (a ``with`` block that
    raised) or discarded (``discard()``, which the filesystem's rm of it calls) stores nothing.

    Objects are created with their exact size, which is known only at the end: hence the
    buffer (one copy in this process, then one into the agent's shared memory). ``fileno()``
    is unsupported, so DCP's ``sync_files`` falls back to ``os.sync()``, as it does on every
    fsspec filesystem without local files.
    """

    def __init__(self, name: str, store) -> None:
        super().__init__()
        self.name = name
        self._store = store
        self._chunks: list[bytes] = []
        self._size = 0
        self._discarded = False

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if self.closed:
            raise ValueError(f"write to closed file {self.name}")
        chunk = bytes(data)
        self._chunks.append(chunk)
        self._size += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self._size

    def seekable(self) -> bool:
        return False

    def discard(self) -> None:
        self._discarded = True

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._discarded = True
        return super().__exit__(exc_type, exc, tb)

    def __del__(self) -> None:
        self._discarded = True  # never closed: an abandoned file stores nothing
        super().__del__()

    def close(self) -> None:
        if self.closed:
            return
        super().close()
        chunks, self._chunks = self._chunks, []
        if not self._discarded:
            self._store(self.name, chunks, self._size)
