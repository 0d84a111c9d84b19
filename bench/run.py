#!/usr/bin/env python3
"""run.py - run a tierckpt memory-tier benchmark against a private agent.

    python bench/run.py <workload> [--json] [--build-dir build/release] [--reps N]
                        [--warmup N] [--threads N] [--total SIZE] [--object-size SIZE]
                        [--objects N] [--keep-last K] [--memory-budget SIZE]
                        [--agent-checksum] [--verify-reads always,attested] [--attest-max-age S]
                        [--agent-arg=--some-tierckptd-flag ...]

Workloads:
    mem_large   1 GiB per step in 64 MiB objects (--total, --object-size)
    mem_small   10,000 objects of 4 KiB per step (--objects, --object-size)
    all         both, one after the other

For each workload it starts its own tierckptd (<build-dir>/tools/tierckptd/tierckptd)
with a private --root /dev/shm/tierckpt-bench-<pid>, a private --socket in a temporary
directory, --keep-last K (default 3), a memory budget large enough for K + 2 steps
(at least 4 GiB) and no durable tier; runs <build-dir>/bench/tc_bench for the workload;
stops the agent (SIGTERM, SIGKILL after 30 s) and removes its root.

tc_bench measures, in one run over the same bytes: memcpy baselines (warm into resident
memory, cold into fresh anonymous and shmem pages, copy+checksum), then 1 cold +
`--warmup` + `--reps` repetitions of save (BeginStep + WriteObjects + Commit) and load
(ReadObjects, checksums verified) of one step. It reports the cold repetition and the
median of the steady ones separately, and ratios to memcpy_warm (the fastest plain memcpy
variant measured: one call per object or 256 KiB calls, on 1 or --threads threads).

--verify-reads MODES (comma-separated: always, attested, never) loads each step once per mode,
the order rotated per repetition (interleaved, same run); attested skips the client's hash of
objects the agent verified within --attest-max-age seconds (with --agent-checksum the agent
hashes after seal, so every object is verified at commit; with client checksums it never
verifies them and attested hashes as always does).

Output: a readable table, or with --json ONE JSON object:
    {"machine": {...}, "command": "...", "git": {...}, "results": {"<workload>": {...}}}
where each result is tc_bench's JSON plus the exact agent and tc_bench command lines.
Sizes are bytes, times seconds, throughputs GB/s (1e9 bytes/s). See docs/benchmarks.md.

Relative --build-dir paths are taken from the repository root. Exits 2 with
"build first: scripts/setup.sh release" if the binaries are missing, 1 if a run fails.
"""

import argparse
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "harness"))
from agent_harness import REPO, AgentProcess, git_info  # noqa: E402  (tests/harness/agent_harness.py)
from machine import machine_info, read_first  # noqa: E402  (bench/machine.py)

WORKLOADS = ("mem_large", "mem_small")
GIB = 1 << 30
UNITS = {"b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 10**6, "mb": 10**6, "mib": 1 << 20,
         "g": 10**9, "gb": 10**9, "gib": 1 << 30, "t": 10**12, "tb": 10**12, "tib": 1 << 40}


class BenchError(Exception):
    """A workload failed; the message says what and how to look further."""


def die(msg, code=1):
    print(f"run.py: {msg}", file=sys.stderr)
    sys.exit(code)


def parse_size(text):
    """'1GiB' -> 1073741824, '64MiB', '4096', '4KiB' (kb = 1000, KiB = 1024, as tc_bench)."""
    s = text.strip().lower()
    num = s.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = s[len(num):].strip() or "b"
    if unit not in UNITS or not num:
        raise argparse.ArgumentTypeError(f"bad size {text!r}; use bytes or e.g. 64MiB, 1GiB")
    return int(float(num) * UNITS[unit])


def workload_bytes(name, args):
    if name == "mem_large":
        obj = args.object_size or 64 << 20
        return args.objects * obj if args.objects else (args.total or GIB)
    obj = args.object_size or 4096
    return args.total or (args.objects or 10000) * obj


