"""The pickled DCP Metadata of a step, with what did not change since the last save pickled once.

A step's ``.metadata`` is ``pickle.dumps(Metadata(...))``, which the stock
FileSystemReader and TieredReader unpickle. For a state dict of 1,500 tensors
it is ~1 MB and pickling it costs 40-90 ms per save on the 2-core VM (a
Python ``__getstate__`` per ``_StorageInfo``) — as long as the copy of the
tensors. Between two saves of the same state-dict layout only the storage
entries of the non-tensor values and ``storage_meta`` (checkpoint id, save id)
change, so :class:`MetadataPickle` pickles the rest once and splices the
pieces into a valid pickle each save:

* the stable pieces (the state-dict metadata, the planner data, the tensors'
  storage entries) are pickled by one pickler, one after the other, in the
  order they appear in the file, so its memo (objects shared between them,
  repeated strings) stays consistent in the spliced stream;
* the per-save pieces and the frame around everything (the pickle of a
  Metadata whose fields are unique placeholder strings, cut at them) are
  pickled in the pickler's *fast* mode: no memo at all, hence nothing that
  could clash with the stable pieces' memo indices;
* every piece is protocol 2 (no frames) without its ``PROTO`` header and
  ``STOP``;
* a dict's pickle is ``EMPTY_DICT`` followed by ``SETITEM(S)`` runs on it, so
  the per-save storage entries are the pickle of a dict of them minus its
  ``EMPTY_DICT``, appended after the stable entries.

The result unpickles to a Metadata equal to the one pickled directly (the
tests compare them).
"""
from __future__ import annotations

import io
import pickle
from typing import Any

from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

from ._dcp_compat import METADATA_FIELDS

__all__ = ["MetadataPickle", "body"]

_PROTOCOL = 2
_HEADER = b"\x80\x02"
_STOP = b"."
_EMPTY_DICT = b"}"
_FIELDS = METADATA_FIELDS


def body(obj: Any) -> bytes:
    """obj pickled (protocol 2, fast mode) without its PROTO header and STOP."""
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=_PROTOCOL)
    p.fast = True
    p.dump(obj)
    out = buf.getvalue()
    if not (out.startswith(_HEADER) and out.endswith(_STOP)):
        raise RuntimeError("pickle protocol 2 produced an unexpected frame; tierckpt needs CPython's pickle")
    return out[len(_HEADER):-len(_STOP)]


def _frame() -> list[bytes]:
    """The pickle of Metadata cut around its five fields: six literal parts."""
    slots = [f"\x00tierckpt-metadata-slot-{name}\x00" for name in _FIELDS]
    whole = body(Metadata(**dict(zip(_FIELDS, slots))))
    parts, rest = [], whole
    for s in slots:
        mark = body(s)
        if rest.count(mark) != 1:
            raise RuntimeError(f"the pickle of Metadata holds its {s!r} field {rest.count(mark)} times; "
                               "this torch's Metadata is not the dataclass tierckpt knows")
        head, rest = rest.split(mark)
        parts.append(head)
    parts.append(rest)
    return parts


class MetadataPickle:
    """Pickles Metadata(state_dict_metadata, planner_data, storage_data, storage_meta, version) for one
    layout, where storage_data = stable_storage | the entries given to dumps()."""

    _parts: list[bytes] | None = None

    def __init__(self, state_dict_metadata: dict, planner_data: Any, stable_storage: dict) -> None:
        if MetadataPickle._parts is None:
            MetadataPickle._parts = _frame()
        buf = io.BytesIO()
        pickler = pickle.Pickler(buf, protocol=_PROTOCOL)
        pieces = []
        for obj in (state_dict_metadata, planner_data, stable_storage):
            start = buf.tell()
            pickler.dump(obj)  # the memo carries over from one dump to the next
            piece = buf.getvalue()[start:]
            if not (piece.startswith(_HEADER) and piece.endswith(_STOP)):
                raise RuntimeError("pickle protocol 2 produced an unexpected frame; tierckpt needs CPython's pickle")
            pieces.append(piece[len(_HEADER):-len(_STOP)])
        self._sdm, self._planner, self._storage = pieces
        if not self._storage.startswith(_EMPTY_DICT):
            raise RuntimeError("a dict did not pickle as EMPTY_DICT + items")

    def dumps(self, extra_storage: dict, storage_meta: StorageMeta | None, version: str | None) -> bytes:
        """The pickled Metadata of one save (pickle.loads gives it back)."""
        extra = body(extra_storage)
        if not extra.startswith(_EMPTY_DICT):
            raise RuntimeError("a dict did not pickle as EMPTY_DICT + items")
        p = MetadataPickle._parts
        return b"".join((_HEADER, p[0], self._sdm, p[1], self._planner, p[2], self._storage, extra[1:], p[3],
                         body(storage_meta), p[4], body(version), p[5], _STOP))
