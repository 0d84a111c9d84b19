"""A step persisted to the filesystem durable tier is a stock DCP checkpoint:
torch's own FileSystemReader loads it unchanged, and our files are what
FileSystemWriter would have written (per-rank .distcp files of torch.save
archives, and a pickled .metadata)."""
from __future__ import annotations

import io
import pickle

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

import states
from conftest import run_ranks
from tierckpt.torch import TieredWriter, wait_durable


def _stock_load(step_dir, no_dist=True):
    target, model, optim = states.load_target()
    dcp.load(target, storage_reader=FileSystemReader(str(step_dir)), no_dist=no_dist)
    return target


def _check(target, seed):
    expected = states.full_state(seed)
    for part in ("model", "optim", "extras"):
        states.assert_same(expected[part], target[part], part)


def test_persisted_step_loads_with_stock_filesystem_reader(agent):
    cfg = agent.config("interop")
    dcp.save(states.full_state(31), storage_writer=TieredWriter(cfg, 1, persist=True), no_dist=True)
    dcp.async_save(states.full_state(32), storage_writer=TieredWriter(cfg, 2, persist=True),
                   no_dist=True).result(timeout=60)
    for step, seed in ((1, 31), (2, 32)):
        wait_durable(cfg, step, timeout_s=60)
        step_dir = agent.durable / "interop" / f"step_{step:010d}"
        assert {p.name for p in step_dir.iterdir()} >= {".metadata", "__0_0.distcp"}
        _check(_stock_load(step_dir), seed)


def test_items_are_torch_save_archives_like_filesystem_writer(agent, tmp_path):
    cfg = agent.config("format")
    state = states.full_state(33)
    dcp.save(state, storage_writer=TieredWriter(cfg, 1, persist=True), no_dist=True)
    wait_durable(cfg, 1, timeout_s=60)
    ours = agent.durable / "format" / "step_0000000001"
    stock = tmp_path / "stock"
    dcp.save(states.full_state(33), storage_writer=FileSystemWriter(str(stock)), no_dist=True)
    md_ours = pickle.loads((ours / ".metadata").read_bytes())
    md_stock = pickle.loads((stock / ".metadata").read_bytes())
    assert md_ours.state_dict_metadata == md_stock.state_dict_metadata
    assert md_ours.planner_data == md_stock.planner_data
    assert md_ours.version == md_stock.version
    assert set(md_ours.storage_data) == set(md_stock.storage_data)
    blob = (ours / "__0_0.distcp").read_bytes()
    for index, info in md_ours.storage_data.items():
        piece = blob[info.offset:info.offset + info.length]
        obj = torch.load(io.BytesIO(piece), weights_only=False)
        if isinstance(obj, torch.Tensor):
            assert info.offset % 64 == 0
        stock_info = md_stock.storage_data[index]
        stock_blob = (stock / stock_info.relative_path).read_bytes()
        stock_obj = torch.load(io.BytesIO(stock_blob[stock_info.offset:stock_info.offset + stock_info.length]),
                               weights_only=False)
        states.assert_same(stock_obj, obj, index.fqn)


def _save_two_ranks(rank, world, cfg):
    dcp.save(states.full_state(34), storage_writer=TieredWriter(cfg, 7, persist=True))


def test_two_rank_step_loads_with_stock_reader_in_one_process(agent, tmp_path):
    cfg = agent.config("interop2")
    run_ranks(tmp_path, 2, _save_two_ranks, cfg)
    wait_durable(cfg, 7, timeout_s=60)
    step_dir = agent.durable / "interop2" / "step_0000000007"
    names = {p.name for p in step_dir.iterdir()}
    assert {".metadata", "__0_0.distcp", "__1_0.distcp"} <= names, names
    _check(_stock_load(step_dir), 34)
