#!/usr/bin/env python3
"""tierckpt-stress: a randomized fault campaign against a real cluster, with an oracle.

    python tests/stress/tierckpt_stress.py --seed 7 --faults 200 [--duration 600] [--json out.json]
    python tests/stress/tierckpt_stress.py --replay out.json      # the same seed, the same schedule

Starts 4 real tierckptd agents (own tmpfs roots, peers with a secret, R = 2,
--replica-ack all, one filesystem durable tier), then runs rounds: each round
starts writers (tc_test_writer, --persist --wait-durable) that save
multi-object steps with seed-derived contents into 8 namespaces (two per
node), injects one fault drawn from the schedule while they run, recovers,
and asks the oracle (oracle.py) to check its invariants. The schedule of
round i is a function of (seed, i) only, so a seed replays the same faults on
the same targets with the same delays; what the timing makes of them may
differ. The first broken invariant stops the run (unless --keep-going) and is
printed with the agents' log lines around it. Exit 0: no invariant broken.
docs/reliability.md describes the faults, the checks and the figures.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import CLI_BIN, Cluster  # noqa: E402
from oracle import Attempt, Oracle, Violation  # noqa: E402

KINDS = ["writer_kill", "agent_kill", "agent_stop", "agent_replace", "corrupt_memory", "corrupt_replica",
         "corrupt_durable", "writer_race", "hostile_clients", "tenant_fill", "s3_faults"]
# Faults of the links between agents: only with --network netns (each agent on a host of its own).
LINK_KINDS = ["link_cut", "link_split", "link_lossy"]
SIZES = [4096, 65536 + 3, 262144, 1 << 20]
# A writer still running this long after its round's fault is "stuck" (a hang never ends, so any bound
# finds it). 60 s fired once in CI's fixed-seed netns campaign with the 2-core VM at load 7-8 (the campaign
# beside the Ray tests, a niced sanitizer build and an S3 campaign) and never in reruns: 120 s.
WRITER_TIMEOUT_S = 120
DCP_JOB = Path(__file__).resolve().parent / "dcp_job.py"


def plan_round(seed, i, kinds, namespaces, nodes):
    """Round i of the schedule: a pure function of (seed, i)."""
    rng = random.Random(f"{seed}:{i}")
    k = rng.randint(2, 4)
    writers = [dict(ns=ns, objects=rng.randint(1, 4), size=rng.choice(SIZES), direct=rng.random() < 0.5,
                    content=rng.getrandbits(48)) for ns in rng.sample(namespaces, k)]
    return dict(round=i, kind=rng.choice(kinds), node=rng.choice(nodes), pick=rng.getrandbits(30),
                age=rng.randrange(4), obj=rng.randrange(4), where=rng.random(), mode=rng.choice(["flip", "truncate"]),
                delay=round(rng.uniform(0.005, 0.08), 3), hold=round(rng.uniform(0.2, 1.5), 3), writers=writers,
                hostile=rng.randint(4, 24), check_pick=rng.getrandbits(30),
                # Drawn last, so that the draws above (and older seeds' schedules) stay as they were.
                dcp=rng.random() < 1 / 3, dcp_content=rng.getrandbits(30))


class Campaign:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.kinds = args.kinds
        self.workdir = Path(tempfile.mkdtemp(prefix=f"tierckpt-stress-{self.seed}-", dir=args.workdir))
        self.s3 = None
        self.hosts = None
        if args.network == "netns":
            from netns import Hosts  # noqa: PLC0415  (tests/harness, on the path through cluster.py)
            self.hosts = Hosts(args.nodes)
        if args.durable == "s3":
            from s3_tier import S3Tier  # noqa: PLC0415  (moto and boto3 only when asked for)
            # With --network netns the agents reach the proxy at this machine's address on their switch.
            self.s3 = S3Tier(self.workdir, listen_host=self.hosts.own_ip if self.hosts else "127.0.0.1")
            self.c = Cluster(self.workdir / "cluster", n=args.nodes, budget=args.budget, durable_url=self.s3.url,
                             env=self.s3.env, hosts=self.hosts)
        else:
            self.c = Cluster(self.workdir / "cluster", n=args.nodes, budget=args.budget, hosts=self.hosts)
        self.namespaces = [f"{n}-{x}" for n in self.c.nodes() for x in ("a", "b")]
        # --dcp: a real DCP job (dcp_job.py: torchrun, two gloo ranks, TieredWriter) saves into n1-dcp in a third
        # of the rounds, rank 0 through n1's agent and rank 1 through n2's, so each of its steps spans
        # two agents and commits down the tree from n1.
        self.dcp_ns = None
        if args.dcp:
            self.dcp_ns = f"{self.c.nodes()[0]}-dcp"
            self.namespaces.append(self.dcp_ns)
        self.next_step = {ns: 1 for ns in self.namespaces}
        self.o = Oracle(self.c, self.workdir / "restores", s3=self.s3)
        self.injected = defaultdict(int)
        self.no_target = defaultdict(int)
        self.schedule = []  # each round's kind, target node and pick, as planned: what a replay must repeat
        self.recovery = defaultdict(list)
        self.writer_outcomes = defaultdict(int)
        self.violations = []
        self.dcp_ahead = None  # the DCP job started ahead of its round (start_dcp)
        self.events = []  # (t, text): what the schedule did, for the replay print

    def note(self, text):
        self.events.append((time.time(), text))
        if self.args.verbose:
            print(f"[stress] {text}", flush=True)

    # --- writers ---------------------------------------------------------------------------
    def launch(self, w, step, content):
        ns = w["ns"]
        node = ns.split("-")[0]
        a = Attempt(ns, step, node, content, w["objects"], w["size"])
        self.o.attempt(a)
        args = ["--ns", ns, "--step", step, "--objects", a.objects, "--size", a.size, "--seed", a.seed,
                "--persist", "--wait-durable"] + (["--direct"] if w["direct"] else [])
        return a, self.c.agents[node].writer(*args)

    def plan(self, i):
        # The C++ writers' namespaces only: the DCP job's (n1-dcp) is written by the DCP job alone.
        return plan_round(self.seed, i, self.kinds, [ns for ns in self.namespaces if ns != self.dcp_ns],
                          self.c.nodes())

    def start_dcp(self, i):
        """Starts, ahead of its round, the DCP job of the first round from i on that has one (looking at
        most 12 rounds ahead): torchrun, its two ranks' imports of torch and their process group take
        seconds here, and the ranks then wait on a file (dcp_job.py --go) without touching an agent,
        until launch_dcp lets them save in their own round, where the old harness started the job
        (decision 128). Its step is the namespace's next: only DCP rounds take n1-dcp's steps."""
        if not self.dcp_ns or self.dcp_ahead is not None:
            return
        for j in range(i, min(i + 12, self.args.faults)):
            plan = self.plan(j)
            if not plan["dcp"]:
                continue
            step = self.next_step[self.dcp_ns]
            nodes = self.c.nodes()
            members = [self.c.agents[n] for n in nodes[:2]]
            go = self.workdir / f"dcp-go-{step}"
            env = dict(os.environ, TIERCKPT_CLI=str(CLI_BIN), PYTHONUNBUFFERED="1")
            p = subprocess.Popen([sys.executable, str(DCP_JOB), "save", "--ns", self.dcp_ns, "--step", str(step),
                                  "--seed", str(plan["dcp_content"]), "--sockets",
                                  ",".join(str(m.socket) for m in members), "--wait-durable", "40", "--go", str(go)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                                 env=env)
            self.dcp_ahead = dict(round=j, step=step, content=plan["dcp_content"], world=len(members), go=go, p=p)
            return

    def say_dcp(self, go: Path, word: str):
        tmp = go.with_suffix(".tmp")
        tmp.write_text(word)
        tmp.rename(go)

    def stop_dcp_ahead(self):
        """A job started for a round that did not run (--duration, a violation): called off, unsaved."""
        job, self.dcp_ahead = self.dcp_ahead, None
        if job is None:
            return
        self.say_dcp(job["go"], "abort")
        try:
            job["p"].communicate(timeout=WRITER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            job["p"].kill()
            job["p"].communicate()

    def launch_dcp(self, i, step, content):
        if self.dcp_ahead is None or self.dcp_ahead["round"] != i:
            self.stop_dcp_ahead()
            self.start_dcp(i)
        job, self.dcp_ahead = self.dcp_ahead, None
        assert (job["round"], job["step"], job["content"]) == (i, step, content), (job, i, step, content)
        a = Attempt(self.dcp_ns, step, self.c.nodes()[0], content, 0, 0, dcp_world=job["world"])
        self.o.attempt(a)
        self.say_dcp(job["go"], "go")
        return a, job["p"]

    def apply_marks(self, records):
        for r in records:
            for node, copy in self.round_marks:
                if r.attempt.node == node:
                    r.destroyed.add(copy)

    def drain(self, running):
        for a, p in running:
            try:
                out, err = p.communicate(timeout=WRITER_TIMEOUT_S)
            except Exception:
                p.kill()
                out, err = p.communicate()
                said = " | ".join((out.strip().splitlines() + err.strip().splitlines())[-4:])[-600:]
                raise Violation("writer_stuck", f"writer of {a.ns}/{a.step} still ran {WRITER_TIMEOUT_S}s after "
                                f"the fault; its last words: {said or '(none)'}", [a.node])
            kind = "dcp_" if a.dcp_world else ""  # a DCP job's outcomes apart: dcp_acked, dcp_failed, ...
            if p.returncode == 0 and out.startswith("COMMITTED"):
                self.o.ack(a)
                self.apply_marks([self.o.acked[(a.ns, a.step)]])
                self.writer_outcomes[kind + "acked"] += 1
            elif p.returncode < 0:
                self.writer_outcomes[kind + "killed"] += 1
            else:
                self.writer_outcomes[kind + "failed"] += 1
                last = (err.strip().splitlines() or ["?"])[-1]
                self.note(f"writer {a.ns}/{a.step} failed: {last[:300]}")

    # --- faults ----------------------------------------------------------------------------
    def target_step(self, plan, node=None):
        """An acknowledged step chosen by the plan: namespace by `pick`, `age` steps before the newest."""
        cands = [ns for ns in self.namespaces if self.o.acked_of(ns) and (node is None or ns.startswith(node + "-"))]
        if not cands:
            return None
        ns = cands[plan["pick"] % len(cands)]
        steps = self.o.acked_of(ns)
        return ns, steps[max(0, len(steps) - 1 - plan["age"])]

    def damage_s3(self, ns, step, plan):
        names = [n for n in self.s3.names(ns, step) if n.startswith("obj_")]
        if not names:
            return False
        name = names[plan["obj"] % len(names)]
        data = self.s3.get(ns, step, name)
        if not data:
            return False
        if plan["mode"] == "truncate":
            data = data[:int(len(data) * plan["where"])]
        else:
            off = min(len(data) - 1, int(len(data) * plan["where"]))
            data = data[:off] + bytes([data[off] ^ 0x5A]) + data[off + 1:]
        self.s3.put(ns, step, name, data)
        self.note(f"{plan['mode']} s3://{self.s3.bucket}/{self.s3.key(ns, step, name)}")
        return True

    def damage(self, path: Path, plan):
        files = sorted(p for p in path.glob("obj_*.bin")) if path.is_dir() else []
        if not files:
            return False
        f = files[plan["obj"] % len(files)]
        size = f.stat().st_size
        if size == 0:
            return False
        if plan["mode"] == "truncate":
            os.truncate(f, int(size * plan["where"]))
        else:
            off = min(size - 1, int(size * plan["where"]))
            with open(f, "r+b") as fh:
                fh.seek(off)
                b = fh.read(1)
                fh.seek(off)
                fh.write(bytes([b[0] ^ 0x5A]))
        self.note(f"{plan['mode']} {f}")
        return True

    def inject(self, plan, running):
        kind, node = plan["kind"], plan["node"]
        agent = self.c.agents[node]
        t0 = time.time()
        if kind == "writer_kill":
            a, p = running[plan["pick"] % len(running)]
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                self.note(f"SIGKILL writer {a.ns}/{a.step}")
            else:
                self.no_target[kind] += 1
        elif kind in ("agent_kill", "agent_replace"):
            agent.kill()
            self.note(f"SIGKILL agent {node}")
            if kind == "agent_replace":
                agent.wipe_root()
                # Also for writers of this round acknowledged later: their commit came before the kill.
                self.round_marks.append((node, "mem_origin"))
                self.round_marks.append((self.c.origin_of_replicas_on(node), "mem_holder"))
                self.apply_marks(self.o.acked.values())
                self.note(f"wiped root of {node}: a fresh machine")
            time.sleep(plan["hold"])
            t1 = time.time()
            agent.start()
            self.recovery[kind + "_agent_ready"].append(time.time() - t1)
            # Time to recover: until its namespaces' newest acknowledged steps restore right through
            # it again (from its own memory, the holder or the durable tier), writers still running.
            newest = [(ns, self.o.newest[ns]) for ns in self.namespaces
                      if ns.startswith(node + "-") and ns in self.o.newest]
            if newest:
                if all(self.o.check_step(k) for k in newest):
                    self.recovery[kind + "_to_first_restore"].append(time.time() - t1)
        elif kind == "agent_stop":
            agent.signal(signal.SIGSTOP)
            agent.down = "stopped"
            self.note(f"SIGSTOP agent {node} for {plan['hold']}s")
            time.sleep(plan["hold"])
            agent.signal(signal.SIGCONT)
            agent.down = None
        elif kind in ("corrupt_memory", "corrupt_replica", "corrupt_durable"):
            t = self.target_step(plan)
            if t is None:
                self.no_target[kind] += 1
                return None
            ns, step = t
            origin = ns.split("-")[0]
            d = f"ns/{ns}/step_{step:010d}"
            if kind == "corrupt_memory":
                path, copy = self.c.agents[origin].root / d, "mem_origin"
            elif kind == "corrupt_replica":
                path, copy = self.c.agents[self.c.holder(origin)].root / "replicas" / origin / d, "mem_holder"
            else:
                path, copy = self.c.durable / ns / f"step_{step:010d}", "durable"
            done = self.damage_s3(ns, step, plan) if copy == "durable" and self.s3 else self.damage(path, plan)
            if done:
                self.o.destroy(t, copy)
            else:
                self.no_target[kind] += 1
            return t
        elif kind == "tenant_fill":
            if not self.c.mounted:
                self.no_target[kind] += 1
                return None
            self.filler = self.c.shm / "second-tenant.fill"
            st = os.statvfs(self.c.shm)
            free = st.f_bavail * st.f_frsize
            fd = os.open(self.filler, os.O_CREAT | os.O_WRONLY, 0o600)
            try:
                os.posix_fallocate(fd, 0, max(4096, free - 4096))
            except OSError as e:
                self.note(f"second tenant stopped at {e}")
            finally:
                os.close(fd)
            self.note(f"a second tenant fills {self.c.shm} ({free} bytes free before)")
        elif kind == "s3_faults":
            action = self.s3.actions[plan["pick"] % len(self.s3.actions)]
            count = 1 + plan["hostile"] // 2
            self.s3.burst(action, count, delay_s=min(plan["hold"], 1.0))
            self.note(f"S3: the next {count} requests get {action}")
        elif kind == "hostile_clients":
            self.hostile = []
            for j in range(plan["hostile"]):
                try:
                    if j % 2 == 0:
                        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        s.connect(str(agent.socket))
                    else:
                        s = socket.create_connection((agent.host, agent.port), timeout=2)
                    if j % 3 == 0:
                        s.send(os.urandom(7 + j))  # half a frame, then silence
                    self.hostile.append(s)
                except OSError as e:
                    self.note(f"hostile connection {j} to {node} refused: {e}")
            self.note(f"{len(self.hostile)} idle/half-sent connections to {node} (local socket and peer port)")
        self.recovery[kind].append(time.time() - t0)
        return None

    def inject_link(self, plan):
        """Cuts, splits or degrades links before the round's writers start; run_round holds it for
        3 x hold (0.6-4.5 s, around --peer-timeout-ms 3000) while saves, replication, persistence
        and restores run across it, then heals it. Returns the pairs of nodes it separates (or the
        degraded node paired with every other): the round's fault landed when a writer's origin and
        its replica holder are such a pair."""
        nodes = self.c.nodes()
        host = {n: i + 1 for i, n in enumerate(nodes)}
        kind, node, hold = plan["kind"], plan["node"], 3 * plan["hold"]
        if kind == "link_cut":
            groups = [[node], [n for n in nodes if n != node]]
            self.note(f"link of {node} cut from every other node for {hold:.2f}s")
        elif kind == "link_split":
            k = plan["pick"] % len(nodes)
            ring = nodes[k:] + nodes[:k]
            groups = [ring[:len(nodes) // 2], ring[len(nodes) // 2:]]
            self.note(f"network split {groups[0]} | {groups[1]} for {hold:.2f}s")
        else:
            loss = 1 + plan["pick"] % 15
            rate = [None, 16, 64][plan["obj"] % 3]
            self.hosts.impair(host[node], loss_pct=loss, rate_mbit=rate)
            self.note(f"link of {node} drops {loss}% of packets" + (f", {rate} Mbit/s" if rate else "")
                      + f" for {hold:.2f}s")
            return hold, {frozenset((node, n)) for n in nodes if n != node}
        self.hosts.partition([[host[n] for n in g] for g in groups])
        return hold, {frozenset((a, b)) for a in groups[0] for b in groups[1]}

    def link_landed(self, plan, separated) -> bool:
        for w in plan["writers"]:
            origin = w["ns"].split("-")[0]
            if frozenset((origin, self.c.holder(origin))) in separated:
                return True
        return False

    # --- the loop --------------------------------------------------------------------------
    def run_round(self, i):
        plan = self.plan(i)
        self.schedule.append({k: plan[k] for k in ("round", "kind", "node", "pick")})
        self.hostile = []
        self.filler = None
        self.round_marks = []
        running = []
        t_round = time.time()
        before = {k: v[1] for k, v in self.o.timing.items()}
        early = plan["kind"] == "tenant_fill"  # the tmpfs is full before the writers start
        if early:
            self.injected[plan["kind"]] += 1
            self.inject(plan, running)
        link = None  # a link fault is in place before the writers start, and held while they run
        if plan["kind"] in LINK_KINDS:
            self.injected[plan["kind"]] += 1
            link = self.inject_link(plan)
        for w in plan["writers"]:
            step = self.next_step[w["ns"]]
            self.next_step[w["ns"]] += 1
            running.append(self.launch(w, step, w["content"]))
        if self.dcp_ns and plan["dcp"]:
            step = self.next_step[self.dcp_ns]
            self.next_step[self.dcp_ns] += 1
            running.append(self.launch_dcp(i, step, plan["dcp_content"]))
            self.start_dcp(i + 1)  # the next DCP round's job: its start-up beside this round
        if plan["kind"] == "writer_kill":
            # The victim: a bigger step (8..16 objects of 256 KiB) still being written when the kill lands.
            w = dict(plan["writers"][0], objects=8 + plan["pick"] % 9, size=262144)
            step = self.next_step[w["ns"]]
            self.next_step[w["ns"]] += 1
            running.insert(0, self.launch(w, step, w["content"] ^ 0x5EED))
            plan["pick"] = 0
        if plan["kind"] == "writer_race":
            w = plan["writers"][0]
            running.append(self.launch(w, self.next_step[w["ns"]] - 1, w["content"] ^ 0xABCDEF))
            self.note(f"two writers race for {w['ns']}/{self.next_step[w['ns']] - 1}")
        self.o.tally("round_start_writers", time.time() - t_round)
        time.sleep(plan["delay"])
        target = None
        t_fault = time.time()
        if link:
            hold, separated = link
            t_link = time.time()
            try:
                time.sleep(hold)
            finally:
                self.hosts.heal()
            if not self.link_landed(plan, separated):
                self.no_target[plan["kind"]] += 1
            self.recovery[plan["kind"]].append(time.time() - t_link)
        elif not early:
            self.injected[plan["kind"]] += 1
            target = self.inject(plan, running)
        t0 = time.time()
        self.o.tally("round_fault", t0 - t_fault)
        self.drain(running)
        for s in self.hostile:
            s.close()
        if self.s3:
            self.s3.calm()
        if self.filler:
            self.filler.unlink()
            self.filler = None
        self.recovery[plan["kind"] + "_drain"].append(time.time() - t0)
        self.o.tally("round_drain", time.time() - t0)
        self.start_dcp(i + 1)  # the next DCP round's job: its start-up beside this round's checks
        # What to read back: every step written this round, the fault's target, each namespace's
        # newest, and one older acknowledged step.
        keys = {(a.ns, a.step) for a, _ in running}
        if target:
            keys.add(target)
        for ns in self.namespaces:
            if ns in self.o.newest:
                keys.add((ns, self.o.newest[ns]))
        acked = sorted(self.o.acked)
        if acked:
            keys.add(acked[plan["check_pick"] % len(acked)])
        with self.o.timed("round_check"):
            self.o.check_cluster(keys, self.namespaces)
        self.o.tally("round", time.time() - t_round)
        if self.args.profile:
            spent = {k: v[1] - before.get(k, 0.0) for k, v in self.o.timing.items()}
            print(f"[profile] round {i} {plan['kind']:<16} dcp={int(bool(self.dcp_ns and plan['dcp']))} "
                  + " ".join(f"{k}={v:.2f}" for k, v in sorted(spent.items()) if v >= 0.005), flush=True)

    def final_check(self):
        with self.o.timed("final_check"):
            return self._final_check()

    def _final_check(self):
        keys = set(self.o.acked)
        for a in self.c.agents.values():
            keys |= {k for k in a.ls() if k[0] in self.namespaces}
        self.o.check_cluster(keys, self.namespaces)
        return len(keys)

    def report_violation(self, v: Violation):
        print(f"\nINVARIANT BROKEN: {v.invariant}\n  {v.detail}", flush=True)
        print(f"  seed {self.seed}, round {self.round}; replay: python {sys.argv[0]} --seed {self.seed} "
              f"--faults {self.round + 1} --kinds {','.join(self.kinds)} --durable {self.args.durable} "
              f"--network {self.args.network}" + (" --dcp" if self.args.dcp else ""))
        print("  schedule, last events:")
        for t, text in self.events[-8:]:
            print(f"    {t - v.t:+7.3f}s {text}")
        for node in (v.nodes or self.c.nodes()):
            lines = [x for x in self.c.agents[node].log_around(v.t, before=self.args.log_window, after=1.0)
                     if "event=hello" not in x and 'event="connection' not in x]  # every CLI call says hello
            print(f"  --- {node} log ({len(lines)} lines within {self.args.log_window}s before) ---")
            for line in lines[-30:]:
                print("    " + line)

    def run(self):
        start = time.time()
        self.round = 0
        status = "ok"
        try:
            self.c.start()
            if self.dcp_ns:
                self.o.dcp.spawn()  # the DCP checker's imports beside the first rounds
            self.start_dcp(0)
            while (self.round < self.args.faults and self.landed() < self.args.landed
                   and (time.time() - start < self.args.duration or self.round < self.args.min_rounds)):
                try:
                    self.run_round(self.round)
                except Violation as v:
                    self.violations.append(v)
                    self.report_violation(v)
                    if not self.args.keep_going:
                        status = "violation"
                        break
                self.round += 1
            if status == "ok":
                try:
                    self.final_keys = self.final_check()
                except Violation as v:
                    self.violations.append(v)
                    self.report_violation(v)
            status = "violation" if self.violations else "ok"
        finally:
            self.stop_dcp_ahead()
            self.o.close()  # the DCP checker (counted restarts go into the summary's oracle counters)
            elapsed = time.time() - start
            summary = self.summary(status, elapsed)
            self.c.stop()  # agents killed, roots and the private tmpfs gone; logs stay in the workdir
            if self.s3:
                self.s3.stop()
            if self.hosts:
                self.hosts.close()
                self.netns_left = self.hosts.leftovers()
            if not self.args.keep:
                shutil.rmtree(self.workdir, ignore_errors=True)
        return summary

    def landed(self) -> int:
        """Faults injected so far that found a target (the figure issue 42's bar counts)."""
        return sum(self.injected.values()) - sum(self.no_target.values())

    def summary(self, status, elapsed):
        def stats(xs):
            return {"n": len(xs), "mean_s": round(sum(xs) / len(xs), 3), "max_s": round(max(xs), 3)} if xs else {}
        return {
            "status": status, "seed": self.seed, "rounds": self.round, "faults_planned": self.args.faults,
            "kinds": self.kinds, "durable": self.args.durable, "network": self.args.network, "dcp": self.args.dcp, "seconds": round(elapsed, 1), "nodes": self.c.n, "budget": self.args.budget,
            "faults_injected": dict(self.injected), "faults_landed": self.landed(), "faults_without_target": dict(self.no_target),
            "steps_attempted": sum(len(v) for v in self.o.attempts.values()),
            "steps_acknowledged": len(self.o.acked), "writers": dict(self.writer_outcomes),
            "steps_checked_final": getattr(self, "final_keys", 0),
            "oracle": self.o.counters,
            "steps_lost": sum(v.invariant == "acked_step_lost" for v in self.violations),
            "wrong_bytes": sum(v.invariant == "wrong_bytes" for v in self.violations),
            "violations": [{"invariant": v.invariant, "detail": v.detail, "nodes": v.nodes}
                           for v in self.violations],
            "findings": self.o.findings,
            "recovery": {k: stats(v) for k, v in sorted(self.recovery.items())},
            # Where the time went: phase -> calls and seconds in all (round_*: the parts of a round;
            # check_*: the oracle's reads, within round_check and final_check).
            "profile": {k: {"calls": n, "s": round(t, 1)} for k, (n, t) in sorted(self.o.timing.items())},
            "schedule": self.schedule,
            "netns_left": getattr(self, "netns_left", []),  # --network netns: namespaces close() left behind
            "workdir": str(self.workdir) if self.args.keep else None,
        }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=None, help="schedule seed (default: a fresh random one, printed)")
    p.add_argument("--faults", type=int, default=50, help="rounds, one fault each (default 50)")
    p.add_argument("--duration", type=float, default=float("inf"), help="stop starting rounds after S seconds")
    p.add_argument("--landed", type=int, default=float("inf"),
                   help="stop starting rounds once N faults have landed on a target (a long run sized by the "
                        "faults that count, not by rounds)")
    p.add_argument("--min-rounds", type=int, default=0,
                   help="start rounds past --duration until N have run (a bounded run on a slow machine still "
                        "covers the schedule's first N faults)")
    p.add_argument("--kinds", default=None,
                   help=f"comma list of fault kinds (default: all of {','.join(KINDS)}, and with --network netns "
                        f"also {','.join(LINK_KINDS)})")
    p.add_argument("--network", choices=["loopback", "netns"], default="loopback",
                   help="loopback (default): every agent on 127.0.0.1; netns: each agent on a host of its own "
                        "(a network namespace on one switch, made and removed here; root, iproute2, nftables), "
                        "so that the link kinds can cut, split and degrade the links between them")
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--durable", choices=["fs", "s3"], default="fs",
                   help="durable tier: a directory (fs, default) or moto S3 behind the fault proxy (s3; with "
                        "--network netns the proxy listens on this machine's address on the hosts' switch)")
    p.add_argument("--budget", default="64MiB", help="--memory-budget of each agent (default 64MiB)")
    p.add_argument("--dcp", action="store_true",
                   help="also a real DCP job (two gloo ranks through TieredWriter, one step spanning n1's and "
                        "n2's agents) in a third of the rounds, checked by loading it with DCP (needs torch and "
                        "tierckpt in this Python)")
    p.add_argument("--json", help="write the JSON summary here too")
    p.add_argument("--replay", help="a summary JSON: rerun its seed, rounds and kinds")
    p.add_argument("--keep-going", action="store_true", help="do not stop at the first broken invariant")
    p.add_argument("--keep", action="store_true", help="keep the work directory (the agents' logs, hosts, durable tier)")
    p.add_argument("--workdir", default=None, help="parent of the work directory (default: $TMPDIR)")
    p.add_argument("--log-window", type=float, default=3.0, help="seconds of agent log printed before a violation")
    p.add_argument("--profile", action="store_true",
                   help="print each round's time per phase (the summary's `profile` has the totals)")
    p.add_argument("-v", "--verbose", action="store_true", help="print every fault as it is injected")
    args = p.parse_args(argv)
    if args.replay:
        prev = json.loads(Path(args.replay).read_text())
        # A run stopped by a violation counts the rounds before the failing one.
        rounds = prev["rounds"] + (1 if prev["status"] == "violation" else 0)
        args.seed, args.faults, args.kinds = prev["seed"], rounds, ",".join(prev["kinds"])
        args.nodes, args.budget, args.keep = prev.get("nodes", 4), prev.get("budget", args.budget), True
        args.durable = prev.get("durable", "fs")
        args.network = prev.get("network", "loopback")
        args.dcp = prev.get("dcp", False)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    if args.kinds is None:
        args.kinds = ",".join(KINDS + (LINK_KINDS if args.network == "netns" else []))
    args.kinds = [k for k in args.kinds.split(",") if k and (k != "s3_faults" or args.durable == "s3")]
    bad = [k for k in args.kinds if k not in KINDS + LINK_KINDS]
    if bad or not args.kinds:
        p.error(f"unknown fault kinds {bad}; choose from {KINDS + LINK_KINDS}")
    links = [k for k in args.kinds if k in LINK_KINDS]
    if links and args.network != "netns":
        p.error(f"{links} cut or degrade the links between agents, which share one loopback unless "
                "--network netns puts each on a host of its own")
    if args.dcp:
        try:
            import tierckpt.torch  # noqa: F401, PLC0415
        except ImportError as e:
            p.error(f"--dcp runs DCP jobs with this Python ({sys.executable}), which cannot import tierckpt.torch: "
                    f"{e}; run it with the project's venv (scripts/setup.sh python)")
    if args.network == "netns":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
        from netns import unavailable  # noqa: PLC0415
        why = unavailable()
        if why:
            p.error(f"--network netns: {why}")
    print(f"tierckpt-stress: seed {args.seed}, up to {args.faults} faults of {args.kinds}", flush=True)
    summary = Campaign(args).run()
    text = json.dumps(summary, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0 if summary["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
