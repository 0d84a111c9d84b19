#!/usr/bin/env python3
"""peers.py - tierckpt against the checkpointing systems users would pick instead, side by side.

    python bench/peers.py [--workload a,c] [--rounds 8] [--methods all] [--size-mib N]
                          [--json out.json] [--plot docs/img/peers.png] [--no-install]
                          [--venv build/peers-venv] [--timeout-s 1800] [--settle-s 1]

Run it with the project's Python (the one whose tierckpt package is under test). It installs the
peers from PyPI into a venv of its own (bench/peers_install.py; cached), puts this tierckpt on that
venv's path, starts a private tierckptd and the HTTP stand-in that amzn-sagemaker-checkpointing's
source distribution ships, then runs every method under ONE `torchrun --nproc-per-node 2` (gloo,
CPU) per workload, interleaved round by round on the same tensors (bench/peers_rank.py, adapters
in bench/peers_methods.py). --no-install uses this interpreter for the ranks and only the methods
that need no peer package (memcpy, tierckpt, dcp): the smoke test's mode.

Workloads: (a) 1 GiB in total, 16 fp32 tensors of 32 MiB per rank; (b) the same at 4 GiB (off by
default; refused when memory is short); (c) a small transformer's parameters plus AdamW state
(exp_avg, exp_avg_sq, step) after one step, ~1 GiB in total, > 1,500 tensors per rank. --size-mib
sets the total of (a) (and scales (c)).

Per method, each the slowest rank's: first save (round 1, cold), steady blocking time (until the
training thread may go on), steady time to memory commit (until the checkpoint is in memory on the
node: for async methods until the future completes), steady load (until the training's own
tensors hold the bytes; a peer that returns new tensors is charged the copy into them, as
model.load_state_dict would do); steady = the median of rounds 3..N. Every timed save and load starts
--settle-s seconds (default 1) after the previous one ended, so that what a method leaves running in
the background (tierckpt's agent hashes a step after its commit) has finished, as it would between
checkpoints minutes apart, instead of slowing whichever method the rotation puts next; what that
background work costs a training loop is bench/interference.py's measure. Ratios: to tierckpt (THREAD)
and to the memcpy limit of the same run. Every load is compared with the saved state (torch.equal
per tensor); a wrong load is FAILED and the exit status is 1.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "harness"))
import peers_install  # noqa: E402
from agent_harness import AgentProcess, free_port  # noqa: E402  (tests/harness/agent_harness.py)
from peers_methods import GROUPS, METHODS  # noqa: E402

REPO = HERE.parent
MIB, GIB = 1 << 20, 1 << 30
WORKLOADS = {"a": ("1 GiB, 16 fp32 tensors per rank", GIB),
             "b": ("4 GiB, 16 fp32 tensors per rank", 4 * GIB),
             "c": ("small transformer + AdamW state, ~1 GiB, >1,500 tensors per rank", GIB)}
NO_INSTALL_METHODS = ["memcpy", "tierckpt_thread", "tierckpt_process", "tierckpt_tuned", "tierckpt_uncached", "tierckpt_direct",
                      "dcp_thread", "dcp_process"]


def log(msg: str) -> None:
    print(f"[peers] {msg}", file=sys.stderr, flush=True)


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


class Proc:
    """A background process in its own session, stopped with SIGTERM (SIGKILL after 20 s)."""

    def __init__(self, argv, log_path: Path, **kw):
        self.log_path = log_path
        with open(log_path, "ab") as f:
            self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                      start_new_session=True, **kw)

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-2000:] if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()


def wait_port(port: int, proc: Proc, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.p.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.p.returncode}: {proc.tail()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout} s: {proc.tail()}")


def start_agent(work: Path, bins: dict, budget: int, http_port: int = 0) -> tuple[AgentProcess, str, Path]:
    """The private tierckptd; with http_port, also serving the checkpoint HTTP API on loopback."""
    sock, root = str(work / "agent.sock"), Path(f"/dev/shm/tierckpt-peers-{os.getpid()}")
    argv = [bins["TIERCKPT_AGENT_BIN"], "--socket", sock, "--root", str(root), "--durable", str(work / "durable"),
            "--memory-budget", str(budget), "--keep-last", "1", "--log-file", str(work / "agent.log")]
    if http_port:
        argv += ["--http-listen", f"127.0.0.1:{http_port}"]
    agent = AgentProcess(sock, cli=bins["TIERCKPT_CLI"], output=work / "agent.out", log=work / "agent.log",
                         new_session=True)
    agent.poll_s, agent.stop_timeout_s = 0.1, 20  # stopped like the stand-in: SIGTERM, SIGKILL after 20 s
    return agent.launch(argv), sock, root


def start_standin(py: str, sdist: Path, work: Path) -> tuple[Proc, str]:
    port = free_port()
    code = ("import uvicorn\nfrom tests.local_tests.membrain_server import app\n"
            f"uvicorn.run(app, host='127.0.0.1', port={port}, log_level='warning')\n")
    proc = Proc([py, "-c", code], work / "standin.log", cwd=str(sdist))
    wait_port(port, proc, "the amzn-sagemaker-checkpointing stand-in (membrain_server.py)")
    return proc, f"http://127.0.0.1:{port}"


# ---------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------

def steady(xs: list[float]) -> float | None:
    xs = xs[2:] if len(xs) > 2 else xs[1:] or xs
    return statistics.median(xs) if xs else None


def summarize(records: list[dict]) -> dict:
    methods, failed = {}, {}
    for r in records:
        failed.update(r["failed"])
    for name in records[0]["methods"]:
        per = [r["methods"][name] for r in records]
        saves = min(len(p["save"]) for p in per)
        loads = min(len(p["load"]) for p in per)
        sv = [{k: max(p["save"][i][k] for p in per) for k in ("blocking_s", "commit_s")} for i in range(saves)]
        ld = [{"load_s": max(p["load"][i]["load_s"] for p in per), "api_s": max(p["load"][i]["api_s"] for p in per),
               "correct": all(p["load"][i]["correct"] for p in per),
               "bad_keys": sum((p["load"][i]["bad_keys"] for p in per), [])} for i in range(loads)]
        wrong = [i for i, x in enumerate(ld) if not x["correct"]]
        m = {"label": per[0]["label"], "rounds": {"save": sv, "load": ld},
             "first_save_s": sv[0]["commit_s"] if sv else None,
             "steady_blocking_s": steady([x["blocking_s"] for x in sv]),
             "steady_commit_s": steady([x["commit_s"] for x in sv]),
             "steady_load_s": steady([x["load_s"] for x in ld]),
             "steady_load_api_s": steady([x["api_s"] for x in ld]),
             "loads_correct": not wrong and bool(ld)}
        if wrong:
            m["status"] = f"FAILED: wrong load in rounds {wrong} (keys {ld[wrong[0]]['bad_keys'][:5]})"
        elif name in failed:
            m["status"] = f"FAILED: {failed[name]}"
        else:
            m["status"] = "ok"
        methods[name] = m
    keys = ("first_save_s", "steady_blocking_s", "steady_commit_s", "steady_load_s")
    for ref in ("tierckpt_thread", "memcpy"):
        base = methods.get(ref)
        if not base:
            continue
        for m in methods.values():
            m[f"vs_{ref}"] = {k: (m[k] / base[k] if m[k] and base[k] else None) for k in keys}
    return methods


def fmt(x, unit="s") -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if unit == "s" else f"{x:.2f}x"


def table(wl: str, res: dict) -> str:
    head = (f"workload ({wl}): {res['description']}: {res['tensors_per_rank']} tensors/rank, "
            f"{res['state_bytes'] / GIB:.2f} GiB total, {res['rounds']} rounds, slowest rank; "
            "ratios: vs tierckpt (THREAD) | vs memcpy")
    cols = ["method", "first save", "blocking", "commit", "load", "commit/tc", "load/tc", "block/memcpy",
            "commit/memcpy", "load/memcpy", "status"]
    rows = []
    for name, m in res["methods"].items():
        tc, mc = m.get("vs_tierckpt_thread", {}), m.get("vs_memcpy", {})
        rows.append([m["label"], fmt(m["first_save_s"]), fmt(m["steady_blocking_s"]), fmt(m["steady_commit_s"]),
                     fmt(m["steady_load_s"]), fmt(tc.get("steady_commit_s"), "x"), fmt(tc.get("steady_load_s"), "x"),
                     fmt(mc.get("steady_blocking_s"), "x"), fmt(mc.get("steady_commit_s"), "x"),
                     fmt(mc.get("steady_load_s"), "x"), m["status"]])
    for name, why in res["skipped"].items():
        rows.append([name, "-", "-", "-", "-", "-", "-", "-", "-", "-", f"SKIPPED: {why}"])
    w = [max(len(str(r[i])) for r in rows + [cols]) for i in range(len(cols) - 1)]
    lines = [head, "  ".join(c.ljust(w[i]) for i, c in enumerate(cols[:-1])) + "  status"]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r[:-1])) + "  " + r[-1])
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# One workload: one torchrun
# ---------------------------------------------------------------------------

def kill_leftovers(marker: str, run_id: str) -> None:
    """Kills processes of this run that outlived torchrun: those whose command line names this
    workload's opts file, and those whose environment carries torchrun's TORCHELASTIC_RUN_ID of this
    run (DLRover's saver, spawned by local rank 0 into a session of its own through multiprocessing's
    spawn: its command line names nothing of the run, but it inherits the ranks' environment)."""
    run_env = f"TORCHELASTIC_RUN_ID={run_id}".encode()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            environ = (d / "environ").read_bytes().split(b"\0")
            if marker.encode() in (d / "cmdline").read_bytes() or run_env in environ:
                os.kill(int(d.name), signal.SIGKILL)
                log(f"killed leftover process {d.name} of the run")
        except OSError:
            pass


def run_workload(wl: str, args, py: str, env: dict, methods: list[str], skipped: dict, extra: dict,
                 work: Path) -> dict:
    desc, total = WORKLOADS[wl]
    if args.size_mib:
        total = args.size_mib * MIB * (4 if wl == "b" else 1)
        desc = f"{total / MIB:.0f} MiB (--size-mib) " + desc.split(", ", 1)[1]
    need = int(total * (3 + 1.5 * len(methods))) + 2 * GIB
    if mem_available() < need:
        raise MemoryError(f"workload ({wl}) needs about {need / GIB:.1f} GiB of free memory for the state, its "
                          f"load destination, the memcpy buffer and each method's in-memory copies; "
                          f"MemAvailable is {mem_available() / GIB:.1f} GiB: use fewer --methods or --size-mib")
    wdir = work / f"workload-{wl}"
    (wdir / "results").mkdir(parents=True)
    shm = Path(f"/dev/shm/peers-bench-{os.getpid()}-{wl}")
    shm.mkdir(parents=True)
    opts = {"workload": wl, "bytes": total, "rounds": args.rounds, "methods": methods, "skipped": skipped,
            "settle_s": args.settle_s,
            "shm_dir": str(shm), "results_dir": str(wdir / "results"), "timeout_s": args.timeout_s,
            "run_id": f"{os.getpid()}-{wl}-{uuid.uuid4().hex[:6]}", **extra}
    (wdir / "opts.json").write_text(json.dumps(opts))
    shm_before = set(os.listdir("/dev/shm"))
    # --rdzv-id: DLRover names its saver's UNIX sockets /tmp/ckpt_sock/<TORCHELASTIC_RUN_ID>/...; under
    # torchrun's default id ("none") every run shares that directory, and a socket file left by an earlier
    # run's killed saver refused the next run's rank (ConnectionRefusedError: DLRover skipped).
    argv = [py, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
            "--master-port", str(free_port()), "--rdzv-id", opts["run_id"], str(HERE / "peers_rank.py"),
            str(wdir / "opts.json")]
    log(f"workload ({wl}): {' '.join(argv[1:])}")
    t0 = time.monotonic()
    try:
        with open(wdir / "torchrun.log", "wb") as f:
            proc = subprocess.Popen(argv, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = proc.wait(timeout=args.timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = "timeout"
    finally:
        kill_leftovers(str(wdir / "opts.json"), opts["run_id"])
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(Path("/tmp/ckpt_sock", opts["run_id"]), ignore_errors=True)  # DLRover's sockets (--rdzv-id)
        for name in set(os.listdir("/dev/shm")) - shm_before:  # DLRover's <uuid>_ckpt_shm_<rank> and the like
            p = Path("/dev/shm", name)
            if "_ckpt_shm_" in name or name.startswith(("peers-bench-", "torch_")):
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    errors = sorted((wdir / "results").glob("rank*.error"))
    recs = [json.loads(p.read_text()) for p in sorted((wdir / "results").glob("rank*.json"))]
    if rc != 0 or errors or len(recs) != 2:
        why = errors[0].read_text()[-3000:] if errors else (wdir / "torchrun.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"workload ({wl}): torchrun ended with {rc}; {why}")
    all_skipped = dict(skipped)
    for rec in recs:
        for name, why in rec["skipped"].items():  # the rank that could not start it says why, not its peers
            if name not in all_skipped or all_skipped[name].endswith("skipped on another rank"):
                all_skipped[name] = why
    return {"description": desc, "rounds": args.rounds, "wall_s": time.monotonic() - t0,
            "state_bytes": sum(x["state_bytes"] for x in recs), "tensors_per_rank": recs[0]["tensors"],
            "tensor_bytes": recs[0]["sizes"], "methods": summarize(recs), "skipped": all_skipped}


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--workload", default="a,c", help="comma list of a, b, c (default a,c)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--methods", default="all", help=f"comma list of {', '.join(METHODS)} or groups "
                    f"{', '.join(GROUPS)} (memcpy and tierckpt_thread are always run: the ratios' bases)")
    ap.add_argument("--size-mib", type=int, default=0, help="total state of (a) in MiB (default 1024)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    ap.add_argument("--no-install", action="store_true", help="ranks use this interpreter; no peer packages")
    ap.add_argument("--venv", type=Path, default=REPO / "build" / "peers-venv")
    ap.add_argument("--timeout-s", type=int, default=1800)
    ap.add_argument("--settle-s", type=float, default=1.0,
                    help="pause before each timed save and load (default 1; 0 = none)")
    a = ap.parse_args(argv)
    wanted = []
    for m in a.methods.split(","):
        for x in GROUPS.get(m, [m]):
            if x not in METHODS:
                ap.error(f"unknown method {x!r}: choose from {', '.join(METHODS)} or {', '.join(GROUPS)}")
            wanted.append(x)
    a.method_list = [x for x in METHODS if x in set(wanted) | {"memcpy", "tierckpt_thread"}]
    a.workloads = a.workload.split(",")
    if any(w not in WORKLOADS for w in a.workloads) or a.rounds < 1:
        ap.error("--workload takes a comma list of a, b, c; --rounds >= 1")
    return a


def main(argv=None) -> int:
    args = parse(argv)
    work = REPO / "build" / f"peers-run-{os.getpid()}"
    work.mkdir(parents=True)
    methods, skipped, extra, procs = list(args.method_list), {}, {}, []
    try:
        bins = peers_install.agent_binaries()
    except Exception as e:  # noqa: BLE001
        log(f"the tierckpt package under test is not usable from {sys.executable}: {e}")
        return 2
    if args.no_install:
        py = sys.executable
        for m in methods:
            if m not in NO_INSTALL_METHODS:
                skipped[m] = "--no-install: peer packages are not installed"
    else:
        py, skipped = peers_install.ensure(args.venv, methods, log)
        log(f"tierckpt on the venv's path: {peers_install.link_tierckpt(args.venv)}")
        if "mlflashpoint" in methods:
            why = peers_install.mlflashpoint_reason(py)
            if why:
                skipped["mlflashpoint"] = why
    env = {**os.environ, **bins, "PYTHONPATH": str(HERE), "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    report = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "date": time.strftime("%Y-%m-%d %H:%M UTC",
              time.gmtime()), "machine": {"cpus": os.cpu_count(), "mem_total_gib": round(
                  int(Path("/proc/meminfo").read_text().split()[1]) / (1 << 20), 1)},
              "python": py, "workloads": {}}
    rc = 0
    try:
        biggest = max((args.size_mib * MIB if args.size_mib else WORKLOADS[w][1]) for w in args.workloads)
        # Each tierckpt method keeps its newest step (--keep-last 1) and writes the next one beside it, and
        # the namespaces of a finished workload keep theirs: size the budget for all of them.
        n_tc = sum(1 for m in methods if m.startswith("tierckpt"))
        budget = (2 + len(args.workloads) - 1) * max(1, n_tc) * biggest + GIB
        http_port = free_port() if "sagemaker_tierckpt" in methods else 0
        if http_port:  # the library's namespace keeps 3 steps (its default steps_retained), 2 after prepare()
            budget += (3 + len(args.workloads) - 1) * biggest
        agent, sock, root = start_agent(work, bins, budget, http_port)
        procs.append(agent)
        extra["socket"] = sock
        if http_port:
            extra["sagemaker_tierckpt_url"] = f"http://127.0.0.1:{http_port}"
        if "sagemaker" in methods and "sagemaker" not in skipped:
            try:
                sdist = peers_install.sagemaker_sdist(py, args.venv.parent / "peers-src")
                standin, url = start_standin(py, sdist, work)
                procs.append(standin)
                extra["sagemaker_url"] = url
            except Exception as e:  # noqa: BLE001
                skipped["sagemaker"] = f"its HTTP stand-in could not be started: {e}"
        for wl in args.workloads:
            try:
                res = run_workload(wl, args, py, env, methods, skipped, extra, work)
            except MemoryError as e:
                log(f"REFUSED: {e}")
                report["workloads"][wl] = {"refused": str(e)}
                rc = rc or 1
                continue
            report["workloads"][wl] = res
            print(table(wl, res), flush=True)
            print()
            bad = [n for n, m in res["methods"].items() if m["status"] != "ok"]
            if bad:
                for n in bad:
                    print(f"!!! {res['methods'][n]['label']}: {res['methods'][n]['status']}", flush=True)
                rc = 1
    except Exception as e:  # noqa: BLE001
        log(f"ERROR: {e}")
        rc = 1
    finally:
        for p in reversed(procs):
            p.stop()
        if "root" in locals():
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
    if args.plot and report["workloads"]:
        tmp = work / "report.json"
        tmp.write_text(json.dumps(report))
        r = subprocess.run([py, str(HERE / "peers_plot.py"), str(tmp), str(args.plot)], capture_output=True, text=True)
        if r.returncode:
            log(f"plot failed: {r.stderr[-1000:]}")
            rc = rc or 1
    if rc == 0:
        shutil.rmtree(work, ignore_errors=True)
    else:
        log(f"logs kept in {work}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
