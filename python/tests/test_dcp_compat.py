"""The torch internals tierckpt.torch relies on, pinned per release (tierckpt/torch/_dcp_compat.py).

``EXPECTED`` holds, for each release of the supported range (2.9 to 2.14), the format bits
tierckpt.torch writes and reads steps by: what stock FileSystemWriter, FileSystemReader and
``torch.save`` of that release do. ``test_format_bits[2.X]`` runs under torch 2.X only and is
skipped under the others: CI runs 2.13 (scripts/test.sh) and 2.14 (scripts/torch_matrix.sh); the
rows 2.9 - 2.12 are 2.13's bits, expected unchanged, and are checked by the documented command
(docs/python.md, "Supported torch releases"). A row that fails is a finding about that release:
fix _dcp_compat.py for it, never the row alone.

The other tests here run under whatever torch is installed: tierckpt's archives are that
release's torch.save archives, staging decomposes a state dict as that release's planner does,
no module but _dcp_compat touches a private torch name, and an unsupported torch is an ImportError.
"""
from __future__ import annotations

import ast
import dataclasses
import io
import os
import pickle
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex, StorageMeta

from tierckpt.torch import Checkpointer, TieredReader, TieredWriter, _dcp_compat, _format, staging, wait_durable
from strict import NOT_APPLICABLE  # noqa: E402  (tests/harness, on the path from conftest)

PACKAGE = Path(_dcp_compat.__file__).resolve().parent.parent  # python/tierckpt (or site-packages/tierckpt)

_BASE = {
    "dcp_version": "1.0.0",
    "data_suffix": ".distcp",
    "metadata_file": ".metadata",
    "storage_info": ("torch.distributed.checkpoint.filesystem._StorageInfo",
                     ("relative_path", "offset", "length", "transform_descriptors")),
    "metadata_fields": ("state_dict_metadata", "planner_data", "storage_data", "storage_meta", "version"),
    "metadata_index": (("fqn", True), ("offset", True), ("index", False)),  # (field, compared)
    "storage_meta_fields": ("checkpoint_id", "save_id", "load_id", "modules"),
    "one_rank_files": (".metadata", "__0_0.distcp"),
    "archive_records": ("data.pkl", ".format_version", ".storage_alignment", "byteorder", "data/0", "version",
                        ".data/serialization_id"),
    "data_alignment": 64,
    "persistent_id": ("storage", 5),  # (typename, tuple length): ("storage", type, key, location, numel)
    "save_functions": ("_execute_save_impl", "_save_state_dict"),
    "checkpointable_tensor_protocol": False,
}
EXPECTED = {
    (2, 9): _BASE,
    (2, 10): _BASE,
    (2, 11): _BASE,
    (2, 12): _BASE,
    (2, 13): _BASE,
    (2, 14): {**_BASE, "checkpointable_tensor_protocol": True},  # torch.distributed.checkpoint.protocol
}


