"""What TieredWriter checks after a commit spanning nodes (decision 103): the answer is the
coordinator's part and the sums of every part, so the writer compares the count and the name digest
with the files its metadata references. A step on one node is checked by the agent before it is
visible (expected_objects, decision 118; test_policy.py)."""
from __future__ import annotations

from types import SimpleNamespace

from tierckpt import _tierckpt
import pytest

from tierckpt.torch._steps import missing_in_span


def _manifest(own: list[str], span_names: list[str] | None = None):
    span = None
    if span_names is not None:
        span = SimpleNamespace(parts=3, objects=len(span_names), bytes=0,
                               names_digest=_tierckpt.names_digest(span_names))
    return SimpleNamespace(objects=[SimpleNamespace(name=n) for n in own], span=span)


def test_a_step_on_one_node_is_the_agents_to_check():
    with pytest.raises(ValueError, match="checked by the agent"):
        missing_in_span(_manifest([".metadata", "a"]), {".metadata", "a", "b"})


def test_a_spanning_commit_is_checked_by_count_and_name_digest():
    expected = {".metadata", "__0_0.distcp", "__1_0.distcp", "__2_0.distcp"}
    own = [".metadata", "__0_0.distcp"]  # the coordinator's part only
    assert missing_in_span(_manifest(own, sorted(expected, reverse=True)), expected) is None
    # One fewer: missing.
    short = missing_in_span(_manifest(own, sorted(expected)[:-1]), expected)
    assert short is not None and "1 of the 4 objects" in short
    # As many, but one of another name: the digests differ.
    other = missing_in_span(_manifest(own, sorted(expected)[:-1] + ["__9_9.distcp"]), expected)
    assert other is not None and "other names" in other
    # More (sealed leftovers of an earlier attempt): accepted.
    assert missing_in_span(_manifest(own, sorted(expected) + ["__old.distcp"]), expected) is None


def test_the_digest_is_the_agents_and_ignores_order():
    assert _tierckpt.names_digest(["a", "b"]) == _tierckpt.names_digest(["b", "a"])
    assert _tierckpt.names_digest(["a", "b"]).startswith("sum64:")
    assert _tierckpt.names_digest(["a", "b"]) != _tierckpt.names_digest(["a", "c"])