def cpu_busy_seconds():
    """Busy CPU time of the whole machine so far (all CPUs, from /proc/stat)."""
    fields = read_first("/proc/stat").splitlines()[0].split()[1:]
    ticks = [int(x) for x in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    busy = sum(ticks[:8]) - idle  # user..steal; guest time is already in user
    return busy / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class Agent(AgentProcess):
    """A private tierckptd: own root under the tmpfs (/dev/shm), own socket, own log.

    Ready once its socket accepts a connection (no CLI needed: only tierckptd and tc_bench are)."""

    def __init__(self, binary, keep_last, budget, extra_args, tmpfs="/dev/shm"):
        self.tmp = tempfile.mkdtemp(prefix="tierckpt-bench-")
        log = os.path.join(self.tmp, "agent.log")
        super().__init__(os.path.join(self.tmp, "agent.sock"), output=log + ".stderr", log=log)
        self.root = os.path.join(tmpfs, f"tierckpt-bench-{os.getpid()}")
        self.argv = [str(binary), "--root", self.root, "--socket", self.socket,
                     "--memory-budget", str(budget), "--keep-last", str(keep_last),
                     "--log-file", self.log, *extra_args]

    def start(self):
        self.launch(self.argv)

    def log_tail(self, lines=20):
        return "\n".join(self.log_text().strip().splitlines()[-lines:])

    def stop(self):
        """SIGTERM (SIGKILL after 30 s), then removes its root and its directory."""
        super().stop()
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


def run_workload(name, args, agent_bin, bench_bin):
    step_bytes = workload_bytes(name, args)
    budget = args.memory_budget or max(4 * GIB, (args.keep_last + 2) * step_bytes + 256 * (1 << 20))
    shm_free = shutil.disk_usage("/dev/shm").free
    if budget > shm_free:
        raise BenchError(f"{name}: the agent needs a memory budget of {budget} bytes for keep-last "
                         f"{args.keep_last} + 2 steps of {step_bytes} bytes, but /dev/shm has "
                         f"{shm_free} bytes free; lower --total/--objects or --keep-last, "
                         "or give --memory-budget")
    agent = Agent(agent_bin, args.keep_last, budget, args.agent_arg, args.tmpfs)
    cmd = [str(bench_bin), name, "--socket", agent.socket, "--threads", str(args.threads),
           "--reps", str(args.reps), "--warmup", str(args.warmup if args.warmup is not None
                                                      else args.keep_last)]
    if args.total:
        cmd += ["--total", str(args.total)]
    if args.objects:
        cmd += ["--objects", str(args.objects)]
    if args.object_size:
        cmd += ["--object-size", str(args.object_size)]
    if args.agent_checksum:
        cmd.append("--agent-checksum")
    cmd += ["--verify-reads", args.verify_reads, "--attest-max-age", str(args.attest_max_age)]
    wall0, busy0, ours0 = time.monotonic(), cpu_busy_seconds(), children_cpu_seconds()
    try:
        agent.start()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        if proc.returncode != 0:
            raise BenchError(f"{name}: tc_bench failed (exit {proc.returncode}): {proc.stderr.strip()}\n"
                             f"command: {shlex.join(cmd)}\nagent log:\n{agent.log_tail()}")
        try:
            result = json.loads(proc.stdout)
        except json.JSONDecodeError as e:
            raise BenchError(f"{name}: tc_bench printed no valid JSON ({e}); "
                             f"command: {shlex.join(cmd)}") from e
    except subprocess.TimeoutExpired as e:
        raise BenchError(f"{name}: tc_bench ran past --timeout {args.timeout} s; "
                         f"command: {shlex.join(cmd)}") from e
    except RuntimeError as e:
        raise BenchError(f"{name}: {e}") from e
    finally:
        agent.stop()
    wall = time.monotonic() - wall0
    others = max(0.0, (cpu_busy_seconds() - busy0) - (children_cpu_seconds() - ours0))
    result["interference"] = {
        "wall_s": wall,
        "cpu_s_benchmark": children_cpu_seconds() - ours0,
        "cpu_s_other_processes": others,
        "other_share_of_machine": others / (wall * (os.cpu_count() or 1)),
        "loadavg_after": list(os.getloadavg()),
    }
    result["agent_command"] = shlex.join(agent.argv)
    result["bench_command"] = shlex.join(cmd)
    return result


def fmt_row(label, gbps, ratio, objs, seconds):
    r = f"{ratio:8.2f}x" if ratio is not None else " " * 9
    return f"  {label:<38}{gbps:9.2f}{r}{objs:14,.0f}{seconds:11.4f}"


def print_table(report):
    m = report["machine"]
    print(f"machine: {m['cpu_model']}, {m['nproc']} CPUs, {m['ram_bytes'] / GIB:.1f} GiB RAM, "
          f"kernel {m['kernel']}, /dev/shm {m['dev_shm_bytes'] / GIB:.1f} GiB, "
          f"load avg {m['loadavg_at_start'][0]:.2f}")
    print(f"command: {report['command']}")
    for name, r in report["results"].items():
        if "error" in r:
            print(f"\n{name}: FAILED: {r['error']}")
            continue
        c = r["config"]
        i = r["interference"]
        print(f"\n{name}: {c['total_bytes']:,} bytes in {c['objects']:,} objects of "
              f"{c['object_size']:,} bytes, {c['copy_threads']} copy threads; other processes used "
              f"{100 * i['other_share_of_machine']:.0f}% of the CPUs meanwhile")
        print(f"  {'':<38}{'GB/s':>9}{'x memcpy':>9}{'objects/s':>14}{'seconds':>11}")
        base = r["baselines"]
        ref = base["memcpy_warm"]["gbps"]
        for key, b in base.items():
            label = f"{key} ({b['threads']} thr, {b['reported']})"
            print(fmt_row(label, b["gbps"], b["gbps"] / ref if ref else 0, b["objects_per_s"], b["seconds"]))
            if "detail" in b:
                print(f"    = {b['detail']}")
        for op in ("save", "load"):
            for phase in ("cold", "steady"):
                x = r[op][phase]
                label = f"{op} {phase}" + (f" (median of {x['repetitions']})" if phase == "steady" else "")
                ratio = r["ratios"][f"{op}_{phase}_vs_memcpy"]
                print(fmt_row(label, x["gbps"], ratio, x["objects_per_s"], x["seconds"]))
        modes = r.get("load_modes", {})
        if len(modes) > 1:
            for mode, x in modes.items():
                for phase in ("cold", "steady"):
                    y = x[phase]
                    print(fmt_row(f"load {phase}, verify {mode}", y["gbps"], x.get(f"{phase}_vs_memcpy"),
                                  y["objects_per_s"], y["seconds"]))
            print(f"  read counters: {r.get('read_counters')}")
        s = r["save"]
        print(f"  save split, cold:   begin {s['cold']['begin_s']:.4f} s, write+seal "
              f"{s['cold']['write_seal_s']:.4f} s, commit {s['cold']['commit_s']:.4f} s")
        print(f"  save split, steady: begin {s['steady']['begin_s']:.4f} s, write+seal "
              f"{s['steady']['write_seal_s']:.4f} s, commit {s['steady']['commit_s']:.4f} s")
        if "targets" in r:
            for op in ("save", "load"):
                t = r["targets"][op]
                print(f"  target {op} >= {t['target']}x memcpy (steady): measured {t['measured']:.2f}x "
                      f"-> {'MET' if t['met'] else 'MISSED'}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", choices=(*WORKLOADS, "all"))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--build-dir", default="build/release",
                   help="build directory (relative paths from the repository root; default build/release)")
    p.add_argument("--reps", type=int, default=5, help="steady-state repetitions (default 5)")
    p.add_argument("--warmup", type=int, default=None,
                   help="repetitions after the cold one not counted as steady (default: --keep-last)")
    p.add_argument("--threads", type=int, default=2, help="client copy threads (default 2)")
    p.add_argument("--total", type=parse_size, default=0, help="bytes per step (mem_large default 1GiB)")
    p.add_argument("--object-size", type=parse_size, default=0, help="bytes per object")
    p.add_argument("--objects", type=int, default=0, help="objects per step (mem_small default 10000)")
    p.add_argument("--keep-last", type=int, default=3, help="the agent's --keep-last (default 3)")
    p.add_argument("--memory-budget", type=parse_size, default=0,
                   help="the agent's budget in bytes (default: max(4GiB, (keep-last + 2) steps))")
    p.add_argument("--agent-checksum", action="store_true",
                   help="the agent hashes the bytes at rest (default: the client hashes in its copy pass)")
    p.add_argument("--verify-reads", default="always",
                   help="read check of the loads: always (default), attested, never, or several comma-separated "
                        "(each step loaded once per mode, interleaved)")
    p.add_argument("--attest-max-age", type=float, default=900,
                   help="seconds an agent verification is trusted by attested loads (default 900)")
    p.add_argument("--tmpfs", default="/dev/shm",
                   help="tmpfs under which the agent's root is made (default /dev/shm)")
    p.add_argument("--agent-arg", action="append", default=[], metavar="ARG",
                   help="extra tierckptd flag, repeatable, e.g. --agent-arg=--verify-on-seal")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per workload (default 1800)")
    args = p.parse_args()
    if args.total and args.objects:
        p.error("give --total or --objects, not both")

    build = Path(args.build_dir)
    if not build.is_absolute():
        build = REPO / build
    agent_bin = build / "tools" / "tierckptd" / "tierckptd"
    bench_bin = build / "bench" / "tc_bench"
    missing = [str(b) for b in (agent_bin, bench_bin) if not os.access(b, os.X_OK)]
    if missing:
        die(f"missing {', '.join(missing)}; build first: scripts/setup.sh release "
            "(or pass --build-dir DIR)", code=2)

    report = {"machine": machine_info(), "command": shlex.join([sys.executable, *sys.argv]),
              "git": git_info(),
              "binaries": {str(b): time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(b.stat().st_mtime))
                           for b in (agent_bin, bench_bin)},
              "results": {}}
    names = WORKLOADS if args.workload == "all" else (args.workload,)
    failed = []
    for name in names:
        try:
            report["results"][name] = run_workload(name, args, agent_bin, bench_bin)
        except BenchError as e:
            report["results"][name] = {"error": str(e)}
            failed.append(name)
            print(f"run.py: {e}", file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    if failed:
        die(f"workload(s) failed: {', '.join(failed)} (details above)")


if __name__ == "__main__":
    main()
