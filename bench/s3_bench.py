#!/usr/bin/env python3
"""s3_bench.py - tierckpt's S3 durable tier against boto3 and s3torchconnector, one run.

    python bench/s3_bench.py [--json] [--size 2GiB] [--objects 8] [--reps 1]
                             [--build-dir build/release] [--threads 1] [--s3torch-threads 1] [--s3torch-gbps 1]
                             [--part-size 16MiB] [--max-part-size 1GiB] [--concurrency 8] [--limit-streams 1]
                             [--methods limit,ours,boto3,s3torch] [--timeout 1800] [--warmup 1]
                             [--server moto|ceph]

Install the bench-only Python packages first (pinned; not needed by the tests):

    .venv/bin/pip install --no-deps -r requirements-bench.txt

(--no-deps: s3torchconnector declares torch as a dependency and pip would
otherwise touch the venv's pinned torch 2.13.0.) boto3 and moto[server] come
from requirements-dev.txt (scripts/setup.sh); build/release/bench/tc_s3_bench
from `scripts/setup.sh release`.

One local S3 server serves every method in turn, on the same step: --size
bytes in --objects objects (default 2 GiB = 8 x 256 MiB) of pseudo-random
bytes. --server moto (default): moto_server, started here on 127.0.0.1, its
files on tmpfs. --server ceph: Ceph's radosgw from Debian in a throwaway
one-node cluster started here (tests/integration/ceph_rgw.py: monitor, one
memstore OSD, RGW on loopback; scripts/setup.sh installs it); its server CPU
is the three daemons'. The methods:

  limit    the same bytes sent once over one loopback TCP connection per
           stream (--limit-streams) to a receiving process: the ceiling of any
           HTTP client here (no server work, no HTTP).
  ours     build/release/bench/tc_s3_bench: tierckpt's C++ S3 path, the
           ObjectStore of s3://bucket/prefix?endpoint=..&part_size=..&concurrency=..
           (PutObjects of the whole step + CommitStep, as the agent's
           persister does: all objects' requests through one pool of
           --concurrency connections; ReadObjectToFile of each object into a
           fresh tmpfs file, --threads objects at a time, ranges in parallel
           inside each object).
  boto3    boto3's managed transfer with TransferConfig defaults: upload_file
           of each object from a tmpfs file, download_file to a tmpfs file.
  s3torch  s3torchconnector 1.5.0's DCP S3StorageWriter / S3StorageReader
           (dcp.save / dcp.load, no_dist) of a state dict of --objects uint8
           tensors of the same bytes, --s3torch-threads writer threads
           (DCP's default is 1); path-style, the moto endpoint.

Before the methods, one untimed upload and download of the step (tc_s3_bench,
deleted afterwards) warms the server: against a fresh moto the first method
measured paid 30-80 % more server CPU per GiB than the same method run
second (both orders measured), so without it the order decided the ratios.

Each method runs in its own process, so its CPU time is its own: every
worker measures its upload and its download phase with getrusage(RUSAGE_SELF)
(user + system, all threads) and wall time, and reports each phase's start
and end on CLOCK_MONOTONIC; the driver samples moto's CPU (/proc/PID/stat)
meanwhile and charges it to the phase separately (server_cpu_s), never to the
client. Every download is compared with what was uploaded (outside the
timing); a mismatch fails that method. Each method's objects are deleted
before the next method runs.

Reported per method and phase: GB/s (1e9 bytes/s), CPU seconds per GiB of
the client, server CPU seconds per GiB; medians over --reps. Ratios: ours /
boto3 and ours / s3torch throughput (the issue's target: >= 1.5 x boto3), CPU
per GiB (target: <= 0.5 x boto3), and ours / limit. Since one Python moto
process serves every method, the server's CPU bounds every throughput here:
compare server_cpu_s too.

Output: a readable table, or with --json ONE JSON object:
    {"machine", "command", "git", "config", "server",
     "results": {method: {"config", "repetitions", "summary", "interference", "command"}},
     "ratios", "targets"}
("repetitions" holds each phase's raw numbers, "summary" the medians,
"interference" the CPU other processes used meanwhile.)
Exit status: 0, 1 when a method fails (the others still run and are
reported), 2 on bad arguments or something missing (with what to install).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "tests" / "harness"))
from agent_harness import git_info  # noqa: E402  (tests/harness/agent_harness.py)
from machine import machine_info, read_first  # noqa: E402  (bench/machine.py)

GIB = 1 << 30
METHODS = ("limit", "ours", "boto3", "s3torch")
BUCKET = "tierckpt-bench"
REGION = "us-east-1"
UNITS = {"b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 10**6, "mb": 10**6, "mib": 1 << 20,
         "g": 10**9, "gb": 10**9, "gib": 1 << 30, "t": 10**12, "tb": 10**12, "tib": 1 << 40}
TMPFS = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
TARGET_THROUGHPUT_VS_BOTO3 = 1.5
TARGET_CPU_VS_BOTO3 = 0.5


def parse_size(text: str) -> int:
    """'2GiB' -> 2147483648, '256MiB', '4096' (kb = 1000, KiB = 1024)."""
    s = text.strip().lower()
    num = s.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = s[len(num):].strip() or "b"
    if unit not in UNITS or not num:
        raise argparse.ArgumentTypeError(f"bad size {text!r}; use bytes or e.g. 256MiB, 2GiB")
    return int(float(num) * UNITS[unit])


# ---- measuring ------------------------------------------------------------------------------

def cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def machine_busy_seconds() -> float:
    """Busy CPU time of the whole machine so far (all CPUs, /proc/stat)."""
    ticks = [int(x) for x in read_first("/proc/stat").splitlines()[0].split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/PID/stat."""
    text = read_first(f"/proc/{pid}/stat")
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Phase:
    """Wall time and this process's CPU time of one phase, with CLOCK_MONOTONIC ends."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes

    def __enter__(self):
        self.cpu0, self.t0 = cpu_self(), time.monotonic()
        return self

    def __exit__(self, *exc):
        self.t1, self.cpu1 = time.monotonic(), cpu_self()

    def json(self) -> dict:
        seconds = self.t1 - self.t0
        cpu = self.cpu1 - self.cpu0
        return {"seconds": seconds, "gbps": self.nbytes / seconds / 1e9 if seconds > 0 else 0.0,
                "cpu_s": cpu, "cpu_s_per_gib": cpu / (self.nbytes / GIB),
                "start_monotonic_s": self.t0, "end_monotonic_s": self.t1}


class CpuSampler:
    """Samples the CPU seconds of a process (or the sum of several: Ceph's
    daemons) against CLOCK_MONOTONIC (every 20 ms) to tell how much of it falls
    inside a phase."""

    def __init__(self, pids, period: float = 0.02):
        self.pids = [pids] if isinstance(pids, int) else list(pids)
        self.period = period
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()

    def _run(self):
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic(), sum(process_cpu_seconds(p) for p in self.pids)))
            except (OSError, ValueError, IndexError):
                return
            self._stop.wait(self.period)

    def at(self, t: float) -> float:
        s = self.samples
        if not s:
            return 0.0
        if t <= s[0][0]:
            return s[0][1]
        for (ta, ca), (tb, cb) in zip(s, s[1:]):
            if ta <= t <= tb:
                return ca + (cb - ca) * ((t - ta) / (tb - ta) if tb > ta else 0.0)
        return s[-1][1]

    def between(self, t0: float, t1: float) -> float:
        return self.at(t1) - self.at(t0)


# ---- workers (each runs in its own process: python s3_bench.py --worker NAME ...) ------------

def make_bytes(size: int, seed: int) -> bytes:
    """size pseudo-random bytes: a 16 MiB random block, tiled, with the seed stamped every 4 KiB."""
    import random  # noqa: PLC0415
    block = bytearray(random.Random(seed).randbytes(min(size, 16 << 20)))
    out = bytearray(size)
    for off in range(0, size, len(block)):
        n = min(len(block), size - off)
        out[off:off + n] = block[:n]
    stamp = seed.to_bytes(8, "little")
    for off in range(0, size, 4096):
        out[off:off + 8] = stamp[:min(8, size - off)]
    return bytes(out)


def boto3_client(args):
    import boto3  # noqa: PLC0415
    from botocore.config import Config  # noqa: PLC0415
    return boto3.session.Session().client(
        "s3", endpoint_url=args.endpoint, region_name=REGION,
        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))


def worker_boto3(args) -> dict:
    from boto3.s3.transfer import TransferConfig  # noqa: PLC0415
    client = boto3_client(args)
    config = TransferConfig()  # defaults: 8 MiB threshold and parts, 10 threads
    scratch = Path(args.scratch)
    src = [scratch / f"src_{i}.bin" for i in range(args.objects)]
    for i, p in enumerate(src):
        p.write_bytes(make_bytes(args.object_size, args.seed + i))
    total = args.objects * args.object_size
    reps = []
    for rep in range(1, args.reps + 1):
        keys = [f"{args.prefix}/rep{rep}/obj_{i}.bin" for i in range(args.objects)]
        dst = [scratch / f"dst_{rep}_{i}.bin" for i in range(args.objects)]
        with Phase(total) as up:
            for p, k in zip(src, keys):
                client.upload_file(str(p), args.bucket, k, Config=config)
        with Phase(total) as down:
            for p, k in zip(dst, keys):
                client.download_file(args.bucket, k, str(p), Config=config)
        for a, b in zip(src, dst):
            if a.read_bytes() != b.read_bytes():
                raise RuntimeError(f"boto3: {b} downloaded differs from {a} uploaded")
            b.unlink()
        client.delete_objects(Bucket=args.bucket, Delete={"Objects": [{"Key": k} for k in keys]})
        reps.append({"upload": up.json(), "download": down.json()})
    return {"config": {"transfer_config": "TransferConfig() defaults", "multipart_threshold": config.multipart_threshold,
                       "multipart_chunksize": config.multipart_chunksize, "max_concurrency": config.max_concurrency},
            "repetitions": reps}


def worker_s3torch(args) -> dict:
    import warnings  # noqa: PLC0415
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")
    import torch  # noqa: PLC0415
    import torch.distributed.checkpoint as dcp  # noqa: PLC0415
    from s3torchconnector import S3ClientConfig  # noqa: PLC0415
    from s3torchconnector._s3client import S3Client  # noqa: PLC0415
    from s3torchconnector.dcp import S3StorageReader, S3StorageWriter  # noqa: PLC0415

    # throughput_target_gbps sizes the CRT's connection pool. Its default (10)
    # opens so many parallel GETs against the one-process moto that each
    # connection falls under the CRT's minimum-throughput watchdog and the
    # read fails (AWS_ERROR_HTTP_CHANNEL_THROUGHPUT_FAILURE); see --s3torch-gbps.
    cfg = S3ClientConfig(force_path_style=True, throughput_target_gbps=args.s3torch_gbps)
    state = {f"obj_{i}": torch.frombuffer(bytearray(make_bytes(args.object_size, args.seed + i)), dtype=torch.uint8)
             for i in range(args.objects)}
    total = args.objects * args.object_size
    reps = []
    for rep in range(1, args.reps + 1):
        path = f"s3://{args.bucket}/{args.prefix}/rep{rep}"
        writer = S3StorageWriter(REGION, path, s3client_config=cfg, thread_count=args.s3torch_threads)
        writer.fs._client = S3Client(REGION, endpoint=args.endpoint, s3client_config=cfg)
        with Phase(total) as up:
            dcp.save(state, storage_writer=writer, no_dist=True)
        target = {k: torch.empty_like(v) for k, v in state.items()}
        reader = S3StorageReader(REGION, path, s3client_config=cfg)
        reader.fs._client = S3Client(REGION, endpoint=args.endpoint, s3client_config=cfg)
        with Phase(total) as down:
            dcp.load(target, storage_reader=reader, no_dist=True)
        for k, v in state.items():
            if not torch.equal(v, target[k]):
                raise RuntimeError(f"s3torchconnector: tensor {k} loaded from {path} differs from the one saved")
        del target
        reps.append({"upload": up.json(), "download": down.json()})
    import s3torchconnector  # noqa: PLC0415
    return {"config": {"version": getattr(s3torchconnector, "__version__", "?"), "thread_count": args.s3torch_threads,
                       "throughput_target_gbps_arg": args.s3torch_gbps,
                       "part_size": cfg.part_size, "throughput_target_gbps": cfg.throughput_target_gbps,
                       "force_path_style": True, "reader": "S3ReaderConstructor.dcp_optimized() (default)"},
            "repetitions": reps}


def worker_limit(args) -> dict:
    """One loopback TCP stream per --limit-streams: send the step's bytes to a
    child process that receives them into a buffer and acknowledges."""
    total = args.objects * args.object_size
    payload = memoryview(make_bytes(min(args.object_size, 64 << 20), args.seed))
    streams = args.limit_streams
    per_stream = [total // streams + (1 if i < total % streams else 0) for i in range(streams)]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(streams)
    port = listener.getsockname()[1]
    reps = []
    for _ in range(args.reps):
        pid = os.fork()
        if pid == 0:  # receiver
            try:
                conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(streams)]

                def receive(conn, n):
                    buf = bytearray(4 << 20)
                    view = memoryview(buf)
                    while n > 0:
                        got = conn.recv_into(view, min(len(buf), n))
                        if got == 0:
                            os._exit(3)
                        n -= got
                    conn.sendall(b"k")

                threads = [threading.Thread(target=receive, args=(c, n)) for c, n in zip(conns, per_stream)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            finally:
                os._exit(0)
        conns = [listener.accept()[0] for _ in range(streams)]
        children0 = cpu_children()

        def send(conn, n):
            while n > 0:
                piece = payload[:min(len(payload), n)]
                conn.sendall(piece)
                n -= len(piece)
            if conn.recv(1) != b"k":
                raise RuntimeError("loopback receiver did not acknowledge")

        with Phase(total) as ph:
            threads = [threading.Thread(target=send, args=(c, n)) for c, n in zip(conns, per_stream)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError(f"loopback receiver exited with status {status}")
        for c in conns:
            c.close()
        j = ph.json()
        j["receiver_cpu_s"] = cpu_children() - children0
        j["cpu_s_per_gib"] = (j["cpu_s"] + j["receiver_cpu_s"]) / (total / GIB)
        reps.append({"upload": j, "download": dict(j)})
    return {"config": {"streams": streams, "send_piece_bytes": len(payload)}, "repetitions": reps}


WORKERS = {"boto3": worker_boto3, "s3torch": worker_s3torch, "limit": worker_limit}


def worker_main(args) -> None:
    out = WORKERS[args.worker](args)
    print(json.dumps(out))


# ---- the driver --------------------------------------------------------------------------------

def die(msg: str, code: int = 1):
    print(f"s3_bench.py: {msg}", file=sys.stderr)
    sys.exit(code)


def check_prerequisites(methods, bench_bin: Path, server: str) -> None:
    missing = []
    if "ours" in methods and not os.access(bench_bin, os.X_OK):
        missing.append(f"{bench_bin} (build it: scripts/setup.sh release, or pass --build-dir)")
    if server == "ceph":
        from ceph_rgw import CephMissing, ceph_programs  # noqa: PLC0415  (tests/integration)
        try:
            ceph_programs()
        except CephMissing as e:
            missing.append(str(e))
    mods = [("boto3", "boto3 (scripts/setup.sh, requirements-dev.txt)")]
    if server == "moto":
        mods.append(("moto", "moto[server] (scripts/setup.sh, requirements-dev.txt)"))
    for mod, pkg in mods:
        try:
            __import__(mod)
        except ImportError:
            missing.append(pkg)
    if "s3torch" in methods:
        try:
            import s3torchconnector.dcp  # noqa: F401,PLC0415
        except ImportError:
            missing.append("s3torchconnector (.venv/bin/pip install --no-deps -r requirements-bench.txt)")
    if missing:
        die("missing: " + "; ".join(missing), code=2)


def summarize(reps: list[dict], sampler: CpuSampler, total: int) -> dict:
    out = {}
    for phase in ("upload", "download"):
        rows = [r[phase] for r in reps]
        for r in rows:
            server = sampler.between(r["start_monotonic_s"], r["end_monotonic_s"])
            r["server_cpu_s"] = server
            r["server_cpu_s_per_gib"] = server / (total / GIB)
        out[phase] = {
            "gbps": statistics.median(r["gbps"] for r in rows),
            "seconds": statistics.median(r["seconds"] for r in rows),
            "cpu_s_per_gib": statistics.median(r["cpu_s_per_gib"] for r in rows),
            "server_cpu_s_per_gib": statistics.median(r["server_cpu_s_per_gib"] for r in rows),
            "repetitions": len(rows),
        }
    return out


def run_method(name: str, args, endpoint: str, sampler: CpuSampler, bench_bin: Path, env: dict) -> dict:
    total = args.objects * args.object_size
    prefix = f"{name}-{uuid.uuid4().hex[:8]}"
    scratch = Path(tempfile.mkdtemp(prefix=f"tierckpt-s3bench-{name}-", dir=TMPFS))
    if name == "ours":
        url = (f"s3://{BUCKET}/{prefix}?endpoint={endpoint}&part_size={args.part_size}"
               f"&concurrency={args.concurrency}")
        if args.max_part_size is not None:
            url += f"&max_part_size={args.max_part_size}"
        cmd = [str(bench_bin), "--url", url, "--objects", str(args.objects), "--object-size", str(args.object_size),
               "--threads", str(args.threads), "--reps", str(args.reps), "--seed", str(args.seed),
               "--scratch", str(scratch)]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--endpoint", endpoint,
               "--bucket", BUCKET, "--prefix", prefix, "--objects", str(args.objects),
               "--object-size", str(args.object_size), "--reps", str(args.reps), "--seed", str(args.seed),
               "--scratch", str(scratch), "--s3torch-threads", str(args.s3torch_threads),
               "--s3torch-gbps", str(args.s3torch_gbps),
               "--limit-streams", str(args.limit_streams)]
    busy0, children0, server0 = machine_busy_seconds(), cpu_children(), sampler.at(time.monotonic())
    wall0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"error": f"{name} ran past --timeout {args.timeout} s; command: {shlex.join(cmd)}"}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    wall = time.monotonic() - wall0
    if proc.returncode != 0:
        return {"error": f"{name} failed (exit {proc.returncode}): {proc.stderr.strip()[-3000:]}",
                "command": shlex.join(cmd)}
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        return {"error": f"{name} printed no valid JSON ({e}): {proc.stdout[-500:]}", "command": shlex.join(cmd)}
    result["summary"] = summarize(result["repetitions"], sampler, total)
    client = cpu_children() - children0
    server = sampler.at(time.monotonic()) - server0
    others = max(0.0, machine_busy_seconds() - busy0 - client - server)
    result["interference"] = {"wall_s": wall, "cpu_s_client_process": client, "cpu_s_server": server,
                              "cpu_s_other_processes": others,
                              "other_share_of_machine": others / (wall * (os.cpu_count() or 1))}
    result["command"] = shlex.join(cmd)
    return result


def ratio(a: float, b: float):
    return a / b if b else None


def compute_ratios(results: dict) -> tuple[dict, dict]:
    def s(m, phase, key):
        r = results.get(m, {})
        return r["summary"][phase][key] if "summary" in r else None

    ratios, targets = {}, {}
    for phase in ("upload", "download"):
        ours_gbps, ours_cpu = s("ours", phase, "gbps"), s("ours", phase, "cpu_s_per_gib")
        for other in ("boto3", "s3torch"):
            if ours_gbps is not None and s(other, phase, "gbps") is not None:
                ratios[f"{phase}_throughput_ours_vs_{other}"] = ratio(ours_gbps, s(other, phase, "gbps"))
                ratios[f"{phase}_cpu_per_gib_ours_vs_{other}"] = ratio(ours_cpu, s(other, phase, "cpu_s_per_gib"))
        if ours_gbps is not None and s("limit", phase, "gbps") is not None:
            ratios[f"{phase}_throughput_ours_vs_limit"] = ratio(ours_gbps, s("limit", phase, "gbps"))
        t = ratios.get(f"{phase}_throughput_ours_vs_boto3")
        c = ratios.get(f"{phase}_cpu_per_gib_ours_vs_boto3")
        if t is not None:
            targets[f"{phase}_throughput_vs_boto3"] = {"target": f">= {TARGET_THROUGHPUT_VS_BOTO3}", "measured": t,
                                                       "met": t >= TARGET_THROUGHPUT_VS_BOTO3}
        if c is not None:
            targets[f"{phase}_cpu_per_gib_vs_boto3"] = {"target": f"<= {TARGET_CPU_VS_BOTO3}", "measured": c,
                                                        "met": c <= TARGET_CPU_VS_BOTO3}
    return ratios, targets


def print_table(report: dict) -> None:
    m, c = report["machine"], report["config"]
    print(f"machine: {m['cpu_model']}, {m['nproc']} CPUs, {m['ram_bytes'] / GIB:.1f} GiB RAM, "
          f"load avg {m['loadavg_at_start'][0]:.2f}")
    srv = report["server"]
    name = f"moto {srv['moto_version']}" if "moto_version" in srv else f"Ceph RGW {srv['ceph_version']}"
    print(f"step: {c['total_bytes']:,} bytes in {c['objects']} objects of {c['object_size']:,} bytes; "
          f"server: {name} on {srv['endpoint']}")
    print(f"command: {report['command']}\n")
    print(f"  {'method':<9}{'up GB/s':>9}{'cpu s/GiB':>11}{'srv s/GiB':>11}"
          f"{'down GB/s':>11}{'cpu s/GiB':>11}{'srv s/GiB':>11}{'others %':>10}")
    for name, r in report["results"].items():
        if "error" in r:
            print(f"  {name:<9}FAILED: {r['error']}")
            continue
        u, d = r["summary"]["upload"], r["summary"]["download"]
        print(f"  {name:<9}{u['gbps']:9.3f}{u['cpu_s_per_gib']:11.3f}{u['server_cpu_s_per_gib']:11.3f}"
              f"{d['gbps']:11.3f}{d['cpu_s_per_gib']:11.3f}{d['server_cpu_s_per_gib']:11.3f}"
              f"{100 * r['interference']['other_share_of_machine']:10.0f}")
    if report["ratios"]:
        print()
        for k, v in report["ratios"].items():
            print(f"  {k:<42}{v:8.2f}x" if v is not None else f"  {k:<42}     n/a")
    for k, t in report["targets"].items():
        print(f"  target {k} {t['target']}: measured {t['measured']:.2f} -> {'MET' if t['met'] else 'MISSED'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--size", type=parse_size, default=2 * GIB, help="bytes per step (default 2GiB)")
    p.add_argument("--objects", type=int, default=8, help="objects per step (default 8)")
    p.add_argument("--reps", type=int, default=1, help="repetitions per method; medians are reported (default 1)")
    p.add_argument("--build-dir", default="build/release", help="where bench/tc_s3_bench is (default build/release)")
    p.add_argument("--threads", type=int, default=1, help="ours: objects downloaded at a time (default 1)")
    p.add_argument("--part-size", type=parse_size, default=16 << 20, help="ours: part_size (default 16MiB)")
    p.add_argument("--max-part-size", type=parse_size, default=None,
                   help="ours: max_part_size, the largest request (default: the URL default, 1GiB)")
    p.add_argument("--concurrency", type=int, default=8, help="ours: parts/ranges in flight (default 8)")
    p.add_argument("--s3torch-threads", type=int, default=1, help="s3torch: DCP writer thread_count (default 1)")
    p.add_argument("--s3torch-gbps", type=float, default=1.0,
                   help="s3torch: S3ClientConfig.throughput_target_gbps (default 1.0; its own default of 10 "
                        "overruns the local server and fails)")
    p.add_argument("--limit-streams", type=int, default=1, help="limit: loopback TCP streams (default 1)")
    p.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {','.join(METHODS)}")
    p.add_argument("--seed", type=int, default=42, help="content seed")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per method (default 1800)")
    p.add_argument("--server", choices=("moto", "ceph"), default="moto",
                   help="moto (default) or ceph: Debian's radosgw in a one-node cluster started here")
    p.add_argument("--warmup", type=int, choices=(0, 1), default=1,
                   help="1 (default): one untimed upload+download of the step before the methods")
    # Worker mode (internal): one method in this process.
    p.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    p.add_argument("--endpoint", help=argparse.SUPPRESS)
    p.add_argument("--bucket", help=argparse.SUPPRESS)
    p.add_argument("--prefix", help=argparse.SUPPRESS)
    p.add_argument("--object-size", type=int, help=argparse.SUPPRESS)
    p.add_argument("--scratch", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker_main(args)
        return

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        p.error(f"unknown method(s) {bad}; choose from {','.join(METHODS)}")
    if args.objects < 1 or args.size < args.objects:
        p.error("--size must be at least --objects bytes")
    args.object_size = args.size // args.objects
    build = Path(args.build_dir)
    if not build.is_absolute():
        build = REPO / build
    bench_bin = build / "bench" / "tc_s3_bench"
    check_prerequisites(methods, bench_bin, args.server)
    need = 3 * args.object_size * args.objects + (1 << 30)
    free = shutil.disk_usage(TMPFS).free
    if need > free:
        die(f"{TMPFS} has {free} bytes free; this run needs about {need} (the server's copy, the "
            "source and the download of one step): lower --size", code=2)

    from s3_server import DUMMY_KEYS, MotoServer, isolated_aws_env  # noqa: PLC0415  (tests/integration)

    report = {"machine": machine_info(), "command": shlex.join([sys.executable, *sys.argv]), "git": git_info(),
              "config": {"server": args.server, "total_bytes": args.object_size * args.objects,
                         "objects": args.objects,
                         "object_size": args.object_size, "reps": args.reps, "methods": methods,
                         "ours": {"threads": args.threads, "part_size": args.part_size,
                                  "concurrency": args.concurrency}},
              "results": {}}
    env = isolated_aws_env()
    if args.server == "ceph":
        from ceph_rgw import RgwCluster  # noqa: PLC0415  (tests/integration)
        # The OSD holds a step per method at most (each is deleted before the next; RGW's garbage
        # collection frees the space within seconds, ceph_rgw.py), and refuses writes when nearly full.
        server = RgwCluster(memstore_bytes=max(4 * GIB, 3 * args.object_size * args.objects + GIB))
        env.update(server.keys.env())
    else:
        server = MotoServer(buckets=(BUCKET,))
        env.update(DUMMY_KEYS.env())
    failed = []
    try:
        server.start()
        if args.server == "ceph":
            server.create_bucket(BUCKET)
            pids = [p.pid for p in server.procs.values()]
            report["server"] = {"endpoint": server.endpoint, "ceph_version": server.version, "pids": pids,
                                "start_seconds": server.start_seconds}
        else:
            import moto  # noqa: PLC0415
            pids = [server.proc.pid]
            report["server"] = {"endpoint": server.endpoint, "moto_version": moto.__version__, "pid": pids[0]}
        sampler = CpuSampler(pids).start()
        if args.warmup and any(m != "limit" for m in methods):
            # The first method against a fresh moto paid ~30-80 % more server CPU per GiB than
            # the same method later (measured both orders): an untimed step first, so the
            # order of the methods does not decide the ratios.
            print("s3_bench.py: warming the server up (untimed) ...", file=sys.stderr)
            w = run_method("ours", args, server.endpoint, sampler, bench_bin, env)
            if "error" in w:
                die(f"the warm-up step failed: {w['error']}")
            report["warmup"] = {"method": "ours", "summary": w["summary"]}
        for name in methods:
            print(f"s3_bench.py: running {name} ...", file=sys.stderr)
            r = run_method(name, args, server.endpoint, sampler, bench_bin, env)
            report["results"][name] = r
            if "error" in r:
                failed.append(name)
                print(f"s3_bench.py: {r['error']}", file=sys.stderr)
        sampler.stop()
        report["server"]["cpu_s_total"] = sampler.samples[-1][1] if sampler.samples else 0.0
    finally:
        server.stop()
        if args.server == "moto":
            server.cleanup_logs()
    report["ratios"], report["targets"] = compute_ratios(report["results"])
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    if failed:
        die(f"method(s) failed: {', '.join(failed)} (details above)")


if __name__ == "__main__":
    main()
