"""peers_install.py - the peers' own venv (build/peers-venv) for bench/peers.py.

torch==2.13.0 first (the CPU build on this machine's disk, so pip resolves it locally), then each
peer with --no-deps (each pins another torch, whose CUDA wheels are several GB), then what each
needs. tierckpt is not built again: the driver's own tierckpt package (the project's build under
test) is put on the venv's path by a .pth file. Installation is cached: a package whose
distribution is already in the venv is not asked for again. A peer that cannot be installed gets
its exact reason, and the benchmark skips it.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

# peer method -> (distribution pins installed --no-deps, their own requirements, installed normally)
PEERS = {
    "dlrover": (["dlrover==0.6.1"], ["grpcio", "deprecated", "pynvml", "psutil", "packaging", "requests"]),
    "nvrx": (["nvidia-resiliency-ext==0.4.1"], ["defusedxml", "nvidia-ml-py", "pynvml", "pyyaml", "psutil",
                                                 "packaging"]),
    "sagemaker": (["amzn-sagemaker-checkpointing==1.1.3"], ["requests", "xxhash", "tenacity", "boto3", "s3torchconnector",
                                                             "fastapi", "uvicorn"]),
    "gemini": (["lm-resiliency==0.2.0"], []),
    "torch_checkpointing": (["torch-checkpointing==0.1.1"], ["safetensors", "typing_extensions"]),
}
PEERS["sagemaker_tierckpt"] = PEERS["sagemaker"]  # the same library, against tierckptd's HTTP API
# peer method -> the module its adapter imports (bench/peers_methods.py): imported in the venv after the
# install, so that a requirement the list above lacks is named at install time, not as a skip mid-run.
IMPORTS = {
    "dlrover": "dlrover.trainer.torch.flash_checkpoint.ddp",
    "nvrx": "nvidia_resiliency_ext.checkpointing.local.ckpt_managers.local_manager",
    "sagemaker": "amzn_sagemaker_checkpointing.checkpointing.filesystem",
    "sagemaker_tierckpt": "amzn_sagemaker_checkpointing.checkpointing.filesystem",
    "gemini": "lm_resiliency",
}
BASE = ["numpy", "matplotlib"]
SAGEMAKER_SDIST = "amzn-sagemaker-checkpointing==1.1.3"


def _installed(py: str) -> set[str]:
    r = subprocess.run([py, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, timeout=120)
    return {line.split("==")[0].lower().replace("_", "-") for line in r.stdout.splitlines() if "==" in line}


def _pip(py: str, args: list[str], timeout: int = 900) -> str | None:
    """None on success, else the last lines of pip's output (the exact reason)."""
    try:
        r = subprocess.run([py, "-m", "pip", "install", "-q", *args], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"pip install {' '.join(args)} did not finish in {timeout} s"
    if r.returncode == 0:
        return None
    lines = [x for x in (r.stdout + r.stderr).splitlines() if "is ignored" not in x and x.strip()]
    return f"pip install {' '.join(args)} failed: " + " | ".join(lines[-4:])


def _name(pin: str) -> str:
    return re.split(r"[=<>\[]", pin)[0].lower().replace("_", "-")


def link_tierckpt(venv: Path) -> str:
    """Puts this interpreter's tierckpt package on the venv's path (a .pth naming a directory that
    holds only a link to it): the bench measures exactly the build under test, with no second C++
    build. Returns the package directory."""
    import tierckpt

    pkg = Path(tierckpt.__file__).resolve().parent
    holder = venv.resolve() / "tierckpt-link"  # absolute: a .pth line is read relative to site-packages
    holder.mkdir(exist_ok=True)
    link = holder / "tierckpt"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(pkg)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "tierckpt-link.pth").write_text(str(holder) + "\n")
    return str(pkg)


