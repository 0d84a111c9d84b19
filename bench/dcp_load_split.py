#!/usr/bin/env python3
"""dcp_load_split.py - where one process's CPU goes in a `dcp.load` of workload (c) through TieredReader.

    python bench/dcp_load_split.py [--socket S]   # S: a running tierckptd; default: an embedded agent
                                                  # (which stays up afterwards, as for a trainer:
                                                  # `tierckpt agent stop` stops it)

Saves bench/peers_rank.py's model_state(0, 512 MiB) (1,556 tensors, ~540 MB) once with TieredWriter, then
loads it 12 times into zeroed tensors (no process group) and prints the medians of the last 10 in CPU time
of the calling thread (time.thread_time: less stretched than wall time on a loaded machine): the whole
load, DCP's DefaultLoadPlanner steps, and tierckpt's reader steps; then a copy_ of every tensor of the same
state, the limit of read_data. A program to read, not a benchmark with targets (issue 40: what is left of
DCP's own per-load work).
"""
import sys, time, statistics, collections
sys.path.insert(0, "bench")
import torch, torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from peers_rank import model_state, zeros_like_state
from tierckpt.torch import CheckpointConfig, TieredReader, TieredWriter
import argparse, os
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--socket", default=None, help="a running tierckptd's socket (default: an embedded agent)")
args = ap.parse_args()
cfg = CheckpointConfig(namespace=f"loadsplit-{os.getpid()}", socket=args.socket, auto_start=args.socket is None,
                       keep_last=1)
state = model_state(0, 512 << 20)
dcp.save(state, storage_writer=TieredWriter(cfg, step=1), no_dist=True)
dest = zeros_like_state(state)
acc = collections.defaultdict(float)
def wrap(cls, name, label):
    f = getattr(cls, name)
    def w(*a, **k):
        t = time.thread_time()
        try: return f(*a, **k)
        finally: acc[label] += time.thread_time() - t
    setattr(cls, name, w)
wrap(DefaultLoadPlanner, "set_up_planner", "dcp: set_up_planner (flatten state dict)")
wrap(DefaultLoadPlanner, "create_local_plan", "dcp: create_local_plan (read items)")
wrap(TieredReader, "read_metadata", "tierckpt: read_metadata (unpickle)")
wrap(TieredReader, "read_data", "tierckpt: read_data (copies, layout checks, commit_tensor)")
rows = collections.defaultdict(list); total = []; wall = []
t_copy = []
flat = [t for t in dest.values()] if isinstance(dest, dict) else None
for i in range(12):
    acc.clear()
    t0 = time.thread_time(); w0 = time.perf_counter()
    dcp.load(dest, storage_reader=TieredReader(cfg, step=1), no_dist=True)
    total.append(time.thread_time() - t0); wall.append(time.perf_counter() - w0)
    for k, v in acc.items(): rows[k].append(v)
med = lambda xs: statistics.median(xs[2:]) * 1e3
print(f"dcp.load CPU ms {med(total):.1f} (wall {med(wall):.1f})")
for k, v in rows.items(): print(f"  {k}: {med(v):.1f} ms")
ts = [t for t in state.values() if torch.is_tensor(t)] if isinstance(state, dict) else []
def tensors(o):
    if torch.is_tensor(o): yield o
    elif isinstance(o, dict):
        for v in o.values(): yield from tensors(v)
    elif isinstance(o, (list, tuple)):
        for v in o: yield from tensors(v)
src = list(tensors(state)); dst = list(tensors(dest))
print("tensors", len(src), "bytes", sum(t.numel() * t.element_size() for t in src))
cs = []
for i in range(8):
    t = time.thread_time()
    for a, b in zip(dst, src): a.copy_(b)
    cs.append(time.thread_time() - t)
print(f"copy_ of every tensor CPU ms {statistics.median(cs[2:]) * 1e3:.1f}")