def _observed(tmp_path: Path) -> dict:
    info = _dcp_compat.StorageInfo
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    buf = io.BytesIO()
    torch.save(t, buf)
    zf = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    prefix = zf.namelist()[0].split("/", 1)[0]
    data = zf.getinfo(f"{prefix}/data/0")
    raw = buf.getvalue()
    name_len, extra_len = struct.unpack_from("<HH", raw, data.header_offset + 26)  # the local header's
    data_start = data.header_offset + 30 + name_len + extra_len
    ids = []

    class _Ids(pickle.Unpickler):  # records the persistent ids; builds nothing
        def persistent_load(self, pid):
            ids.append(pid)

        def find_class(self, module, name):
            return lambda *args, **kwargs: None

    _Ids(io.BytesIO(zf.read(f"{prefix}/data.pkl"))).load()
    stock = tmp_path / "stock"
    dcp.save({"t": t, "v": 3}, storage_writer=FileSystemWriter(str(stock)), no_dist=True)
    return {
        "dcp_version": _dcp_compat.CURRENT_DCP_VERSION,
        "data_suffix": _dcp_compat.DEFAULT_SUFFIX,
        "metadata_file": _dcp_compat.METADATA_FILE,
        "storage_info": (f"{info.__module__}.{info.__name__}", tuple(f.name for f in dataclasses.fields(info))),
        "metadata_fields": tuple(f.name for f in dataclasses.fields(Metadata)),
        "metadata_index": tuple((f.name, f.compare) for f in dataclasses.fields(MetadataIndex)),
        "storage_meta_fields": tuple(f.name for f in dataclasses.fields(StorageMeta)),
        "one_rank_files": tuple(sorted(os.listdir(stock))),
        "archive_records": tuple(n.split("/", 1)[1] for n in zf.namelist()),
        "data_alignment": 64 if data_start % 64 == 0 else data_start % 64,
        "persistent_id": (ids[0][0], len(ids[0])),
        "save_functions": tuple(sorted(c.co_name for c in _dcp_compat.save_code_objects())),
        "checkpointable_tensor_protocol": _dcp_compat._is_checkpointable_tensor is not None,
    }


@pytest.mark.parametrize("release", sorted(EXPECTED), ids=lambda r: f"{r[0]}.{r[1]}")
def test_format_bits(release, tmp_path):
    if _dcp_compat.release != release:
        pytest.skip(f"{NOT_APPLICABLE}pins torch {release[0]}.{release[1]}; this is torch {torch.__version__}")
    observed = _observed(tmp_path)
    expected = EXPECTED[release]
    diff = {k: (expected[k], observed[k]) for k in expected if observed[k] != expected[k]}
    assert not diff, f"torch {torch.__version__} differs from its pinned bits (expected, observed): {diff}"


def test_every_release_of_the_range_has_a_row():
    first, end = _dcp_compat.SUPPORTED_FIRST, _dcp_compat.SUPPORTED_END
    assert first[0] == end[0] == 2
    assert sorted(EXPECTED) == [(2, m) for m in range(first[1], end[1])]
    assert _dcp_compat.release in EXPECTED


@pytest.mark.parametrize("dtype,shape", [(torch.float32, (3, 4)), (torch.bfloat16, (7,)), (torch.int64, ()),
                                         (torch.uint8, (0, 5)), (torch.float64, (2, 3, 5)), (torch.bool, (9,))])
def test_tierckpt_archives_are_this_releases_torch_save_archives(dtype, shape):
    """_format lays out the archive FileSystemWriter writes (torch.save), with the data copied into its hole."""
    t = (torch.rand(shape) * 100).to(dtype)
    stock = io.BytesIO()
    torch.save(t, stock)
    stock = stock.getvalue()
    lay = _format.tensor_layout(dtype, shape)
    ours = lay.head + t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() + lay.tail
    assert len(ours) == len(stock) == lay.size
    assert lay.data_offset % _format.ALIGNMENT == 0 or lay.data_len == 0
    assert ours[lay.data_offset:lay.data_offset + lay.data_len] == stock[lay.data_offset:lay.data_offset + lay.data_len]
    layout = [(i.filename, i.header_offset, i.file_size) for i in zipfile.ZipFile(io.BytesIO(stock)).infolist()]
    assert [(i.filename, i.header_offset, i.file_size)
            for i in zipfile.ZipFile(io.BytesIO(ours)).infolist()] == layout
    loaded = torch.load(io.BytesIO(ours), weights_only=True)  # what FileSystemReader does with the slice
    assert loaded.dtype == dtype and torch.equal(loaded, t)
    viewed = _format.load_tensor(memoryview(ours), dtype, shape)
    assert torch.equal(viewed, t)


