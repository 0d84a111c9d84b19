"""Cross-release loads: a step saved under one torch release loads under another.

Each direction runs in real processes (cross_release_worker.py), one per release, against real
agents: the saver's interpreter writes steps through dcp.save, dcp.async_save and the Checkpointer,
persisted; the loader's interpreter loads them through the same agent (memory tier), through a
fresh agent on the same durable base (restored from it), and with stock DCP's FileSystemReader
from the durable directory.

The other releases' interpreters come from TIERCKPT_TORCH_PYTHONS (paths to python executables,
separated by ':', each with tierckpt installed and another torch of the supported range).
scripts/torch_matrix.sh sets it; without it these tests are skipped.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from strict import NOT_APPLICABLE  # noqa: E402  (tests/harness, on the path from conftest)

WORKER = Path(__file__).with_name("cross_release_worker.py")


def _run(python: str, command: str, args: dict, timeout: float = 300) -> dict:
    r = subprocess.run([python, str(WORKER), command, json.dumps(args)], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL, cwd=WORKER.parent)
    assert r.returncode == 0, f"{python} {command} failed ({r.returncode}):\n{r.stdout}\n{r.stderr[-6000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _release(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


@pytest.fixture(scope="module")
def other_releases() -> list[tuple[str, str]]:
    """(python, torch version) of each interpreter of TIERCKPT_TORCH_PYTHONS whose release differs from ours."""
    listed = [p for p in os.environ.get("TIERCKPT_TORCH_PYTHONS", "").split(os.pathsep) if p]
    if not listed:
        pytest.skip(f"{NOT_APPLICABLE}no other torch release to load with: set TIERCKPT_TORCH_PYTHONS (scripts/torch_matrix.sh does)")
    found = []
    for python in listed:
        r = subprocess.run([python, "-c", "import torch, tierckpt.torch; print(torch.__version__)"],
                           capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, f"{python} cannot import tierckpt.torch:\n{r.stderr[-3000:]}"
        version = r.stdout.strip().splitlines()[-1]
        if _release(version) != _release(torch.__version__):
            found.append((python, version))
    if not found:
        pytest.skip(f"{NOT_APPLICABLE}TIERCKPT_TORCH_PYTHONS has no release other than {torch.__version__}")
    return found


@pytest.mark.parametrize("direction", ["saved_here", "saved_there"])
def test_steps_load_across_releases(direction, other_releases, agents):
    for i, (python, version) in enumerate(other_releases):
        saver, loader = (sys.executable, python) if direction == "saved_here" else (python, sys.executable)
        first = agents()
        ns = f"xrel-{direction.replace('_', '-')}-{i}"
        expected = str(first.workdir / f"{ns}-expected.pt")
        saved = _run(saver, "save", {"socket": first.socket, "durable": str(first.durable), "ns": ns, "step": 10,
                                     "seed": 70 + i, "expected": expected})
        restorer = agents(durable=str(first.durable))  # memory empty: restores the steps from the durable base
        loaded = _run(loader, "load", {"sockets": [first.socket, restorer.socket], "durable": str(first.durable),
                                       "ns": ns, "step": 10, "expected": expected})
        assert _release(saved["torch"]) != _release(loaded["torch"]), (saved, loaded)
        assert len(loaded["checked"]) == 2 * 4 + 3, loaded
        print(f"torch {saved['torch']} saved steps 10-12, torch {loaded['torch']} loaded them: "
              f"{', '.join(loaded['checked'])}")
