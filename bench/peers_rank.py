"""peers_rank.py - one rank of bench/peers.py's torchrun job (gloo, CPU).

    torchrun --nproc-per-node 2 bench/peers_rank.py OPTS.json

Builds the workload (this rank's half of the state, under rank-specific keys so that DCP saves
every byte on its owner), makes every method's adapter (bench/peers_methods.py; one that raises
Skip is left out with its reason), then runs --rounds rounds. Each round changes a strided slice
of every tensor (outside the timing), then every method saves once, in an order rotated per
round, and then every method loads once into zeroed destination tensors, which are compared with
the state (torch.equal per tensor). Every timed operation starts right after a barrier; each
rank's times go into RESULTS_DIR/rank<r>.json, and the driver takes the slowest rank's.
"""
from __future__ import annotations

import datetime
import gc
import json
import os
import sys
import time
import traceback
import warnings
from pathlib import Path

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
sys.path.insert(0, str(Path(__file__).resolve().parent))

MIB = 1 << 20


def tensors_of(obj, prefix=""):
    """(dotted key, tensor) pairs of a nested dict, in key order."""
    import torch

    out = []
    for k in sorted(obj, key=str):
        v = obj[k]
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out += tensors_of(v, key + ".")
        elif isinstance(v, torch.Tensor):
            out.append((key, v))
    return out


def large_state(rank: int, nbytes: int, count: int = 16):
    """count fp32 tensors of nbytes/count bytes each (rows of 1024)."""
    import torch

    g = torch.Generator().manual_seed(1000 + rank)
    numel = nbytes // count // 4
    shape = (numel // 1024, 1024) if numel % 1024 == 0 else (numel,)
    return {f"rank{rank}": {f"t{i:02d}": torch.randn(shape, generator=g) for i in range(count)}}


def model_state(rank: int, nbytes: int):
    """A small transformer's parameters plus AdamW state (exp_avg, exp_avg_sq, step) after one step,
    keyed by parameter name, sized so that the whole state is about nbytes (>= 1,500 tensors)."""
    import torch
    from torch import nn

    torch.manual_seed(2000 + rank)
    layers, vocab = 32, 8192
    # 12 d^2 per layer (attention 4 d^2, MLP 8 d^2) plus the embeddings; state = 3 x parameters.
    params = nbytes // 4 // 3
    d = 64
    while 12 * (d + 32) ** 2 * layers + 2 * vocab * (d + 32) <= params:
        d += 32
    heads = max(1, d // 64)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(512, d)
            self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, dropout=0.0)
                                        for _ in range(layers))
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, x):
            h = self.embed(x) + self.pos(torch.arange(x.shape[1]))
            for b in self.blocks:
                h = b(h)
            return self.head(self.norm(h))

    model = Model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, vocab, (2, 16))
    nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten()).backward()
    opt.step()
    names = {p: n for n, p in model.named_parameters()}
    optim = {names[p]: {k: v.detach().clone() for k, v in s.items()} for p, s in opt.state.items()}
    params_sd = {n: p.detach().clone() for n, p in model.named_parameters()}
    return {f"rank{rank}": {"model": params_sd, "optim": optim}}


def mutate(state, rnd: int) -> None:
    """Changes one element per 16 KiB of every tensor (so each round saves new bytes)."""
    for _, t in tensors_of(state):
        flat = t.view(-1)
        if flat.numel():
            flat[rnd % 7::4096].add_(1)


def zeros_like_state(state):
    import torch

    return {k: zeros_like_state(v) if isinstance(v, dict) else torch.zeros_like(v) for k, v in state.items()}


def copy_into(dest, got, where="") -> None:
    """Copies a returned state into dest's tensors (as model.load_state_dict would)."""
    for k, d in dest.items():
        if k not in got:
            raise KeyError(f"the loaded state has no {where}{k}")
        if isinstance(d, dict):
            copy_into(d, got[k], f"{where}{k}.")
        elif got[k].data_ptr() != d.data_ptr():  # a reader that filled dest in place returns dest's tensors
            d.copy_(got[k])


def mismatches(dest, state) -> list[str]:
    import torch

    want, got = tensors_of(state), tensors_of(dest)
    if [k for k, _ in want] != [k for k, _ in got]:
        return ["<keys differ>"]
    return [k for (k, a), (_, b) in zip(want, got) if a.dtype != b.dtype or not torch.equal(a, b)]


class Ctx:
    def __init__(self, rank, world, opts):
        self.rank, self.world, self.opts = rank, world, opts
        self.shm = Path(opts["shm_dir"])


