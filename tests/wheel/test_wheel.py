"""The wheel of scripts/wheel.sh, installed as a user installs it: into a new
venv outside the repository, with torch of the supported range and numpy, and
the wheel with --no-deps (nothing compiled, no -dev package used).

Checks that the wheel's executables and extension find every library they
need inside the install (tierckpt.libs/) or among the few system libraries
every manylinux host has, then runs two ranks through DCP with the agent the
wheel ships, started by the embedded default, and stops it with the wheel's
`tierckpt` console script. Nothing is skipped: a missing wheel, torch or
library fails the test.

    scripts/wheel.sh && python -m pytest -q tests/wheel        (scripts/test.sh, phase "wheel")

$TIERCKPT_WHEEL names another wheel; $TIERCKPT_WHEEL_TORCH another torch
requirement (default torch==2.13.0, on this machine's disk);
$TIERCKPT_WHEEL_PYTHON the interpreter that makes the venv (default: the one
this test's venv was made from, the Python the wheel was built for). With
Debian 12's /usr/bin/python3 (3.11.2), which pickles Enum members as
builtins.getattr(cls, name), the load works since the metadata unpickler allows
getattr for a member of an allowed Enum (_safe_unpickle.py).

The venv's torch and numpy come from the venv cache (scripts/venv_cache.sh, as
the project's own venvs do): a hard-linked copy of a venv where pip installed
them once per machine (32 s of this test's 46 s before); the wheel is installed
into it with pip as a user does. TIERCKPT_VENV_CACHE=off installs them anew.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TORCH = os.environ.get("TIERCKPT_WHEEL_TORCH", "torch==2.13.0")
BASE_PYTHON = os.environ.get("TIERCKPT_WHEEL_PYTHON") or getattr(sys, "_base_executable", sys.executable)
# The system libraries a manylinux wheel may link without bundling them (auditwheel's
# manylinux policy list, the ones these binaries use) and the loader itself.
SYSTEM_LIBS = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libz.so.1", "libresolv.so.2",
               "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2", "linux-vdso.so.1"}


def _wheel() -> Path:
    if os.environ.get("TIERCKPT_WHEEL"):
        return Path(os.environ["TIERCKPT_WHEEL"])
    found = glob.glob(str(REPO / "dist" / "tierckpt-*-manylinux_*.whl"))
    assert len(found) == 1, f"expected one manylinux wheel in {REPO / 'dist'} (run scripts/wheel.sh), found {found}"
    return Path(found[0])


def _clean_env(venv: Path) -> dict:
    """This environment without anything that would let the venv see the repository or its build."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TIERCKPT_") and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
                                                          "LD_PRELOAD", "PYTHONSTARTUP")}
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"
    return env


def _run(cmd, env, timeout=300, cwd=None) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


class Install:
    def __init__(self, venv: Path, env: dict, site: Path, report: list[str]):
        self.venv, self.env, self.site, self.report = venv, env, site, report
        self.python = venv / "bin" / "python"


@pytest.fixture(scope="module")
def install(request):
    wheel = _wheel()
    assert re.search(r"-manylinux_\d+_\d+_x86_64\.whl$", wheel.name), f"{wheel.name} has no manylinux tag"
    top = Path(tempfile.mkdtemp(prefix="tierckpt-wheel-test-"))  # outside the repository
    assert not top.resolve().is_relative_to(REPO)
    venv = top / "venv"
    report = []
    try:
        t0 = time.monotonic()
        # A venv holding torch and numpy, from the venv cache (or installed, with TIERCKPT_VENV_CACHE=off).
        _run(["bash", "-c", 'source "$0/scripts/venv_cache.sh" && venv_from_cache "$1" wheel-test "$2 numpy" "$3" -- "$2" numpy',
              REPO, venv, TORCH, BASE_PYTHON], dict(os.environ), timeout=600, cwd=top)
        env = _clean_env(venv)
        t1 = time.monotonic()
        _run([venv / "bin" / "python", "-c", "import torch, numpy"], env, cwd=top)  # the copy imports them
        t2 = time.monotonic()
        _run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", wheel], env, cwd=top)
        t3 = time.monotonic()
        site = Path(_run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
                         env, cwd=top).stdout.strip())
        report.append(f"wheel {wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB; into a new venv: venv "
                      f"with {TORCH} + numpy (venv cache) {t1 - t0:.1f} s, their import {t2 - t1:.1f} s, the wheel (--no-deps) "
                      f"{t3 - t2:.1f} s")
        yield Install(venv, env, site, report)
    finally:
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled():
            for line in report:
                print(f"[wheel] {line}", flush=True)
        shutil.rmtree(top, ignore_errors=True)