def test_stock_filesystem_writer_lays_a_one_rank_step_out_as_tierckpt_does(tmp_path):
    state = {"w": torch.arange(6.0).reshape(2, 3), "step": 7, "nested": {"b": torch.ones(4, dtype=torch.int32)}}
    dcp.save(state, storage_writer=FileSystemWriter(str(tmp_path)), no_dist=True)
    md = pickle.loads((tmp_path / _dcp_compat.METADATA_FILE).read_bytes())
    assert md.version == _dcp_compat.CURRENT_DCP_VERSION
    blob = (tmp_path / f"__0_0{_dcp_compat.DEFAULT_SUFFIX}").read_bytes()
    for index, info in md.storage_data.items():
        assert type(info) is _dcp_compat.StorageInfo and info.relative_path == "__0_0.distcp"
        assert _dcp_compat.storage_transforms(info) == []
        piece = blob[info.offset:info.offset + info.length]
        if index.fqn == "step":  # a BYTE_IO item: torch.save of the value, raw
            assert index == MetadataIndex("step") and torch.load(io.BytesIO(piece), weights_only=True) == 7
            continue
        assert index.offset == torch.Size((0,) * len(md.state_dict_metadata[index.fqn].size))
        stored = torch.load(io.BytesIO(piece), weights_only=True)
        lay = _format.tensor_layout(stored.dtype, stored.shape)
        assert len(piece) == lay.size
        assert piece[lay.data_offset:lay.data_offset + lay.data_len] == stored.numpy().tobytes()


def test_staging_decomposes_a_plain_state_dict_as_the_default_planner_does():
    state = {"a": torch.zeros(3, 2), "p": torch.nn.Parameter(torch.ones(2)), "n": {"x": 1, "y": [torch.ones(1)]},
             "s": "text", "z": torch.tensor(5)}
    ours = [(p.item.index, p.item.type) for p in staging.pieces_of(state)]
    planner = DefaultSavePlanner()
    planner.set_up_planner(state, storage_meta=None, is_coordinator=True)
    stock = [(i.index, i.type) for i in planner.create_local_plan().items]
    assert sorted(ours, key=repr) == sorted(stock, key=repr)
    # The writer finds staged items by the planner's indices: `index` is not part of equality.
    assert MetadataIndex("a", torch.Size([0, 0]), 0) == MetadataIndex("a", torch.Size([0, 0]))
    assert hash(MetadataIndex("a", torch.Size([0, 0]), 0)) == hash(MetadataIndex("a", torch.Size([0, 0])))


def _torch_internals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each private torch name the module's code (not its text) uses."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "torch":
            parts = node.module.split(".")
            if any(p.startswith("_") for p in parts) or node.module == "torch.distributed.checkpoint.filesystem":
                found.append((node.lineno, f"from {node.module} import ..."))
            found += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names
                      if a.name.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names
                      if a.name.split(".")[0] == "torch" and any(p.startswith("_") for p in a.name.split("."))]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in ("torch", "_torch", "dcp"):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Name) and node.id in ("_StorageInfo", "_synchronize_after_execute"):
            found.append((node.lineno, node.id))
    return found


def test_no_module_but_dcp_compat_uses_a_torch_internal():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name != "_dcp_compat.py":
            offenders += [f"{path.relative_to(PACKAGE)}:{line}: {what}"
                          for line, what in _torch_internals(ast.parse(path.read_text()))]
    assert not offenders, "torch internals outside tierckpt/torch/_dcp_compat.py:\n" + "\n".join(offenders)
    # The scan itself sees what it looks for.
    probe = "from torch.distributed.checkpoint._traverse import set_element\nx = torch._utils._element_size(d)\n"
    assert {line for line, _ in _torch_internals(ast.parse(probe))} == {1, 2}


@pytest.mark.parametrize("version,ok", [("2.9.0", True), ("2.9.1+cu128", True), ("2.11.0+cu130", True),
                                        ("2.13.0+cpu", True), ("2.14.1", True), ("2.10.0rc3", True),
                                        ("2.8.0", False), ("2.15.0", False), ("2.15.0a0+git0abc", False),
                                        ("3.0.0", False), ("1.13.1", False), ("nightly", False)])