def run(rank: int, world: int, opts: dict) -> dict:
    import torch
    import torch.distributed as dist
    import peers_methods

    torch.set_num_threads(1)
    ctx = Ctx(rank, world, opts)
    t0 = time.perf_counter()
    if opts["workload"] == "c":
        state = model_state(rank, opts["bytes"] // world)
    else:
        state = large_state(rank, opts["bytes"] // world)
    tensors = tensors_of(state)
    rec = {"rank": rank, "build_s": time.perf_counter() - t0, "tensors": len(tensors),
           "state_bytes": sum(t.numel() * t.element_size() for _, t in tensors),
           "sizes": {"min": min(t.numel() * t.element_size() for _, t in tensors),
                     "max": max(t.numel() * t.element_size() for _, t in tensors)},
           "methods": {}, "skipped": {}}
    dest = zeros_like_state(state)
    methods = {}
    for name in opts["methods"]:
        if name in opts["skipped"]:
            continue
        try:
            methods[name] = peers_methods.make(name, ctx)
        except peers_methods.Skip as e:
            rec["skipped"][name] = str(e)
        except Exception as e:  # noqa: BLE001 - a peer that cannot start is a skip, with its reason
            where = traceback.extract_tb(e.__traceback__)[-1]
            rec["skipped"][name] = (f"{name}: setup failed: {type(e).__name__}: {e} "
                                    f"(at {Path(where.filename).name}:{where.lineno})")
    # Every rank must run the same methods (they are collective): drop any skipped on some rank.
    names = [n for n in opts["methods"] if n in methods]
    agreed = [None] * world
    dist.all_gather_object(agreed, names)
    common = [n for n in names if all(n in a for a in agreed)]
    for n in names:
        if n not in common:
            rec["skipped"].setdefault(n, f"{n}: skipped on another rank")
            methods.pop(n).close()
    for n in common:
        rec["methods"][n] = {"label": methods[n].label, "save": [], "load": []}

    def timed_barrier():
        dist.barrier()
        return time.perf_counter()

    failed = {}
    settle = float(opts.get("settle_s", 0))
    for rnd in range(opts["rounds"]):
        mutate(state, rnd)
        step = rnd + 1
        order = [n for n in common if n not in failed]
        k = rnd % max(1, len(order))
        order = order[k:] + order[:k]
        for n in order:
            m = methods[n]
            try:
                if hasattr(m, "prepare"):
                    m.prepare(step)
                time.sleep(settle)  # the previous method's background work ends first (peers.py --settle-s)
                gc.collect()
                t0 = timed_barrier()
                wait = m.save(state, step)
                t1 = time.perf_counter()
                wait()
                t2 = time.perf_counter()
                rec["methods"][n]["save"].append({"round": rnd, "blocking_s": t1 - t0, "commit_s": t2 - t0})
            except Exception as e:  # noqa: BLE001
                failed[n] = f"{n}: save of round {rnd} failed: {type(e).__name__}: {e}"
        dist.barrier()
        for n in order:
            if n in failed:
                continue
            m = methods[n]
            for _, t in tensors_of(dest):
                t.zero_()
            time.sleep(settle)
            try:
                t0 = timed_barrier()
                got = m.load(step, dest)
                t1 = time.perf_counter()
                if got is not None:
                    copy_into(dest, got)
                t2 = time.perf_counter()
                del got
                bad = mismatches(dest, state)
                rec["methods"][n]["load"].append({"round": rnd, "load_s": t2 - t0, "api_s": t1 - t0,
                                                  "correct": not bad, "bad_keys": bad[:5]})
            except Exception as e:  # noqa: BLE001
                failed[n] = f"{n}: load of round {rnd} failed: {type(e).__name__}: {e}"
        # a failure on one rank must stop that method on all ranks (its collectives would hang)
        allf = [None] * world
        dist.all_gather_object(allf, failed)
        for f in allf:
            for n, why in f.items():
                failed.setdefault(n, why)
    rec["failed"] = failed
    for n in common:
        methods[n].close()
    dist.barrier()
    return rec


def main() -> None:
    import torch.distributed as dist

    opts = json.loads(Path(sys.argv[1]).read_text())
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=opts["timeout_s"]))
    out = Path(opts["results_dir"])
    try:
        rec = run(rank, world, opts)
        (out / f"rank{rank}.json").write_text(json.dumps(rec))
    except BaseException:
        (out / f"rank{rank}.error").write_text(traceback.format_exc())
        raise
    finally:
        dist.destroy_process_group()
    os._exit(0)  # peers leave non-daemon threads and saver processes behind; the driver cleans up


if __name__ == "__main__":
    main()
