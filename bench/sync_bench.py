#!/usr/bin/env python3
"""sync_bench.py - `tierckpt sync --once` against boto3's s3transfer, one run, one moto server.

    python bench/sync_bench.py [--json] [--small-files 10000] [--small-size 4KiB] [--big-size 2GiB]
                               [--concurrency 8] [--build-dir build/release]

Two trees on tmpfs, each pushed to its own fresh prefix of one local moto
server (started here, 127.0.0.1, its files on tmpfs) by each method in turn:

  small  --small-files files of --small-size bytes in 100 directories
         (checkpoint shards, configs, RNG states);
  big    one file of --big-size bytes.

  ours   build/release/tools/cli/tierckpt sync --local TREE --remote
         s3://bucket/prefix?endpoint=... --once --no-pull --concurrency N:
         files N at a time, large files as parallel multipart uploads.
  boto3  s3transfer's TransferManager with TransferConfig() defaults (10
         threads, 8 MiB parts): one upload() per file, all submitted at once,
         then waited for -- what `aws s3 sync` / `aws s3 cp --recursive` do.

Before the methods, one untimed upload of the small tree warms the server
(see s3_bench.py: a fresh moto's first client pays more). Every method's
result is checked (key count and total bytes listed with boto3). Reported:
wall seconds, files/s or GB/s, client CPU seconds (the method's own process:
user + system), and ours / boto3 ratios of time and CPU. One repetition:
moto bounds every figure here (docs/benchmarks.md).

Output: a table, or with --json ONE JSON object
{"machine", "command", "git", "config", "results", "ratios"}.
Exit status: 0; 1 when a method fails; 2 when something is missing.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
from machine import machine_info  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BUCKET = "tc-sync-bench"
UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1000, "mb": 10**6, "gb": 10**9}


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in UNITS:
        raise argparse.ArgumentTypeError(f"bad size {text!r}; use bytes or e.g. 4KiB, 2GiB")
    return int(m.group(1)) * UNITS[m.group(2).lower()]


def make_trees(root: Path, n: int, small: int, big: int):
    small_dir, big_dir = root / "small", root / "big"
    for i in range(n):
        d = small_dir / f"shard-{i % 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"file-{i:06d}.bin").write_bytes(os.urandom(small))
    big_dir.mkdir(parents=True)
    chunk = os.urandom(64 << 20)
    with open(big_dir / "model.safetensors", "wb") as f:
        left = big
        while left > 0:
            f.write(chunk[:min(left, len(chunk))])
            left -= len(chunk)
    return small_dir, big_dir


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_ours(cli, tree, endpoint, prefix, concurrency, env):
    url = f"s3://{BUCKET}/{prefix}?endpoint={endpoint}&region=us-east-1"
    cpu0, t0 = children_cpu(), time.perf_counter()
    r = subprocess.run([str(cli), "sync", "--local", str(tree), "--remote", url, "--once", "--no-pull",
                        "--concurrency", str(concurrency), "--json"], env=env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"tierckpt sync failed: {r.stderr[-2000:]}")
    return wall, children_cpu() - cpu0


BOTO3_WORKER = r'''
import os, sys, time, resource, boto3
from boto3.s3.transfer import TransferConfig
from s3transfer.manager import TransferManager
tree, endpoint, bucket, prefix = sys.argv[1:5]
client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
files = [os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs]
t0 = time.perf_counter()
with TransferManager(client, TransferConfig()) as tm:
    futures = [tm.upload(p, bucket, prefix + "/" + os.path.relpath(p, tree)) for p in files]
    for f in futures:
        f.result()
wall = time.perf_counter() - t0
r = resource.getrusage(resource.RUSAGE_SELF)
print(wall, r.ru_utime + r.ru_stime)
'''


def run_boto3(tree, endpoint, prefix, env):
    r = subprocess.run([sys.executable, "-c", BOTO3_WORKER, str(tree), endpoint, BUCKET, prefix], env=env,
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError(f"boto3 upload failed: {r.stderr[-2000:]}")
    wall, cpu = map(float, r.stdout.split())
    return wall, cpu  # CPU includes the interpreter's start-up and imports (~0.3 s)


def check(client, prefix, files, total):
    keys, size = 0, 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/"):
        for o in page.get("Contents", []):
            keys += 1
            size += o["Size"]
    if (keys, size) != (files, total):
        raise RuntimeError(f"{prefix}: {keys} keys, {size} bytes listed; expected {files}, {total}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true")
    p.add_argument("--small-files", type=int, default=10000)
    p.add_argument("--small-size", type=parse_size, default=4 << 10)
    p.add_argument("--big-size", type=parse_size, default=2 << 30)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--build-dir", default="build/release")
    args = p.parse_args()
    build = Path(args.build_dir) if Path(args.build_dir).is_absolute() else REPO / args.build_dir
    cli = build / "tools" / "cli" / "tierckpt"
    if not cli.exists():
        print(f"sync_bench.py: {cli} is missing; build first: scripts/setup.sh release", file=sys.stderr)
        sys.exit(2)
    from s3_server import DUMMY_KEYS, MotoServer, isolated_aws_env  # noqa: PLC0415
    work = Path(tempfile.mkdtemp(prefix="tierckpt-syncbench-", dir="/dev/shm"))
    env = isolated_aws_env()
    env.update(DUMMY_KEYS.env())
    results = {}
    try:
        print("sync_bench.py: writing the trees ...", file=sys.stderr)
        small, big = make_trees(work, args.small_files, args.small_size, args.big_size)
        with MotoServer(buckets=(BUCKET,)) as server:
            client = server.boto3_client()
            print("sync_bench.py: warming the server up (untimed) ...", file=sys.stderr)
            run_ours(cli, small, server.endpoint, f"warmup-{uuid.uuid4().hex[:6]}", args.concurrency, env)
            for tree_name, tree, files, total in (("small", small, args.small_files, args.small_files * args.small_size),
                                                  ("big", big, 1, args.big_size)):
                for method in ("ours", "boto3"):
                    prefix = f"{method}-{tree_name}-{uuid.uuid4().hex[:6]}"
                    print(f"sync_bench.py: {method} {tree_name} ...", file=sys.stderr)
                    if method == "ours":
                        wall, cpu = run_ours(cli, tree, server.endpoint, prefix, args.concurrency, env)
                    else:
                        wall, cpu = run_boto3(tree, server.endpoint, prefix, env)
                    check(client, prefix, files, total)
                    results.setdefault(tree_name, {})[method] = {
                        "seconds": wall, "cpu_s": cpu, "files": files, "bytes": total,
                        "files_per_s": files / wall, "gbps": total / wall / 1e9}
    except RuntimeError as e:
        print(f"sync_bench.py: {e}", file=sys.stderr)
        sys.exit(1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratios = {t: {"time_ours_vs_boto3": r["ours"]["seconds"] / r["boto3"]["seconds"],
                  "cpu_ours_vs_boto3": r["ours"]["cpu_s"] / r["boto3"]["cpu_s"]} for t, r in results.items()}
    report = {"machine": machine_info(), "command": " ".join([sys.executable, *sys.argv]),
              "config": vars(args), "results": results, "ratios": ratios}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for t, r in results.items():
        for m, x in r.items():
            print(f"{t:5} {m:5} {x['seconds']:8.2f} s  {x['files_per_s']:9.1f} files/s  {x['gbps']:6.3f} GB/s  "
                  f"cpu {x['cpu_s']:6.2f} s")
        print(f"{t:5} ours/boto3: time {ratios[t]['time_ours_vs_boto3']:.2f}x, cpu {ratios[t]['cpu_ours_vs_boto3']:.2f}x")


if __name__ == "__main__":
    main()
