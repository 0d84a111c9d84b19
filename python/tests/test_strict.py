"""tests/harness/strict.py: in a strict run (TIERCKPT_STRICT=1, what scripts/test.sh and CI set) a
test that skips for something missing fails, naming it; a skip marked "does not apply: " stays a skip."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

HARNESS = Path(__file__).resolve().parents[2] / "tests" / "harness"


@pytest.fixture
def suite(pytester):
    pytester.makeconftest(f"""
        import sys
        sys.path.insert(0, {str(HARNESS)!r})
        from strict import pytest_runtest_makereport  # noqa: F401
    """)
    pytester.makepyfile(test_some="""
        import pytest
        from strict import NOT_APPLICABLE

        def test_missing_package():
            pytest.importorskip("tierckpt_no_such_package", reason="a PyPI package the test needs")

        def test_pinned_elsewhere():
            pytest.skip(f"{NOT_APPLICABLE}pins another torch release")

        @pytest.mark.skipif(True, reason="needs root")
        def test_marked():
            pass

        @pytest.mark.xfail(reason="known", strict=False)
        def test_expected_failure():
            assert False

        def test_passes():
            pass
    """)
    return pytester


def test_a_strict_run_fails_the_skips_that_name_something_missing(suite, monkeypatch):
    monkeypatch.setenv("TIERCKPT_STRICT", "1")
    r = suite.runpytest_subprocess("-rA")
    # a skipif marker skips in setup, so its test is reported as an error: red all the same
    r.assert_outcomes(passed=1, failed=1, errors=1, skipped=1, xfailed=1)
    text = r.stdout.str()
    assert "test_missing_package skipped in a strict run (TIERCKPT_STRICT=1" in text, text
    assert "a PyPI package the test needs" in text and "needs root" in text, text


def test_other_runs_skip_them(suite, monkeypatch):
    monkeypatch.delenv("TIERCKPT_STRICT", raising=False)
    suite.runpytest_subprocess().assert_outcomes(passed=1, skipped=3, xfailed=1)
