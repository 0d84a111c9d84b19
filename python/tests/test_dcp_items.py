"""Many small items (issue 18, workload (c)): a state dict of >= 1,500 tensors of
mixed dtypes, 0-d step scalars and non-contiguous views round-trips bit for bit,
staged without DefaultSavePlanner and read without parsing an archive; the
per-item fast paths agree with the stock ones; TieredWriter works with DCP's
plan caching; a writer reset() to another step begins that step."""
from __future__ import annotations

import io

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
from torch.distributed.checkpoint.planner import SavePlanner

from conftest import run_ranks
from tierckpt import agent as tc_agent
from tierckpt.torch import TieredReader, TieredWriter, _format, staging

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int8, torch.bool,
          torch.complex64]


def _values(dtype, shape, g):
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-100, 100, shape, generator=g, dtype=dtype)


def many_items(seed: int, layers: int = 130) -> dict:
    """An optimizer-like state of 12 tensors per layer (>= 1,500 in all) plus a few non-tensor values:
    parameters of several dtypes, exp_avg / exp_avg_sq, 0-d step scalars, non-contiguous views, empty ones."""
    g = torch.Generator().manual_seed(seed)
    model, optim = {}, {}
    for i in range(layers):
        dtype = DTYPES[i % len(DTYPES)]
        w = _values(dtype, (24, 16), g)
        model[f"layer{i}.weight"] = torch.nn.Parameter(w, requires_grad=dtype.is_floating_point or dtype.is_complex)
        model[f"layer{i}.bias"] = _values(dtype, (16,), g)
        model[f"layer{i}.weight_t"] = _values(dtype, (16, 24), g).t()  # non-contiguous
        model[f"layer{i}.every_other"] = _values(dtype, (40,), g)[::2]  # strided view of a bigger storage
        model[f"layer{i}.empty"] = _values(dtype, (0, 3), g)
        model[f"layer{i}.scalar"] = _values(dtype, (), g)
        optim[f"layer{i}.weight"] = {"step": torch.tensor(float(seed + i)),  # 0-d fp32, as AdamW keeps it
                                     "exp_avg": torch.randn(24, 16, generator=g),
                                     "exp_avg_sq": torch.rand(24, 16, generator=g),
                                     "exp_avg_col": torch.randn(16, 24, generator=g)[:, 3],  # a column view
                                     "max_exp_avg_sq": torch.rand(3, 5, 7, generator=g).permute(2, 0, 1)}
        optim[f"layer{i}.bias"] = {"step": torch.tensor(float(i))}
    return {"model": model, "optim": optim, "extras": {"epoch": seed, "name": f"run{seed}", "lrs": [0.1, 0.01]}}


def _tensors(state, prefix=""):
    out = []
    for k, v in state.items():
        if isinstance(v, dict):
            out += _tensors(v, f"{prefix}{k}.")
        elif isinstance(v, torch.Tensor):
            out.append((f"{prefix}{k}", v))
    return out


def _zeros_like(state):
    if isinstance(state, dict):
        return {k: _zeros_like(v) for k, v in state.items()}
    if isinstance(state, torch.Tensor):
        return torch.zeros(state.shape, dtype=state.dtype)
    return None


def _blank_extras() -> dict:
    return {"epoch": -1, "name": "", "lrs": [0.0, 0.0]}


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def assert_bit_identical(expected, got):
    want, have = dict(_tensors(expected)), dict(_tensors(got))
    assert want.keys() == have.keys()
    for k, t in want.items():
        assert have[k].dtype == t.dtype and have[k].shape == t.shape, k
        assert torch.equal(_bits(have[k]), _bits(t)), f"{k} differs"
    assert got["extras"] == expected["extras"]


class _NoPlanner(DefaultSavePlanner):
    def __init__(self, *a, **k):
        raise AssertionError("staging built a DefaultSavePlanner for a state dict of plain tensors")


def test_1500_mixed_tensors_round_trip_bit_identical_through_save_and_async_save(agent, monkeypatch):
    cfg = agent.config("items")
    first, second = many_items(1), many_items(2)
    assert len(_tensors(first)) >= 1500
    dcp.save(first, storage_writer=TieredWriter(cfg, 1), no_dist=True)
    monkeypatch.setattr(staging, "DefaultSavePlanner", _NoPlanner)
    dcp.async_save(second, storage_writer=TieredWriter(cfg, 2), no_dist=True).result(timeout=120)
    monkeypatch.undo()

    parsed = []
    real = _format._load_in_place
    monkeypatch.setattr(_format, "_load_in_place", lambda mv: parsed.append(len(mv)) or real(mv))
    for step, expected in ((1, first), (2, second)):
        target = _zeros_like(expected)
        target["extras"] = _blank_extras()
        dcp.load(target, storage_reader=TieredReader(cfg, step), no_dist=True)
        assert_bit_identical(expected, target)
    assert parsed == [], f"{len(parsed)} archives were parsed instead of viewed by their layout"