def test_supported_range(version, ok):
    if ok:
        assert _dcp_compat.check_release(version) >= (2, 9)
    else:
        with pytest.raises(ImportError, match=r">=2\.9,<2\.15.*pip install 'torch>=2\.9,<2\.15'"):
            _dcp_compat.check_release(version)


@pytest.mark.parametrize("version", ["2.8.0", "2.15.0"])
def test_unsupported_torch_is_an_import_error_naming_the_range(version):
    """A fresh interpreter whose torch reports another release cannot import tierckpt.torch."""
    code = ("import torch\n"
            f"torch.__version__ = {version!r}\n"
            "try:\n"
            "    import tierckpt.torch\n"
            "except ImportError as e:\n"
            "    print('IMPORT-ERROR', e)\n"
            "else:\n"
            "    print('IMPORTED')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("IMPORT-ERROR"), r.stdout + r.stderr
    assert f"this is torch {version}" in r.stdout
    assert ">=2.9,<2.15" in r.stdout and "pip install 'torch>=2.9,<2.15'" in r.stdout
    assert "Warning" not in r.stderr


# ---- 2.14+: CheckpointableTensor, a plain tensor planned as a shard of a global tensor ----

def _shard(values, global_shape, global_offset):
    t = torch.tensor(values, dtype=torch.float32)
    t.global_shape = tuple(global_shape)
    t.global_offsets = (tuple(global_offset),)
    t.local_offsets = ((0,) * t.dim(),)
    t.local_sizes = (tuple(t.shape),)
    return t


@pytest.mark.skipif(_dcp_compat._is_checkpointable_tensor is None, reason=f"{NOT_APPLICABLE}torch before 2.14: no CheckpointableTensor")
def test_checkpointable_tensor_is_saved_as_the_shard_it_declares(agent, tmp_path):
    cfg = agent.config("ckpt-tensor")
    state = lambda: {"w": _shard([1.0, 2.0, 3.0], (8,), (4,)), "plain": torch.arange(3.0)}  # noqa: E731
    assert not _dcp_compat.plain_tensor(state()["w"]) and _dcp_compat.plain_tensor(state()["plain"])
    dcp.save(state(), storage_writer=TieredWriter(cfg, 1, persist=True), no_dist=True)
    dcp.async_save(state(), storage_writer=TieredWriter(cfg, 2, persist=True), no_dist=True).result(timeout=60)
    stock = tmp_path / "stock"
    dcp.save(state(), storage_writer=FileSystemWriter(str(stock)), no_dist=True)
    md_stock = pickle.loads((stock / ".metadata").read_bytes())
    assert md_stock.state_dict_metadata["w"].size == torch.Size([8])
    for step in (1, 2):
        wait_durable(cfg, step, timeout_s=60)
        step_dir = agent.durable / "ckpt-tensor" / f"step_{step:010d}"
        md = pickle.loads((step_dir / ".metadata").read_bytes())
        assert md.state_dict_metadata == md_stock.state_dict_metadata
        assert set(md.storage_data) == set(md_stock.storage_data)
        for reader in (TieredReader(cfg, step=step), FileSystemReader(str(step_dir))):
            target = {"w": _shard([0.0, 0.0, 0.0], (8,), (4,)), "plain": torch.zeros(3)}
            dcp.load(target, storage_reader=reader, no_dist=True)
            assert torch.equal(target["w"], torch.tensor([1.0, 2.0, 3.0])), (step, reader)
            assert torch.equal(target["plain"], torch.arange(3.0))
    with pytest.raises((TypeError, RuntimeError), match="sharded"):  # DCP's planner's job, not the Checkpointer's
        Checkpointer(cfg).save(3, state())
