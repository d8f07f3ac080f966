"""docs/concepts/dependencies.md#outputs-on-edges: each dependent keeps its parents, one per
edge in the order given, and holds (pins) their outputs until it ends (its last start is
only known then); an ended dependent keeps its parents' ids, in edge order."""

from __future__ import annotations

from cronoq.engine.model import ON_COMPLETE, ON_FAILURE, ON_SUCCESS, OUTPUT_LOST, RetryPolicy, TaskOptions
from cronoq.engine.parents import outcomes


def sub(d, key=None, deps=None):
    tid, _ = d.core.submit(d.now, TaskOptions(), None, key, None, None, deps)
    d.collect()
    return tid


def test_parents_in_edge_order_with_status_and_output(make, mkpool):
    d = make([mkpool(cap=3)])
    a, b = sub(d, "a"), sub(d, "b")
    c = sub(d, deps=[(b, ON_COMPLETE), ("a", ON_SUCCESS), ("b", ON_FAILURE)])
    assert d.tick() == [a, b]
    d.complete(a, {"x": 1})
    d.fail(b, "nope", permanent=True)
    assert d.tick() == [c]
    seen = outcomes(d.core, d.task(c))
    assert seen == [
        (b, "b", "failed", None, "nope"),
        (a, "a", "succeeded", {"x": 1}, None),
        (b, "b", "failed", None, "nope"),
    ]


def test_outputs_stay_pinned_past_retention_and_output_caps(make, mkpool):
    d = make([mkpool(cap=1)], retention=0, retention_max=0)
    a = sub(d, "a")
    other = sub(d)  # keeps the single slot busy so the child waits after its parent ended
    b = sub(d, deps=[("a", ON_SUCCESS)])
    assert d.tick() == [a]
    out = object()
    d.complete(a, out)
    d.core.prune(d.now)
    assert d.core.lookup(d.now, a) is None  # forgotten by retention ...
    parent = d.task(b).parents[0]
    assert d.core.forget_output(a, out) is False  # ... and refused by the output cap
    assert d.core.pinned == {a: 1}
    assert d.tick() == [other]
    d.complete(other)
    assert d.tick() == [b]
    assert outcomes(d.core, d.task(b))[0][3] is out
    d.complete(b)
    assert d.core.pinned == {}  # released once the dependent ended
    assert parent.output is out and parent.output is not OUTPUT_LOST


def test_awaited_key_binds_its_provider(make, mkpool):
    d = make([mkpool(cap=2, unknown_dependency="await")])
    c = sub(d, deps=[("later", ON_SUCCESS)])
    assert outcomes(d.core, d.task(c)) == [
        (0, "later", "unknown", None, "the parent's record is no longer available")
    ]
    p = sub(d, "later")
    assert d.core.pinned == {p: 1}
    assert d.tick() == [p]
    d.complete(p, 7)
    assert d.tick() == [c]
    assert outcomes(d.core, d.task(c)) == [(p, "later", "succeeded", 7, None)]


def test_batch_members_and_skips_release_their_pins(make, mkpool):
    d = make([mkpool(cap=2)])
    items = [
        (TaskOptions(), None, "p", None, None, None),
        (TaskOptions(), None, "c", None, None, [("p", ON_SUCCESS)]),
    ]
    (p, _), (c, _) = d.core.submit_batch(d.now, items)
    d.collect()
    assert d.core.pinned == {p: 1}
    assert d.tick() == [p]
    d.fail(p, "bad", permanent=True)
    assert d.status(c) == "skipped"
    assert d.core.pinned == {} and d.task(c).parents == (p,)
    assert outcomes(d.core, d.task(c)) == [(p, "p", "failed", None, "bad")]


def test_a_retried_dependent_keeps_its_pin_until_it_ends(make, mkpool):
    retry = RetryPolicy(max_attempts=2, initial_backoff=1.0, jitter=False)
    d = make([mkpool(cap=1, retry=retry)], retention=0, retention_max=0)
    a = sub(d, "a")
    b = sub(d, deps=[("a", ON_SUCCESS)])
    assert d.tick() == [a]
    out = object()
    d.complete(a, out)
    d.core.prune(d.now)
    assert d.tick() == [b]
    d.fail(b, "flaky")  # its first start was not its last: the output stays pinned
    assert d.core.pinned == {a: 1} and d.core.forget_output(a, out) is False
    d.advance(2)
    assert d.tick() == [b]
    child = d.task(b)
    assert outcomes(d.core, child)[0][3] is out  # the retry sees the same output
    d.complete(b)
    assert d.core.pinned == {}
    assert child.parents == (a,)  # (ids: nothing held)
    # the parent was forgotten by retention: the ended dependent still names it, as unknown
    assert outcomes(d.core, child) == [
        (a, None, "unknown", None, "the parent's record is no longer available")
    ]
