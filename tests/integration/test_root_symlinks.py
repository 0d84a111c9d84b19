"""Issue 16 (8): symbolic links in or as the agent's root are never followed.

A link planted under the root (a step, a namespace, a .partial, the trash, the
pool, the lock file) pointing elsewhere made a restarted agent delete, or move
into its pool, the files it pointed at; a link planted as the root itself by
another user (the default root, /dev/shm/tierckpt-<uid>, is predictable) made a
root agent chmod its target 0700, clean it and write its own files there. Each
test plants the link, starts a real tierckptd and checks that the target is
untouched, byte for byte, and that the agent says what it found.
"""
import os
import pwd
import shutil
import stat
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import SHM, assert_dirs_equal

FOE = "tcfoe"


def make_bait(victim: Path):
    """Files outside the root shaped like what each walk of the root recycles,
    removes or adopts: loose files, a pool segment, a trash entry, a namespace
    with a step and a .partial dir, a lock file."""
    for d in ("sub", "job/step_0000000001", "ns/job/step_0000000002.partial", "pool", "trash/3"):
        (victim / d).mkdir(parents=True, exist_ok=True)
    for f in ("precious", "sub/precious", "seg_1", "job/precious", "job/step_0000000001/a", "ns/job/precious",
              "ns/job/step_0000000002.partial/a", "pool/precious", "pool/seg_9", "trash/3/a", "agent.lock"):
        (victim / f).write_bytes(b"keep " + f.encode() + b" " + b"v" * 4096)
    victim.chmod(0o755)


def snapshot(top: Path):
    """Every entry below top, links not followed: relative path -> (mode, content)."""
    out = {".": (stat.S_IMODE(os.lstat(top).st_mode), "<dir>")}
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                content = "-> " + os.readlink(p)
            elif stat.S_ISDIR(st.st_mode):
                content = "<dir>"
            else:
                content = p.read_bytes()
            out[str(p.relative_to(top))] = (stat.S_IMODE(st.st_mode), content)
    return out


@pytest.fixture
def victim():
    """A directory outside any agent's root, on the same tmpfs (so a rename
    into a pool would succeed), removed afterwards."""
    v = SHM / f"tc-victim-{uuid.uuid4().hex[:12]}"
    v.mkdir()
    make_bait(v)
    yield v
    shutil.rmtree(v, ignore_errors=True)


# (where the link is planted under the root, what it points at below the victim)
PLANTED = {
    "step_dir": ("ns/job/step_0000000007", "job/step_0000000001"),
    "namespace_dir": ("ns/evil", "job"),
    "partial_dir": ("ns/job/step_0000000008.partial", "ns/job/step_0000000002.partial"),
    "trash": ("trash", "trash"),
    "pool": ("pool", "pool"),
    "lock_file": ("agent.lock", "agent.lock"),
}


@pytest.mark.parametrize("variant", sorted(PLANTED))
def test_link_planted_under_root_does_not_delete_files_outside_it(agents, victim, tmp_path, variant):
    rel, target_rel = PLANTED[variant]
    a = agents("--memory-budget", "256MiB")
    ref = tmp_path / "ref"
    a.writer("--ns", "job", "--step", 1, "--objects", 2, "--size", 64 << 10, "--ref-dir", ref)
    a.kill()  # SIGKILL: the next agent recovers the root as it finds it
    link = a.root / rel
    if link.is_dir() and not link.is_symlink():
        shutil.rmtree(link)
    elif link.exists() or link.is_symlink():
        link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim / target_rel)
    before = snapshot(victim)

    a.start()
    assert snapshot(victim) == before, f"the agent changed files outside its root through {rel}"
    assert not link.is_symlink(), f"{link} is still a link"
    assert "symbolic link (to " + str(victim / target_rel) + ")" in a.log_text()
    # The rest of recovery went on: the committed step is intact and served.
    out = tmp_path / "out"
    a.cli("restore", "job", 1, "--to", out)
    assert_dirs_equal(ref, out)
    a.writer("--ns", "job", "--step", 2, "--objects", 2, "--size", 64 << 10)
    assert snapshot(victim) == before


# ---- The root itself, planted by another (unprivileged) user ----

@pytest.fixture
def foe():
    """(uid, gid) of an unprivileged user that plants things; created if missing."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the case is a root agent and a second, unprivileged uid (created with useradd)")
    try:
        pw = pwd.getpwnam(FOE)
    except KeyError:
        r = subprocess.run(["useradd", "-M", "-r", "-s", "/usr/sbin/nologin", FOE], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot create the unprivileged user {FOE}: useradd: {r.stderr.strip()}")
        pw = pwd.getpwnam(FOE)
    return pw.pw_uid, pw.pw_gid


def as_foe(foe, *cmd):
    uid, gid = foe
    subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *map(str, cmd)],
                   check=True, capture_output=True, text=True, timeout=30)


@pytest.fixture(params=["sticky_shared_dir", "foe_owned_dir"])
def shared_dir(request, foe):
    """Where the root agent is told to put its root and the foe can write: a
    world-writable sticky directory like /dev/shm, or a directory of the foe's."""
    d = SHM / f"tc-shared-{uuid.uuid4().hex[:12]}"
    d.mkdir()
    if request.param == "sticky_shared_dir":
        d.chmod(0o1777)
    else:
        os.chown(d, *foe)
        d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def start_refused_agent(agents, root: Path):
    """Starts an agent expected to refuse its root; returns (exit code, or None
    if it was still running after 10 s and was killed, log text)."""
    a = agents("--memory-budget", "64MiB", root=root, start=False)
    a.start(wait=False)
    try:
        rc = a.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        a.kill()
        rc = None
    return rc, a.log_text()


def test_symlinked_root_planted_by_another_user_is_refused(agents, foe, shared_dir, victim):
    root = shared_dir / "tierckpt-0"
    as_foe(foe, "ln", "-s", victim, root)
    before = snapshot(victim)
    rc, log = start_refused_agent(agents, root)
    assert snapshot(victim) == before, "the agent chmod'ed, cleaned or wrote into the link's target"
    assert stat.S_IMODE(os.stat(victim).st_mode) == 0o755
    assert rc == 2, log
    assert f"--root {root} is a symbolic link (to {victim}, the link owned by uid {foe[0]} ({FOE}))" in log, log
    assert f"rm {root}" in log, log


def test_root_owned_by_another_user_is_refused(agents, foe, shared_dir):
    root = shared_dir / "tierckpt-0"
    as_foe(foe, "mkdir", "-m", "0777", root)
    as_foe(foe, "mkdir", "-p", root / "trash" / "3")
    as_foe(foe, "sh", "-c", f"echo mine > {root}/trash/3/a")
    before = snapshot(root)
    rc, log = start_refused_agent(agents, root)
    assert snapshot(root) == before
    assert rc == 2, log
    assert f"--root {root} belongs to uid {foe[0]} ({FOE}), not to uid 0" in log, log
    assert "choose another --root" in log, log
