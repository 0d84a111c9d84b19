"""A small training job that checkpoints every step through tierckpt's tiers.

Run with torchrun (2 ranks, gloo, CPU):

    torchrun --standalone --nproc-per-node 2 examples/train.py --namespace demo --steps 12

Every step is saved with `dcp.async_save` into the node agent's shared memory
(started on demand: the embedded default); every `--persist-every` steps the
step also goes to the durable tier (`./checkpoints` unless configured). With
`--crash-at-step K` rank 0 SIGKILLs itself right after issuing the save of step
K, in the middle of that save. Run again without it: the job resumes from the
newest committed step, checks that the restored model and optimizer state is
bit-identical to what was saved, and trains on.

Printed per save (rank 0): the blocking time of async_save (the trainer's
pause), the time to memory commit, and for persisted steps the time to durable
commit.
"""
import argparse
import hashlib
import os
import signal
import sys
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.nn.parallel import DistributedDataParallel as DDP

from tierckpt.torch import CheckpointConfig, TieredReader, TieredWriter, latest_step, list_steps, wait_durable


class TinyTransformer(torch.nn.Module):
    def __init__(self, vocab=512, dim=256, layers=3):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        layer = torch.nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=4 * dim, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)))


def batch(step, rank, vocab=512, seq=32, size=8):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randint(0, vocab, (size, seq), generator=g)
    return x, torch.roll(x, shifts=-1, dims=1)


def digest(model, optim):
    """sha256 over every tensor and value of the model + optimizer state, in key order."""
    msd, osd = get_state_dict(model, optim)
    h = hashlib.sha256()

    def feed(prefix, obj):
        if isinstance(obj, dict):
            for k in sorted(obj, key=str):
                feed(f"{prefix}.{k}", obj[k])
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                feed(f"{prefix}[{i}]", v)
        elif isinstance(obj, torch.Tensor):
            h.update(prefix.encode())
            h.update(obj.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
                     if obj.numel() else b"")
        else:
            h.update(f"{prefix}={obj!r}".encode())

    feed("model", msd)
    feed("optim", osd)
    return h.hexdigest()


def report_durable(cfg, step, t0, log):
    wait_durable(cfg, step, timeout_s=300)
    log(f"step {step:3d} durable commit {(time.perf_counter() - t0) * 1e3:7.1f} ms after the save began")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--namespace", default="demo")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--persist-every", type=int, default=4)
    p.add_argument("--crash-at-step", type=int, default=-1)
    p.add_argument("--digests", default="./checkpoints/digests", help="where rank 0 records state digests")
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(TinyTransformer())
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    cfg = CheckpointConfig(args.namespace, persist_every=args.persist_every)
    digests = Path(args.digests) / args.namespace
    digests.mkdir(parents=True, exist_ok=True)
    log = (lambda *a: print(*a, flush=True)) if rank == 0 else (lambda *a: None)

    start = 0
    resumed = latest_step(cfg)
    if resumed is not None:
        tier = {s.step: s for s in list_steps(cfg)}[resumed]
        msd, osd = get_state_dict(model, optim)
        state = {"model": msd, "optim": osd, "extra": {"step": 0}}
        t0 = time.perf_counter()
        dcp.load(state, storage_reader=TieredReader(cfg, step=resumed))
        set_state_dict(model, optim, model_state_dict=state["model"], optim_state_dict=state["optim"])
        load_s = time.perf_counter() - t0
        start = state["extra"]["step"] + 1
        expected = (digests / f"step_{resumed}.sha256").read_text().strip()
        same = digest(model, optim) == expected
        log(f"resumed from step {resumed} (memory tier: {tier.memory or 'absent'}, durable: "
            f"{tier.durable or 'absent'}) in {load_s:.3f} s; model+optimizer state identical to the "
            f"saved one: {'yes' if same else 'NO'}")
        if not same:
            sys.exit(f"restored state of step {resumed} differs from the state that was saved")
    else:
        log(f"no checkpoint in namespace {args.namespace}: starting from scratch")

    total_params = sum(p.numel() for p in model.parameters())
    log(f"{world} ranks, {total_params / 1e6:.2f} M parameters; checkpoint every step, durable every "
        f"{args.persist_every} steps")
    pending = None
    durable_waits = []
    for step in range(start, args.steps):
        x, y = batch(step, rank)
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optim.zero_grad()
        loss.backward()
        optim.step()

        if pending is not None:
            pending.result()  # one save in flight at a time
        msd, osd = get_state_dict(model, optim)
        state = {"model": msd, "optim": osd, "extra": {"step": step}}
        if rank == 0:
            (digests / f"step_{step}.sha256").write_text(digest(model, optim) + "\n")
        writer = TieredWriter(cfg, step)
        t0 = time.perf_counter()
        pending = dcp.async_save(state, storage_writer=writer)
        blocking = time.perf_counter() - t0
        if step == args.crash_at_step and rank == 0:
            log(f"step {step}: simulated crash — SIGKILL of rank 0 in the middle of the save")
            os.kill(os.getpid(), signal.SIGKILL)
        pending.result()
        committed = time.perf_counter() - t0
        pending = None
        log(f"step {step:3d} loss {loss.item():.4f} | save blocking {blocking * 1e3:7.1f} ms, "
            f"memory commit {committed * 1e3:7.1f} ms" + (", persisting" if writer.persist else ""))
        if writer.persist and rank == 0:
            # The agent persists in the background; training goes on meanwhile.
            t = threading.Thread(target=report_durable, args=(cfg, step, t0, log))
            t.start()
            durable_waits.append(t)
    for t in durable_waits:
        t.join()
    dist.barrier()
    log("training finished")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