def _elf_files(site: Path) -> list[Path]:
    files = [p for p in (site / "tierckpt").rglob("*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"]
    files += sorted((site / "tierckpt.libs").iterdir())
    return files


def test_the_wheel_installs_the_package_its_executables_and_console_scripts(install):
    site = install.site
    for name in ("tierckpt", "tierckptd"):
        assert os.access(site / "tierckpt" / "_bin" / name, os.X_OK), f"the wheel installed no {name} executable"
    code = ("import json, tierckpt, tierckpt._tierckpt; from tierckpt import agent;"
            "print(json.dumps([tierckpt.__file__, agent.find_binary('tierckpt'), agent.find_binary('tierckptd')]))")
    mod, cli, daemon = json.loads(_run([install.python, "-c", code], install.env, cwd=install.venv).stdout)
    assert mod == str(site / "tierckpt" / "__init__.py")
    assert (cli, daemon) == (str(site / "tierckpt" / "_bin" / "tierckpt"), str(site / "tierckpt" / "_bin" / "tierckptd"))
    # The console scripts on the venv's PATH exec them.
    assert "tierckpt" in _run([install.venv / "bin" / "tierckpt", "--help"], install.env).stdout
    assert "tierckptd" in _run([install.venv / "bin" / "tierckptd", "--help"], install.env).stdout


def test_every_library_resolves_inside_the_wheel_or_is_a_manylinux_system_library(install):
    libs_dir = install.site / "tierckpt.libs"
    files = _elf_files(install.site)
    names = {p.name for p in files}
    assert {"tierckpt", "tierckptd"} <= names and any(n.startswith("_tierckpt.") for n in names)
    assert any(n.startswith("libcurl-") for n in names), "libcurl is not bundled"
    bundled_used = set()
    for f in files:
        ldd = _run(["ldd", f], install.env).stdout
        for line in ldd.splitlines():
            line = line.strip()
            assert "not found" not in line, f"{f.name}: {line}"
            soname = line.split()[0]
            path = line.split("=>")[1].split("(")[0].strip() if "=>" in line else soname
            if Path(os.path.normpath(path)).parent == libs_dir:
                bundled_used.add(Path(path).name)
            else:
                assert Path(soname).name in SYSTEM_LIBS, \
                    f"{f.relative_to(install.site)} loads {soname} from {path}, outside the wheel"
        # rpaths point only inside the install ($ORIGIN/...), never at the build machine.
        dyn = _run(["readelf", "-d", f], install.env).stdout
        for entry in re.findall(r"\((?:RPATH|RUNPATH)\)\s+Library r(?:un)?path: \[(.*)\]", dyn):
            assert all(p.startswith("$ORIGIN") for p in entry.split(":")), f"{f.name} has rpath {entry}"
    assert bundled_used == {p.name for p in libs_dir.iterdir()}, "the wheel bundles a library nothing loads"
    install.report.append(f"{len(bundled_used)} bundled libraries, all resolved from {libs_dir.name}/")


def _agent_pids(root: str) -> list[int]:
    """Live tierckptd processes whose command line names root (the agents this test started)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0") if proc.name.isdigit() else []
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"tierckptd") and root.encode() in cmd and _alive(int(proc.name)):
            pids.append(int(proc.name))
    return pids


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def test_two_ranks_async_save_and_load_through_the_agent_the_wheel_ships(install):
    work = install.venv.parent / "two_ranks"
    work.mkdir()
    root = f"/dev/shm/tierckpt-wheel-{uuid.uuid4().hex[:12]}"
    t0 = time.monotonic()
    try:
        r = subprocess.run([install.python, str(REPO / "tests" / "wheel" / "two_ranks.py"), str(work), root],
                           env=install.env, cwd=work, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=240)
        report = json.loads((work / "report.json").read_text()) if (work / "report.json").exists() else {}
        pid = report.get("agent_pid")
        log = (work / "agent.log").read_text()[-3000:] if (work / "agent.log").exists() else "(no agent log)"
        assert r.returncode == 0, f"two_ranks.py exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}\n{log}"
        assert r.stdout.count("loaded back equal") == 2, r.stdout
        site = install.site
        assert report["tierckpt"] == str(site / "tierckpt" / "__init__.py")
        # The agent the embedded default started is the wheel's, detached, and its libraries are the wheel's.
        daemon = site / "tierckpt" / "_bin" / "tierckptd"
        assert report["tierckptd"] == str(daemon)
        assert os.readlink(f"/proc/{pid}/exe") == str(daemon)
        assert os.getsid(pid) == pid, "the embedded agent is not in its own session"
        maps = {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
                if ".so" in line.split()[-1]}
        assert any(Path(m).name.startswith("libcurl-") and Path(m).parent == site / "tierckpt.libs" for m in maps)
        system = {name.split(".so")[0] for name in SYSTEM_LIBS}  # libstdc++.so.6 is mapped as libstdc++.so.6.0.30
        outside = [m for m in maps if Path(m).parent != site / "tierckpt.libs" and Path(m).name.split(".so")[0] not in system]
        assert not outside, f"the agent mapped libraries from outside the wheel: {outside}"
        step = work / "durable" / "wheel" / "step_0000000001"
        assert sorted(p.name for p in step.iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp",
                                                         "_tierckpt_manifest.json"]
        # The wheel's console script stops it.
        out = _run([install.venv / "bin" / "tierckpt", "--socket", report["socket"], "agent", "stop"], install.env)
        assert f"pid {pid}" in out.stdout
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), f"tierckptd {pid} still runs after `tierckpt agent stop`"
        assert _agent_pids(root) == []
        install.report.append(f"two ranks: {report['tensors_compared']} tensors per rank through async_save and "
                              f"load, agent started by the embedded default, in {time.monotonic() - t0:.1f} s")
    finally:
        for pid in _agent_pids(root):
            os.kill(pid, signal.SIGKILL)  # the agent this test started
        shutil.rmtree(root, ignore_errors=True)
