"""The executables the package ships, and the console scripts that run them.

``pip install`` / ``pip wheel`` put ``tierckptd`` (the node agent) and
``tierckpt`` (the CLI) in this directory (CMakeLists.txt, decision 82): the
package finds them next to itself however it was installed (a venv, ``--user``,
``--target``), and ``auditwheel repair`` points them at the libraries the wheel
bundles (``tierckpt.libs/``) like any other file of the package. The console
scripts of the same names (pyproject.toml, ``[project.scripts]``) put them on
the environment's PATH: each execs its executable with the same arguments.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["BIN_DIR", "path_of", "tierckpt", "tierckptd"]

BIN_DIR = Path(__file__).resolve().parent


def path_of(name: str) -> Path | None:
    """This package's executable `name` (``tierckpt`` or ``tierckptd``); None if it is not installed here."""
    path = BIN_DIR / name
    return path if path.is_file() and os.access(path, os.X_OK) else None


def _exec(name: str) -> None:
    path = path_of(name)
    if path is None:
        sys.exit(f"{name}: {BIN_DIR / name} is missing or not executable: reinstall the tierckpt package")
    os.execv(path, [str(path), *sys.argv[1:]])


def tierckpt() -> None:
    """The ``tierckpt`` console script: the CLI."""
    _exec("tierckpt")


def tierckptd() -> None:
    """The ``tierckptd`` console script: the node agent."""
    _exec("tierckptd")
