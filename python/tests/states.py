"""State dicts for the tests: a model with its optimizer state, and extras that
cover the awkward cases (bf16, int64, non-contiguous views, scalars, nested
Python objects)."""
from __future__ import annotations

import hashlib

import torch
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.norm = torch.nn.LayerNorm(64)
        self.fc2 = torch.nn.Linear(64, 8)
        self.register_buffer("counter", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        return self.fc2(torch.relu(self.norm(self.fc1(x))))


def trained(seed: int, steps: int = 2):
    """A Net and its Adam optimizer after `steps` updates (so the optimizer has state).

    Computed on one thread, so ranks (which run single-threaded) and the test
    process get bit-identical values.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        model = Net()
        optim = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(steps):
            loss = model(torch.randn(16, 32)).square().mean()
            optim.zero_grad()
            loss.backward()
            optim.step()
            model.counter += 1
    finally:
        torch.set_num_threads(threads)
    return model, optim


def extras(seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(12, 10, generator=g)
    return {
        "bf16": torch.randn(7, 5, generator=g).to(torch.bfloat16),
        "i64": torch.randint(-(2**40), 2**40, (33,), generator=g, dtype=torch.int64),
        "transposed": base.t(),
        "strided": base[::3, 1::2],
        "scalar": torch.tensor(float(seed) + 0.5),
        "bools": torch.rand(9, generator=g) > 0.5,
        "empty": torch.empty(0, 4),
        "step": 1000 + seed,
        "nested": {"name": f"run-{seed}", "lrs": [0.1, 0.01, seed], "cfg": {"depth": seed, "tags": ("a", "b")}},
    }


def blank_extras() -> dict:
    """Load targets for extras(): same structure and dtypes, other values (views as targets too)."""
    target_base = torch.zeros(12, 10)
    return {
        "bf16": torch.zeros(7, 5, dtype=torch.bfloat16),
        "i64": torch.zeros(33, dtype=torch.int64),
        "transposed": target_base.t(),  # a non-contiguous destination
        "strided": torch.zeros(4, 5),
        "scalar": torch.tensor(0.0),
        "bools": torch.zeros(9, dtype=torch.bool),
        "empty": torch.empty(0, 4),
        "step": -1,
        "nested": {"name": "", "lrs": [], "cfg": {"depth": -1, "tags": ()}},
    }


def full_state(seed: int) -> dict:
    model, optim = trained(seed)
    model_sd, optim_sd = get_state_dict(model, optim)
    return {"model": model_sd, "optim": optim_sd, "extras": extras(seed)}


def load_target():
    """(state dict to dcp.load into, model, optim) for full_state()."""
    model, optim = trained(seed=12345, steps=1)
    model_sd, optim_sd = get_state_dict(model, optim)
    return {"model": model_sd, "optim": optim_sd, "extras": blank_extras()}, model, optim


def apply(state: dict, model, optim) -> None:
    set_state_dict(model, optim, model_state_dict=state["model"], optim_state_dict=state["optim"])


def assert_same(expected, actual, path: str = "") -> None:
    """Recursive equality: tensors by dtype, shape and value; containers by structure."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: {type(actual).__name__} is not a tensor"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        assert torch.equal(actual.cpu(), expected.cpu()), f"{path}: values differ"
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), \
            f"{path}: keys {sorted(map(str, actual))} != {sorted(map(str, expected))}"
        for k in expected:
            assert_same(expected[k], actual[k], f"{path}.{k}")
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected) and len(actual) == len(expected), f"{path}: {actual!r} != {expected!r}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, f"{path}[{i}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def digest(obj) -> str:
    """A short sha256 over a checkpoint's nested structure: every tensor's dtype, shape and bytes, every
    dict's keys in order, sequences with their type, callables as a marker, other values by repr."""
    h = hashlib.sha256()

    def walk(o):
        if isinstance(o, torch.Tensor):
            t = o.detach().cpu().contiguous()
            h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        elif isinstance(o, dict):
            h.update(f"D{len(o)}".encode())
            for k in sorted(o, key=repr):
                h.update(repr(k).encode())
                walk(o[k])
        elif isinstance(o, (list, tuple)):
            h.update(f"L{type(o).__name__}{len(o)}".encode())
            for v in o:
                walk(v)
        elif callable(o):
            h.update(b"F")
        else:
            h.update(repr(o).encode())

    walk(obj)
    return h.hexdigest()[:16]