def ensure(venv: Path, peers: list[str], log) -> tuple[str, dict]:
    """Creates / completes the venv. Returns (its python, {peer: reason}) for peers that cannot run."""
    py = str(venv / "bin" / "python")
    skipped: dict[str, str] = {}
    if not Path(py).exists():
        log(f"creating {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    have = _installed(py)
    if "torch" not in have:
        log("installing torch==2.13.0 (the CPU build on disk)")
        why = _pip(py, ["torch==2.13.0"])
        if why:
            raise RuntimeError(f"cannot install torch==2.13.0 into {venv}: {why}")
    missing = [p for p in BASE if _name(p) not in have]
    if missing:
        log(f"installing {' '.join(missing)}")
        why = _pip(py, missing)
        if why:
            log(f"warning: {why} (the plot needs matplotlib)")
    for peer in peers:
        if peer not in PEERS:
            continue
        pins, needs = PEERS[peer]
        have = _installed(py)
        missing = [p for p in pins if _name(p) not in have]
        if missing:
            log(f"installing {' '.join(missing)} --no-deps")
            why = _pip(py, ["--no-deps", *missing])
            if why:
                skipped[peer] = why
                continue
        missing = [p for p in needs if _name(p) not in have]
        if missing:
            log(f"installing {' '.join(missing)} (needed by {peer})")
            why = _pip(py, missing)
            if why:
                skipped[peer] = why
                continue
        why = import_error(py, IMPORTS.get(peer))
        if why:
            skipped[peer] = why
    return py, skipped


def import_error(py: str, module: str | None) -> str | None:
    """None when module imports in the venv, else the error (a fresh venv once lacked DLRover's requests)."""
    if module is None:
        return None
    r = subprocess.run([py, "-c", f"import {module}"], capture_output=True, text=True, timeout=300)
    if r.returncode == 0:
        return None
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    return (f"import {module} failed in the peers venv ({lines[-1] if lines else f'exit {r.returncode}'}); "
            "add the missing requirement to bench/peers_install.py's PEERS")


def sagemaker_sdist(py: str, where: Path) -> Path:
    """The unpacked source distribution of amzn-sagemaker-checkpointing (it ships the HTTP stand-in
    tests/local_tests/membrain_server.py); downloaded once."""
    where.mkdir(parents=True, exist_ok=True)
    tops = [p for p in where.glob("amzn_sagemaker_checkpointing-*") if p.is_dir()]
    if tops:
        return tops[0]
    r = subprocess.run([py, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps", "-d", str(where),
                        SAGEMAKER_SDIST], capture_output=True, text=True, timeout=600)
    tars = list(where.glob("amzn_sagemaker_checkpointing-*.tar.gz"))
    if r.returncode or not tars:
        tail = " | ".join((r.stdout + r.stderr).strip().splitlines()[-3:])
        raise RuntimeError(f"pip download --no-binary :all: {SAGEMAKER_SDIST} failed: {tail}")
    with tarfile.open(tars[0]) as t:
        _extract_data(t, where)
    return next(p for p in where.glob("amzn_sagemaker_checkpointing-*") if p.is_dir())


def _extract_data(t: tarfile.TarFile, where: Path) -> None:
    """Extracts t into where, refusing what tarfile's "data" filter refuses: a member or a link that
    would land outside where, and devices. Pythons before 3.11.4 (Debian 12's 3.11.2) have no filters."""
    if hasattr(tarfile, "data_filter"):
        t.extractall(where, filter="data")
        return
    base = where.resolve()
    for m in t.getmembers():
        target = (base / m.name).resolve()
        inside = target == base or target.is_relative_to(base)
        if m.issym() or m.islnk():
            link = (target.parent / m.linkname if m.issym() else base / m.linkname).resolve()
            inside = inside and link.is_relative_to(base)
        if not inside or m.isdev():
            raise RuntimeError(f"refusing to extract {m.name!r} from {t.name}: it is a device or would land "
                               f"outside {base}; the source distribution is not what pip should have fetched")
    t.extractall(where)


def mlflashpoint_reason(py: str) -> str | None:
    """None when ML Flashpoint imports in the venv, else why it cannot be built from the registries.

    Its source distribution's CMake FetchContent pulls abseil and googletest from GitHub (not
    reachable here); abseil would have to come from Debian, and it must have the absl::log target
    (abseil >= 20230125). Debian 12's libabsl-dev is 20220623."""
    r = subprocess.run([py, "-c", "import ml_flashpoint"], capture_output=True, text=True)
    if r.returncode == 0:
        return ("ml_flashpoint is installed, but this benchmark has no adapter for it yet "
                "(MemoryStorageWriter + ReplicationManager CPU work-arounds, see shared notes)")

    def version(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""
    installed = version(["dpkg-query", "-W", "-f", "${Version}", "libabsl-dev"]).strip()
    candidate = ""
    m = re.search(r"Candidate:\s*(\S+)", version(["apt-cache", "policy", "libabsl-dev"]))
    if m:
        candidate = m.group(1)
    have = installed or candidate
    debian = Path("/etc/debian_version").read_text().strip() if Path("/etc/debian_version").exists() else "?"
    if have and have[:8].isdigit() and int(have[:8]) >= 20230125:
        return (f"ml-flashpoint==0.0.10 is not built by this benchmark (libabsl-dev {have} has absl::log, so a "
                "build may work: pip install --no-build-isolation ml-flashpoint with FETCHCONTENT_TRY_FIND_PACKAGE_"
                "MODE=ALWAYS and BUILD_TESTING=OFF, then rerun)")
    return (f"ml-flashpoint==0.0.10 cannot be built from the registries here: its CMake FetchContent fetches "
            f"abseil and googletest from GitHub (not reachable), and Debian {debian}'s libabsl-dev "
            f"({have or 'not available'}) predates absl::log (abseil 20230125), which ML Flashpoint links")


def agent_binaries() -> dict:
    """TIERCKPT_AGENT_BIN / TIERCKPT_CLI of this interpreter's tierckpt, for the venv's ranks."""
    from tierckpt import agent as tc_agent

    return {"TIERCKPT_AGENT_BIN": tc_agent.find_binary("tierckptd"), "TIERCKPT_CLI": tc_agent.find_binary("tierckpt")}


if __name__ == "__main__":  # python bench/peers_install.py: installs every peer, prints the skips
    env_py, why = ensure(Path(os.environ.get("PEERS_VENV", "build/peers-venv")), list(PEERS), print)
    print(env_py, why)
