"""Strict runs: a test that skips because something is missing fails instead (decision 97).

scripts/test.sh (the README's test command, so CI) exports TIERCKPT_STRICT=1. In a strict run a
skipped test is reported as failed unless its reason starts with NOT_APPLICABLE: a test that pins
another torch release, an opt-in campaign, a comparison that needs a second release. So a run that
could not install a reference package, lacks root, a Debian tool or a PyPI package, fails, naming
what was missing, where a developer's run on a laptop would only skip it.

Both conftests (python/tests, tests/integration) import ``pytest_runtest_makereport`` from here.
"""
from __future__ import annotations

import os

import pytest

STRICT_ENV = "TIERCKPT_STRICT"
NOT_APPLICABLE = "does not apply: "


def strict() -> bool:
    return os.environ.get(STRICT_ENV) == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not strict() or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if reason.startswith("Skipped: "):
        reason = reason[len("Skipped: "):]
    if reason.startswith(NOT_APPLICABLE):
        return
    report.outcome = "failed"
    report.longrepr = (f"{item.nodeid} skipped in a strict run ({STRICT_ENV}=1, set by scripts/test.sh): {reason}\n"
                       f"Install what it names (scripts/setup.sh installs the project's Debian and PyPI "
                       f"packages) or run as the user it needs; a skip that is expected in every run says "
                       f"'{NOT_APPLICABLE}...' (tests/harness/strict.py).")