def test_direct_staging_decomposes_like_default_save_planner():
    state = many_items(3, layers=9)
    state["extras"]["blob"] = b"\x00\x01"
    direct = staging.pieces_of(state)
    planner = DefaultSavePlanner()
    planner.set_up_planner(state, storage_meta=None, is_coordinator=True)
    plan = planner.create_local_plan()
    stock = [staging._placement.prepare(item, planner.resolve_data(item)) for item in plan.items]
    assert [p.item.index for p in direct] == [p.item.index for p in stock]
    assert [p.item.index.offset for p in direct] == [p.item.index.offset for p in stock]
    assert [p.item.type for p in direct] == [p.item.type for p in stock]
    assert [p.size for p in direct] == [p.size for p in stock]
    for d, s in zip(direct, stock):
        if d.raw is not None:
            assert bytes(d.raw) == bytes(s.raw), d.item.index.fqn
        else:
            assert d.tensor is s.tensor or torch.equal(d.tensor, s.tensor), d.item.index.fqn


def test_load_tensor_by_layout_views_in_place_and_a_wrong_guess_still_loads():
    t = torch.randn(33, 7)
    lay = _format.tensor_layout(t.dtype, t.shape)
    buf = bytearray(128 + lay.size)  # the archive at offset 128 of a bigger object
    buf[128:128 + lay.data_offset] = lay.head
    base = torch.frombuffer(buf, dtype=torch.uint8)
    base[128 + lay.data_offset:128 + lay.data_offset + lay.data_len].view(t.dtype).view(t.shape).copy_(t)
    buf[128 + lay.data_offset + lay.data_len:] = lay.tail
    mv = memoryview(buf)[128:]
    fast = _format.load_tensor(mv, t.dtype, t.shape, base=base, base_offset=128)
    assert torch.equal(fast, t)
    assert fast.data_ptr() == base.data_ptr() + 128 + lay.data_offset, "the data was not viewed in place"
    for dtype, shape in ((torch.int32, t.shape), (t.dtype, (7, 33)), (t.dtype, (33, 6))):
        assert torch.equal(_format.load_tensor(mv, dtype, shape, base=base, base_offset=128), t)
    stock = io.BytesIO()
    torch.save(t, stock)  # stock archives (real CRC, other bytes) are parsed, not misread
    assert torch.equal(_format.load_tensor(memoryview(stock.getvalue()), t.dtype, t.shape), t)


@pytest.fixture
def clean_plan_cache():
    caches = [v for k, v in vars(SavePlanner).items() if k.startswith("_cached") and isinstance(v, dict)]
    for c in caches:
        c.clear()
    yield
    for c in caches:
        c.clear()


def _cached_plans(rank, world, cfg):
    for step in (1, 2, 3):
        state = {f"r{rank}": many_items(10 * step + rank, layers=4), "shared": torch.full((8,), float(step))}
        planner = DefaultSavePlanner(enable_plan_caching=True)
        if step == 2:
            dcp.save(state, storage_writer=TieredWriter(cfg, step), planner=planner)
        else:
            dcp.async_save(state, storage_writer=TieredWriter(cfg, step), planner=planner).result(timeout=120)
    for step in (1, 2, 3):
        expected = {f"r{rank}": many_items(10 * step + rank, layers=4), "shared": torch.full((8,), float(step))}
        target = _zeros_like(expected)
        target[f"r{rank}"]["extras"] = _blank_extras()
        dcp.load(target, storage_reader=TieredReader(cfg, step))
        assert_bit_identical(expected[f"r{rank}"], target[f"r{rank}"])
        assert torch.equal(target["shared"], expected["shared"])


def test_plan_caching_unchanged_plans_commit_and_load_on_two_ranks(agent, tmp_path, clean_plan_cache):
    # From the second save on, DCP sends unchanged local plans as SavePlan([], usable=False):
    # the writer takes those ranks' agents from the last save's reports.
    run_ranks(tmp_path, 2, _cached_plans, agent.config("cached", world_size=2))


def test_plan_caching_in_one_process(agent, clean_plan_cache):
    cfg = agent.config("cached1")
    for step in (1, 2, 3):
        planner = DefaultSavePlanner(enable_plan_caching=True)
        dcp.save({"t": torch.full((5, 5), float(step))}, storage_writer=TieredWriter(cfg, step), planner=planner,
                 no_dist=True)
    for step in (1, 2, 3):
        target = {"t": torch.zeros(5, 5)}
        dcp.load(target, storage_reader=TieredReader(cfg, step), no_dist=True)
        assert torch.equal(target["t"], torch.full((5, 5), float(step)))


def test_async_save_of_a_writer_reset_to_another_step_begins_that_step(agent, monkeypatch):
    cfg = agent.config("resetstep")
    begun = []
    real_call = tc_agent.call

    def call(config, fn):
        def recording(c):
            real_begin = c.begin_save

            class Spy:
                def __getattr__(self, name):
                    return getattr(c, name)

                def begin_save(self, ns, step):
                    begun.append(step)
                    return real_begin(ns, step)
            spy = Spy()
            result = fn(spy)
            return c if result is spy else result
        return real_call(config, recording)

    writer = TieredWriter(cfg, 1)
    monkeypatch.setattr(tc_agent, "call", call)
    dcp.save({"t": torch.ones(4)}, storage_writer=writer, no_dist=True)
    assert begun == [1]
    writer.reset("tierckpt://resetstep/2")
    dcp.async_save({"t": torch.full((4,), 2.0)}, storage_writer=writer, no_dist=True).result(timeout=60)
    assert begun == [1, 2], f"BeginSave calls by step: {begun} (the reset writer's save of step 2 must begin it)"
    target = {"t": torch.zeros(4)}
    dcp.load(target, storage_reader=TieredReader(cfg, 2), no_dist=True)
    assert torch.equal(target["t"], torch.full((4,), 2.0))
