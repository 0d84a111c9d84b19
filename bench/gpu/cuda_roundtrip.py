"""tierckpt on a GPU machine: CUDA state dicts through the DCP front and the Checkpointer, checked
bit for bit, a trainer killed after a commit, and the time of each against a pinned copy (the limit)
measured in the same run. Run by bench/gpu/run_on_device.sh after it installs tierckpt; prints one
line per check (PASS/FAIL) and two tables (times; registrations), and exits non-zero if any check
failed.

    python3 bench/gpu/cuda_roundtrip.py [--gib 2] [--tensors 16] [--saves 4]
    python3 bench/gpu/cuda_roundtrip.py --device cpu --gib 0.05 --tensors 4   # the script's logic, no GPU

The agent is the embedded default (started by the first save), its root on /dev/shm, its durable
tier a temporary directory. The GPU path (tierckpt/torch/_cuda.py, decisions 114-115): each mapping
of the agent's shared memory the client keeps is registered with CUDA once (reported apart, per
save: with keep_last 1 the first two saves map new segments, later ones reuse them), copies run
non_blocking on a side stream, and a save returns once they are done; loads copy host -> device
from the registered mapping when this process saved the step.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import uuid

import torch

DEVICE = "cuda"
NO_DIST: dict = {}  # {"no_dist": True} where this torch's DCP takes it (one process, no group)
RESULTS: list[tuple[str, bool, str]] = []
TIMES: list[tuple[str, float, float]] = []  # (what, seconds, bytes)
REGS: list[tuple[str, int, float, int]] = []  # (save, registrations, seconds registering, bytes registered)


def reg_stats() -> dict:
    from tierckpt.torch import _cuda  # the GPU path's registry (zeros until a CUDA save)
    return _cuda.stats()


def note_registrations(what: str, before: dict) -> dict:
    after = reg_stats()
    REGS.append((what, after["registrations"] - before["registrations"],
                 after["register_seconds"] - before["register_seconds"],
                 after["registered_bytes"] - before["registered_bytes"]))
    return after


def check(name: str):
    def wrap(fn):
        def run(*a, **k):
            try:
                detail = fn(*a, **k) or ""
                RESULTS.append((name, True, detail))
                print(f"PASS {name} {detail}", flush=True)
            except Exception as e:  # noqa: BLE001 - every check runs; each failure is reported
                RESULTS.append((name, False, f"{type(e).__name__}: {e}"))
                print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
                traceback.print_exc()
        return run
    return wrap


def big_state(gib: float, tensors: int, seed: int) -> dict:
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    n = int(gib * (1 << 30) / 2 / tensors)
    return {f"w{i}": torch.randn(n, generator=g, device=DEVICE, dtype=torch.float32).to(torch.bfloat16)
            for i in range(tensors)}


def model_state(seed: int) -> dict:
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(512, nhead=8, dim_feedforward=2048, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 6).to(DEVICE)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(4, 64, 512, device=DEVICE)
    model(x).square().mean().backward()
    optim.step()
    return {"model": model.state_dict(), "optim": optim.state_dict(), "step": 1}


def nbytes(sd) -> int:
    if isinstance(sd, torch.Tensor):
        return sd.numel() * sd.element_size()
    if isinstance(sd, dict):
        return sum(nbytes(v) for v in sd.values())
    if isinstance(sd, (list, tuple)):
        return sum(nbytes(v) for v in sd)
    return 0


def zeros_like(sd):
    if isinstance(sd, torch.Tensor):
        return torch.zeros_like(sd)
    if isinstance(sd, dict):
        return {k: zeros_like(v) for k, v in sd.items()}
    if isinstance(sd, list):
        return [zeros_like(v) for v in sd]
    return sd


def assert_equal(a, b, where="state"):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), f"{where}: not a tensor after load"
        assert b.device == a.device, f"{where}: loaded on {b.device}, saved from {a.device}"
        assert torch.equal(a, b), f"{where}: bytes differ"
    elif isinstance(a, dict):
        assert set(a) == set(b), f"{where}: keys differ"
        for k in a:
            assert_equal(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b)):
            assert_equal(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def timed(what: str, nb: int, fn):
    sync()
    t0 = time.perf_counter()
    out = fn()
    sync()
    dt = time.perf_counter() - t0
    TIMES.append((what, dt, nb))
    return out


def pinned_limit(sd: dict) -> None:
    """The limit: a device-to-host copy into pinned memory kept across saves, and back."""
    bufs = {k: torch.empty(v.shape, dtype=v.dtype, pin_memory=DEVICE == "cuda") for k, v in sd.items()}
    nb = nbytes(sd)
    for rnd in range(2):
        timed(f"limit: D2H into pinned memory (round {rnd})", nb,
              lambda: [bufs[k].copy_(v, non_blocking=True) for k, v in sd.items()])
    timed("limit: H2D from pinned memory", nb, lambda: [v.copy_(bufs[k], non_blocking=True) for k, v in sd.items()])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--tensors", type=int, default=16)
    ap.add_argument("--saves", type=int, default=4, help="saves per front (the first ones map new segments)")
    ap.add_argument("--device", default="cuda", help="cuda; cpu only to check this script without a GPU")
    ap.add_argument("--child-save", help=argparse.SUPPRESS)  # the trainer killed after its commit
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("tierckpt").setLevel(logging.INFO)  # the registration lines (_cuda.py)
    global DEVICE
    DEVICE = args.device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("FAIL cuda: torch.cuda.is_available() is False on this machine")
        return 2

    import inspect

    import torch.distributed.checkpoint as dcp
    from tierckpt.torch import Checkpointer, CheckpointConfig, TieredReader, TieredWriter

    if "no_dist" in inspect.signature(dcp.async_save).parameters:
        NO_DIST["no_dist"] = True

    if args.child_save:
        ns = args.child_save
        Checkpointer(CheckpointConfig(ns)).save(3, model_state(seed=33))
        os.kill(os.getpid(), signal.SIGKILL)  # right after the commit: nothing of the process is left
        return 0

    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu"
    print(f"torch {torch.__version__}, {name}, {args.gib} GiB in {args.tensors} tensors", flush=True)
    run = uuid.uuid4().hex[:8]

    big = big_state(args.gib, args.tensors, seed=1)
    nb_big = nbytes(big)
    pinned_limit(big)

    def overwritten_after_return(sd: dict) -> dict:
        """A copy of sd to save, zeroed as soon as the save returns: a save must not need it later."""
        return {k: v.clone() for k, v in sd.items()}

    @check("dcp.async_save(TieredWriter) + dcp.load(TieredReader), CUDA tensors, bit for bit, "
           "the source zeroed right after async_save returned")
    def dcp_front():
        cfg = CheckpointConfig(f"gpu-dcp-{run}")
        before = reg_stats()
        for step in range(1, args.saves + 1):  # first saves map new segments, then steady
            src = overwritten_after_return(big) if step == args.saves else big
            sync()
            t0 = time.perf_counter()
            fut = dcp.async_save(src, storage_writer=TieredWriter(cfg, step), **NO_DIST)
            blocked = time.perf_counter() - t0
            if src is not big:
                for v in src.values():
                    v.zero_()  # training goes on: the step must hold the bytes from before
            fut.result()
            done = time.perf_counter() - t0
            TIMES.append((f"DCP front: async_save blocked (save {step})", blocked, nb_big))
            TIMES.append((f"DCP front: async_save committed (save {step})", done, nb_big))
            before = note_registrations(f"DCP front save {step}", before)
        target = zeros_like(big)
        timed("DCP front: dcp.load into CUDA tensors", nb_big,
              lambda: dcp.load(target, storage_reader=TieredReader(cfg, args.saves), **NO_DIST))
        note_registrations("DCP front load", before)
        assert_equal(big, target)

    @check("Checkpointer.save + load, CUDA tensors, bit for bit, the source zeroed right after save returned")
    def checkpointer():
        ck = Checkpointer(CheckpointConfig(f"gpu-ck-{run}"))
        before = reg_stats()
        for step in range(1, args.saves + 1):
            src = overwritten_after_return(big) if step == args.saves else big
            timed(f"Checkpointer: save, committed (save {step})", nb_big, lambda: ck.save(step, src))
            if src is not big:
                for v in src.values():
                    v.zero_()
            before = note_registrations(f"Checkpointer save {step}", before)
        target = zeros_like(big)
        timed("Checkpointer: load into CUDA tensors", nb_big, lambda: ck.load(target, args.saves))
        note_registrations("Checkpointer load", before)
        assert_equal(big, target)

    @check("the GPU path: registration worked, paid by the first saves only (steady saves and loads register "
           "nothing), loads copied from the registered mappings")
    def registration():
        st = reg_stats()
        if DEVICE != "cuda":
            assert st["registrations"] == 0 and not torch.cuda.is_initialized(), f"CPU run touched CUDA: {st}"
            return "(cpu run: nothing registered, CUDA not initialized)"
        assert st["failed"] is None, f"registration failed, the old path ran: {st['failed']}"
        assert st["registered_loads"] >= 2, (f"only {st['registered_loads']} loads copied from a registered mapping "
                                             "(one per front expected): the load path fell back")
        steady = [(w, n) for w, n, _, _ in REGS if n and not any(w.endswith(f"save {i}") for i in (1, 2))]
        assert not steady, f"registered again after the first two saves: {steady} (mappings evicted from the client's cache?)"
        return (f"({st['registrations']} registrations, {st['registered_bytes'] / 2**30:.2f} GiB in "
                f"{st['register_seconds']:.2f} s; {st['unregistrations']} unregistered; "
                f"{st['registered_loads']} objects loaded from a registered mapping)")

    @check("Checkpointer: model + AdamW state on CUDA, bit for bit")
    def model_optim():
        sd = model_state(seed=7)
        ck = Checkpointer(CheckpointConfig(f"gpu-model-{run}"))
        ck.save(1, sd)
        target = zeros_like(sd)
        ck.load(target, 1)
        assert_equal(sd, target)
        return f"({nbytes(sd) / 2**20:.0f} MiB, {len(sd['model'])} model tensors)"

    @check("a trainer SIGKILLed right after its commit: a new process restores the step from memory")
    def killed_trainer():
        ns = f"gpu-kill-{run}"
        child = subprocess.run([sys.executable, __file__, "--device", DEVICE, "--child-save", ns],
                               capture_output=True, text=True, timeout=300)
        assert child.returncode == -signal.SIGKILL, f"the child ended with {child.returncode}: {child.stderr[-2000:]}"
        expected = model_state(seed=33)
        target = zeros_like(expected)
        step = Checkpointer(CheckpointConfig(ns)).load(target)
        assert step == 3, f"restored step {step}, not 3"
        assert_equal(expected, target)

    dcp_front()
    checkpointer()
    registration()
    model_optim()
    killed_trainer()

    limit = next(dt for w, dt, _ in TIMES if w.startswith("limit: D2H") and "round 1" in w)
    print("\n| what | seconds | GB/s | x the pinned copy's time |\n| --- | --- | --- | --- |")
    for what, dt, nb in TIMES:
        print(f"| {what} | {dt:.3f} | {nb / dt / 1e9:.1f} | {dt / limit:.2f} |")
    print("\n| registrations with CUDA (paid apart, once per kept mapping) | count | seconds | GiB |\n"
          "| --- | --- | --- | --- |")
    for what, n, dt, nb in REGS:
        print(f"| {what} | {n} | {dt:.3f} | {nb / 2**30:.2f} |")
    failed = [n for n, ok, _ in RESULTS if not ok]
    print(f"\n{len(RESULTS) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
