"""The REAL amzn-sagemaker-checkpointing 1.1.3, for the tests that run it (never torch).

``ref_site()``: the reference and what it needs beyond the project's environment (xxhash, tenacity,
s3torchconnector), installed once with ``pip install --no-deps --target`` into
``$TIERCKPT_SAGEMAKER_REF_SITE`` (default ``build/sagemaker-ref-site``); an existing install is reused.
``ref_sdist()``: its unpacked source distribution (its own tests/local_tests), downloaded once into
``build/sagemaker-ref-src`` with bench/peers_install.py's ``sagemaker_sdist``. Without PyPI both skip
the calling test with pip's error.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REF_PACKAGES = ["amzn-sagemaker-checkpointing==1.1.3", "xxhash==4.1.0", "tenacity==9.2.1",
                "s3torchconnector==1.5.0", "s3torchconnectorclient==1.5.0"]


def ref_site() -> Path:
    site = Path(os.environ.get("TIERCKPT_SAGEMAKER_REF_SITE", REPO / "build" / "sagemaker-ref-site"))
    stamp = site / ".tierckpt-installed"
    if stamp.exists() and stamp.read_text() == "\n".join(REF_PACKAGES):
        return site
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade", "--retries", "1",
                        "--timeout", "20", "--target", str(site), *REF_PACKAGES],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        pytest.skip(f"cannot install the reference ({' '.join(REF_PACKAGES)}) into {site}: pip said: "
                    f"{(r.stderr or r.stdout).strip()[-500:]}")
    stamp.write_text("\n".join(REF_PACKAGES))
    return site


def ref_sdist() -> Path:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import peers_install
    finally:
        sys.path.pop(0)
    try:
        return peers_install.sagemaker_sdist(sys.executable, REPO / "build" / "sagemaker-ref-src")
    except RuntimeError as e:
        pytest.skip(str(e))
