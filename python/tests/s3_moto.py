"""The integration tests' moto S3 server (tests/integration/s3_server.py), for the Python package tests.

Loaded by file, not through sys.path: tests/integration has a conftest.py of its own that would shadow
ours in the ranks' processes. ``from s3_moto import s3_server``.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "tests" / "integration" / "s3_server.py"


def _load():
    if "s3_server" in sys.modules:
        return sys.modules["s3_server"]
    spec = importlib.util.spec_from_file_location("s3_server", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["s3_server"] = module
    spec.loader.exec_module(module)
    return module


s3_server = _load()
