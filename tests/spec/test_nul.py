"""A NUL character (U+0000) in a name or key a store keeps as text is refused by the validators
of every edge, naming the field (docs/reference/behaviour.md#task-fields): PostgreSQL's text
cannot hold one, and one such write would fail its whole group commit."""

from __future__ import annotations

import re
from typing import Any

import pytest

from cronoq import Pool
from cronoq.engine.model import Dep
from cronoq.engine.parking import check_signal_name
from cronoq.engine.resources import ResourceConfig
from cronoq.errors import InvalidSubmission
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.spec.submission import Submission
from cronoq.spec.validate import check_key, check_string, make_options

NUL = "a\x00b"


def message(what: str) -> str:
    return f"{what} must not contain a NUL character (U+0000)"


def refused(what: str) -> str:
    return re.escape(message(what))


@pytest.mark.parametrize("field", ["key", "kind", "pool", "tenant"])
def test_from_kwargs_refuses_a_nul(field: str) -> None:
    with pytest.raises(InvalidSubmission) as ei:
        Submission.from_kwargs(b"x", **{field: NUL})
    assert (ei.value.code, ei.value.message) == ("invalid", message(field))


@pytest.mark.parametrize("field", ["kind", "pool", "tenant"])
def test_make_options_refuses_a_nul(field: str) -> None:
    with pytest.raises(InvalidSubmission, match=f"^{refused(field)}"):
        make_options(**{field: NUL})


def test_the_single_validators() -> None:
    with pytest.raises(InvalidSubmission, match=refused("key")):
        check_key("\x00")
    with pytest.raises(InvalidSubmission, match=refused("pool")):
        check_string("pool", "p\x00")
    assert check_key("k\x01") == "k\x01"  # (only NUL: other control characters are text)


def test_dependency_keys_and_resource_names() -> None:
    with pytest.raises(InvalidSubmission, match=refused("dependency key")):
        Submission.from_kwargs(b"x", after=["ok", NUL])
    with pytest.raises(InvalidSubmission, match=refused("dependency target")):
        Dep(NUL)
    with pytest.raises(InvalidSubmission, match=refused("resource name")):
        Submission.from_kwargs(b"x", resources={NUL: 1})
    with pytest.raises(InvalidSubmission, match=refused("resource name")):
        make_options(resources={"db": 1, NUL: 1})


@pytest.mark.parametrize("field", ["key", "kind", "pool", "tenant"])
def test_from_wire_refuses_a_nul(field: str) -> None:
    spec = pb.TaskSpec(**{field: NUL})  # type: ignore[arg-type]
    with pytest.raises(InvalidSubmission) as ei:
        Submission.from_wire(spec)
    assert (ei.value.code, ei.value.message) == ("invalid", message(field))


def test_from_wire_refuses_a_nul_dependency_key_or_resource_name() -> None:
    dep = pb.Dep(target=pb.TaskRef(key=NUL))
    with pytest.raises(InvalidSubmission, match=refused("dependency key")):
        Submission.from_wire(pb.TaskSpec(deps=[dep]))
    with pytest.raises(InvalidSubmission, match=refused("resource name")):
        Submission.from_wire(pb.TaskSpec(resources={NUL: 1}))
    spec: Any = pb.TaskSpec(key="k", kind="render", pool="gpu", tenant="acme")  # (without one: taken)
    sub = Submission.from_wire(spec)
    assert (sub.key, sub.kind, sub.pool, sub.tenant) == ("k", "render", "gpu", "acme")


def test_signal_pool_and_resource_names() -> None:
    with pytest.raises(ValueError, match=refused("a signal name")):
        check_signal_name(NUL)
    with pytest.raises(ValueError, match=refused("pool name")):
        Pool(NUL, print)
    with pytest.raises(ValueError, match=refused("resource name")):
        ResourceConfig(NUL, "semaphore", permits=1)


SURROGATE = "a\udcffb"  # (a file name that is not UTF-8, as os.fsdecode gives it)


def no_utf8(what: str) -> str:
    return re.escape(f"{what} must not contain a lone surrogate (U+D800..U+DFFF): it has no UTF-8 form")


@pytest.mark.parametrize("field", ["key", "kind", "pool", "tenant"])
def test_a_lone_surrogate_is_refused_as_a_nul_is(field: str) -> None:
    """Neither store can encode a lone surrogate: one in a key or kind failed the whole group
    commit for good (SQLite and PostgreSQL alike) and the leader stepped down.  The server's
    edges refuse one already (protobuf holds UTF-8 only); the Python API's did not."""
    with pytest.raises(InvalidSubmission, match=f"^{no_utf8(field)}$"):
        Submission.from_kwargs(b"x", **{field: SURROGATE})
    with pytest.raises(InvalidSubmission, match=no_utf8("dependency key")):
        Submission.from_kwargs(b"x", after=[SURROGATE])
    with pytest.raises(ValueError, match=no_utf8("a signal name")):
        check_signal_name(SURROGATE)
    assert check_key("k\u00e9\U0001f600") == "k\u00e9\U0001f600"  # (any other text is a key)


def test_a_lone_surrogate_in_tags_or_labels_is_refused() -> None:
    """Tags and labels are stored in the definition's JSON text, written as UTF-8: a lone
    surrogate there failed the commit too (a NUL is escaped in JSON: taken)."""
    with pytest.raises(InvalidSubmission, match=no_utf8("tags")):
        Submission.from_kwargs(b"x", tags={"t": SURROGATE})
    with pytest.raises(InvalidSubmission, match=no_utf8("labels")):
        Submission.from_kwargs(b"x", labels={SURROGATE: "v"})
    sub = Submission.from_kwargs(b"x", tags={"t": NUL}, labels={NUL: "\u00e9"})
    assert (sub.tags, sub.labels) == ({"t": NUL}, {NUL: "\u00e9"})
