"""The deployment files under deploy/ (docs/deploy.md): each checked by its own tool
(systemd-analyze verify, kubernetes-validate against the Kubernetes schemas,
bash -n), each shown to catch a broken copy, and every tierckptd flag they use
checked against the real binary's --help."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import AGENT_BIN

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNIT = DEPLOY / "systemd" / "tierckptd.service"
DAEMONSET = DEPLOY / "kubernetes" / "daemonset.yaml"
SBATCH = DEPLOY / "slurm" / "tierckpt-train.sbatch"


def tool(name: str) -> str:
    path = shutil.which(name) or (str(Path(sys.executable).parent / name)
                                  if (Path(sys.executable).parent / name).exists() else None)
    if path is None:
        pytest.fail(f"{name} is not installed: run scripts/setup.sh", pytrace=False)
    return path


def verify_unit(text: str, tmp_path: Path) -> subprocess.CompletedProcess:
    # The unit names the installed binary and the service user; verify against this machine's.
    text = text.replace("/usr/local/bin/tierckptd", str(AGENT_BIN)).replace("User=trainer", "User=root")
    unit = tmp_path / "tierckptd.service"
    unit.write_text(text)
    return subprocess.run([tool("systemd-analyze"), "verify", str(unit)], capture_output=True, text=True)


def test_the_systemd_unit_verifies_and_a_broken_one_does_not(tmp_path):
    ok = verify_unit(UNIT.read_text(), tmp_path)
    assert ok.returncode == 0 and "tierckptd.service" not in ok.stderr, ok.stdout + ok.stderr
    bad = verify_unit(UNIT.read_text().replace("Restart=on-failure", "Restart=sometimes"), tmp_path)
    assert "restart specifier" in bad.stderr, bad.stdout + bad.stderr


def test_the_kubernetes_manifests_validate_strictly_and_a_broken_one_does_not(tmp_path):
    validate = tool("kubernetes-validate")
    ok = subprocess.run([validate, "--strict", str(DAEMONSET)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.count("passed") == 4, ok.stdout
    broken = tmp_path / "daemonset.yaml"
    broken.write_text(DAEMONSET.read_text().replace("readinessProbe:", "readynessProbe:"))
    bad = subprocess.run([validate, "--strict", str(broken)], capture_output=True, text=True)
    assert bad.returncode != 0, bad.stdout + bad.stderr


def test_the_slurm_script_parses_and_every_flag_is_one_tierckptd_has(tmp_path):
    subprocess.run(["bash", "-n", str(SBATCH)], check=True)
    help_text = subprocess.run([str(AGENT_BIN), "--help"], capture_output=True, text=True).stdout
    known = set(re.findall(r"(--[a-z][a-z0-9-]+)", help_text))
    assert "--metrics-listen" in known and "--peers" in known
    used = set()
    for f in (UNIT, DAEMONSET, SBATCH):
        for line in f.read_text().splitlines():
            if "tierckptd" in line or line.strip().startswith("- --") or line.strip().startswith("--"):
                used |= set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+)", line))
    used -= {"--nodes", "--ntasks-per-node", "--overlap", "--kill-on-bad-exit", "--nnodes", "--nproc-per-node",
             "--rdzv-backend", "--rdzv-endpoint", "--namespace", "--now"}
    assert used and used <= known, f"flags the deployment files use but tierckptd lacks: {sorted(used - known)}"
