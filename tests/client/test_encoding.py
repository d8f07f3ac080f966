"""Payload encoding, TaskSpec building, wire → Python conversions and ClientError (no server)."""

from __future__ import annotations

import datetime as dt
import json
import math
import pickle
import subprocess
import sys

import pytest

from cronoq import Dep, Priority, RetryPolicy
from cronoq.client import (
    CancelTask,
    ClientError,
    Lease,
    Reject,
    Result,
    Submitted,
    TaskFailed,
    WaitTimeout,
    build_spec,
    decode_payload,
    encode_payload,
    task,
)
from cronoq.client.encoding import (
    CONTENT_TYPE_BYTES,
    CONTENT_TYPE_JSON,
    CONTENT_TYPE_TEXT,
    overlap_to_wire,
    priority_from_wire,
    spec_of,
    status_from_wire,
    status_to_wire,
    task_ref,
)
from cronoq.client.errors import from_rpc_error
from cronoq.client.types import Event, RecurringInfo, Snapshot, TaskInfo, TaskPage, WorkerInfo
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb

# ---------------------------------------------------------------------------------------------
# payloads


def test_encode_payload_by_type() -> None:
    assert encode_payload(None) == (b"", "")
    assert encode_payload(b"\x00\x01") == (b"\x00\x01", CONTENT_TYPE_BYTES)
    assert encode_payload(bytearray(b"ab")) == (b"ab", "application/octet-stream")
    assert encode_payload(memoryview(b"xy")) == (b"xy", CONTENT_TYPE_BYTES)
    assert encode_payload("héllo") == ("héllo".encode(), "text/plain; charset=utf-8")
    assert encode_payload("") == (b"", CONTENT_TYPE_TEXT)
    assert encode_payload({"a": [1, 2.5, None], "b": "é"}) == (
        '{"a":[1,2.5,null],"b":"é"}'.encode(),
        "application/json",
    )
    assert encode_payload(0) == (b"0", CONTENT_TYPE_JSON)
    assert encode_payload(False) == (b"false", CONTENT_TYPE_JSON)
    assert encode_payload([]) == (b"[]", CONTENT_TYPE_JSON)


def test_encode_payload_rejects_non_json() -> None:
    with pytest.raises(ValueError, match="cannot be encoded as JSON"):
        encode_payload(object())
    with pytest.raises(ValueError, match="cannot be encoded as JSON"):
        encode_payload({"x": math.nan})
    with pytest.raises(ValueError, match="set"):
        encode_payload({1, 2})


def test_decode_payload_by_content_type() -> None:
    assert decode_payload(b'{"a":1}', "application/json") == {"a": 1}
    assert decode_payload(b'{"a":1}', "application/JSON; charset=utf-8") == {"a": 1}
    assert decode_payload(b"[1]", "application/vnd.thing+json") == [1]
    assert decode_payload(b"", "application/json") is None
    assert decode_payload("é".encode(), "text/plain; charset=utf-8") == "é"
    assert decode_payload(b"\x00", "application/octet-stream") == b"\x00"
    assert decode_payload(b"", "") is None
    assert decode_payload(b"raw", "") == b"raw"
    for value in (None, b"\x01\x02", "text", {"k": [1, "v"]}, 3.5):
        assert decode_payload(*encode_payload(value)) == value


# ---------------------------------------------------------------------------------------------
# TaskSpec building


def test_defaults_leave_fields_unset() -> None:
    spec = build_spec()
    assert spec == pb.TaskSpec()
    for name in (
        "deadline_in_s",
        "deadline_unix_ns",
        "start_in_s",
        "start_unix_ns",
        "tolerance_s",
        "duration_hint_s",
        "timeout_s",
        "retry",
    ):
        assert not spec.HasField(name), name
    assert spec.priority == pb.PRIORITY_UNSPECIFIED
    assert spec.on_miss == pb.MISS_POLICY_UNSPECIFIED


def test_every_field_maps_to_the_wire() -> None:
    spec = build_spec(
        {"n": 1},
        pool="gpu",
        kind="render",
        priority="HIGH",
        key="job-1",
        deadline_in=2.5,
        start_at=dt.datetime(2030, 1, 1, tzinfo=dt.UTC),
        tolerance=0.5,
        on_miss="skip",
        duration_hint=3,
        timeout=10.0,
        retry=RetryPolicy(max_attempts=5, initial_backoff=0.5, multiplier=3, max_backoff=30, jitter=False),
        after=[1, "parent"],
        deps=[Dep(2, on="failure"), Dep("k", on="on_complete")],
        resources={"db": 2},
        tags={"traceparent": "00-abc", "n": 5},
        labels={"zone": "eu"},
        tenant="acme",
    )
    assert spec.payload == b'{"n":1}' and spec.content_type == "application/json"
    assert spec.pool == "gpu" and spec.kind == "render" and spec.key == "job-1"
    assert spec.priority == pb.PRIORITY_HIGH
    assert spec.deadline_in_s == 2.5 and not spec.HasField("deadline_unix_ns")
    assert spec.start_unix_ns == 1_893_456_000 * 10**9 and not spec.HasField("start_in_s")
    assert spec.tolerance_s == 0.5
    assert spec.on_miss == pb.MISS_POLICY_SKIP
    assert spec.duration_hint_s == 3.0 and spec.timeout_s == 10.0
    assert spec.retry == pb.RetryPolicy(
        max_attempts=5, initial_backoff_s=0.5, multiplier=3.0, max_backoff_s=30.0, jitter=False
    )
    assert [(d.target.WhichOneof("target"), d.target.id or d.target.key, d.cond) for d in spec.deps] == [
        ("id", 1, pb.EDGE_COND_ON_SUCCESS),
        ("key", "parent", pb.EDGE_COND_ON_SUCCESS),
        ("id", 2, pb.EDGE_COND_ON_FAILURE),
        ("key", "k", pb.EDGE_COND_ON_COMPLETE),
    ]
    assert dict(spec.resources) == {"db": 2}
    assert dict(spec.tags) == {"traceparent": "00-abc", "n": "5"}
    assert dict(spec.labels) == {"zone": "eu"}
    assert spec.tenant == "acme"
    # the spec survives the wire
    assert pb.TaskSpec.FromString(spec.SerializeToString()) == spec


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        ("critical", pb.PRIORITY_CRITICAL),
        ("High", pb.PRIORITY_HIGH),
        ("normal", pb.PRIORITY_NORMAL),
        ("LOW", pb.PRIORITY_LOW),
        (0, pb.PRIORITY_CRITICAL),
        (3, pb.PRIORITY_LOW),
        (Priority.HIGH, pb.PRIORITY_HIGH),
        (Priority.NORMAL, pb.PRIORITY_NORMAL),
    ],
)
def test_priority_to_enum(value: object, wire: int) -> None:
    assert build_spec(priority=value).priority == wire


def test_absolute_times_and_misc_fields() -> None:
    spec = build_spec(deadline_at=1_700_000_000.25, start_in=0, on_miss="fail")
    assert spec.deadline_unix_ns == 1_700_000_000_250_000_000
    assert spec.HasField("start_in_s") and spec.start_in_s == 0.0
    assert spec.on_miss == pb.MISS_POLICY_FAIL
    assert build_spec(on_miss="run_late").on_miss == pb.MISS_POLICY_RUN_LATE
    aware = dt.datetime(2024, 1, 1, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert build_spec(deadline_at=aware).deadline_unix_ns == 1_704_067_200 * 10**9
    # a single ref, or a Dep, is accepted in after=
    assert [d.target.key for d in build_spec(after="a").deps] == ["a"]
    assert build_spec(after=[Dep(4, on="complete")]).deps[0].cond == pb.EDGE_COND_ON_COMPLETE


def test_retry_policy_zero_backoff_is_not_the_default() -> None:
    r = build_spec(retry=RetryPolicy(max_attempts=2, initial_backoff=0, max_backoff=0)).retry
    assert r.max_attempts == 2
    assert 0 < r.initial_backoff_s < 1e-6 and 0 < r.max_backoff_s < 1e-6
    none = build_spec(retry=RetryPolicy.none()).retry
    assert none.max_attempts == 1 and none.initial_backoff_s == 1.0 and none.multiplier == 2.0
    assert none.max_backoff_s == 60.0 and none.jitter is True


def test_content_type_override() -> None:
    spec = build_spec(b"<a/>", content_type="application/xml")
    assert spec.payload == b"<a/>" and spec.content_type == "application/xml"
    with pytest.raises(ValueError, match="content_type"):
        build_spec(b"", content_type=3)


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"priority": "urgent"}, ValueError, "unknown priority 'urgent'"),
        ({"priority": 7}, ValueError, r"priority must be 0..=3"),
        ({"priority": True}, ValueError, "unknown priority"),
        ({"deadline_in": -1}, ValueError, "deadline_in must be a finite, non-negative number of seconds"),
        ({"timeout": math.inf}, ValueError, "timeout must be a finite, non-negative"),
        ({"tolerance": "1"}, ValueError, "tolerance must be a finite"),
        ({"duration_hint": math.nan}, ValueError, "duration_hint must be"),
        ({"start_in": -0.5}, ValueError, "start_in must be"),
        ({"deadline_in": 1, "deadline_at": 2}, ValueError, "mutually exclusive"),
        ({"start_in": 1, "start_at": 2}, ValueError, "mutually exclusive"),
        ({"deadline_at": dt.datetime(2030, 1, 1)}, ValueError, "naive datetime"),
        ({"start_at": "tomorrow"}, ValueError, "start_at must be Unix seconds"),
        ({"on_miss": "later"}, ValueError, "on_miss must be"),
        ({"retry": {"max_attempts": 3}}, ValueError, "retry must be a RetryPolicy"),
        ({"after": 0}, ValueError, "dependency"),
        ({"after": [1.5]}, ValueError, "dependency"),
        ({"after": {1, 2}}, ValueError, "after must be"),
        ({"deps": [1]}, ValueError, "deps must contain Dep"),
        ({"deps": 1}, ValueError, "deps must be a list"),
        ({"resources": {"db": 0}}, ValueError, "resource amount must be an int >= 1"),
        ({"resources": {"db": 1.5}}, ValueError, "resource amount"),
        ({"resources": {"db": 2**32}}, ValueError, "resource amount"),
        ({"resources": {1: 1}}, ValueError, "resource names must be strings"),
        ({"resources": [("db", 1)]}, ValueError, "resources must be a mapping"),
        ({"tags": {1: "x"}}, ValueError, "tags keys must be strings"),
        ({"tags": ["a"]}, ValueError, "tags must be a mapping"),
        ({"labels": "zone"}, ValueError, "labels must be a mapping"),
        ({"key": ""}, ValueError, "key must be a non-empty string"),
        ({"key": 5}, ValueError, "key must be a non-empty string"),
        ({"kind": ""}, ValueError, "kind must be a non-empty string"),
        ({"pool": 3}, ValueError, "pool must be a string"),
        ({"tenant": 3}, ValueError, "tenant must be a string"),
        ({"colour": "red"}, TypeError, "unexpected task field 'colour'"),
    ],
)
def test_bad_fields(fields: dict[str, object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        build_spec(None, **fields)


def test_dep_rejects_unknown_condition() -> None:
    with pytest.raises(ValueError, match="on must be 'success', 'failure' or 'complete'"):
        Dep(1, on="maybe")


def test_task_and_batch_members() -> None:
    spec = task("hi", key="a", priority="low")
    assert spec.payload == b"hi" and spec.key == "a" and spec.priority == pb.PRIORITY_LOW
    assert spec_of(spec) is spec
    assert spec_of({"payload": [1], "pool": "p"}) == build_spec([1], pool="p")
    with pytest.raises(ValueError, match="batch members"):
        spec_of(42)
    with pytest.raises(ValueError, match="unknown priority"):
        task(None, priority="nope")


def test_task_refs() -> None:
    assert task_ref(5) == pb.TaskRef(id=5)
    assert task_ref("k") == pb.TaskRef(key="k")
    assert task_ref(Submitted(id=9)) == pb.TaskRef(id=9)
    for bad in (0, -1, True, "", 1.0, None, 2**64):
        with pytest.raises(ValueError):
            task_ref(bad)


def test_enum_names() -> None:
    assert status_from_wire(pb.TASK_STATUS_DEAD_LETTERED) == "dead_lettered"
    assert status_from_wire(pb.TASK_STATUS_SHED) == "shed"
    assert status_from_wire(99) == "unknown(99)"
    assert status_to_wire("Succeeded") == pb.TASK_STATUS_SUCCEEDED
    assert status_to_wire(pb.TASK_STATUS_READY) == pb.TASK_STATUS_READY
    with pytest.raises(ValueError, match="unknown status"):
        status_to_wire("done")
    with pytest.raises(ValueError, match="unknown status"):
        status_to_wire("unspecified")
    assert priority_from_wire(pb.PRIORITY_CRITICAL) == "critical"
    assert priority_from_wire(pb.PRIORITY_UNSPECIFIED) == "normal"
    assert overlap_to_wire("queue_on_success") == pb.OVERLAP_QUEUE_ON_SUCCESS
    with pytest.raises(ValueError, match="overlap must be 'skip', 'allow', 'queue' or 'queue_on_success'"):
        overlap_to_wire("sometimes")


# ---------------------------------------------------------------------------------------------
# results and other wire views


def test_result_decoding() -> None:
    r = Result.from_wire(
        pb.TaskResult(id=3, status=pb.TASK_STATUS_SUCCEEDED, output=b'{"x":[1]}', output_available=True)
    )
    assert r == Result(3, "succeeded", b'{"x":[1]}', "", True)
    assert r.ok and r.json() == {"x": [1]} and r.value() == {"x": [1]} and r.text() == '{"x":[1]}'
    assert r.raise_for_status() is r

    text = Result.from_wire(
        pb.TaskResult(id=4, status=pb.TASK_STATUS_SUCCEEDED, output=b"plain", output_available=True)
    )
    assert text.value() == "plain" and text.text() == "plain"
    with pytest.raises(ValueError):
        text.json()
    raw = Result(5, "succeeded", b"\xff\x00", "", True)
    assert raw.value() == b"\xff\x00"

    empty = Result.from_wire(pb.TaskResult(id=6, status=pb.TASK_STATUS_SUCCEEDED, output=b""))
    assert empty.output_available and empty.output == b"" and empty.json() is None and empty.value() is None

    failed = Result.from_wire(pb.TaskResult(id=7, status=pb.TASK_STATUS_FAILED, message="boom"))
    assert not failed.ok and not failed.output_available and failed.output is None and failed.text() == ""
    with pytest.raises(TaskFailed) as exc:
        failed.raise_for_status()
    assert str(exc.value) == "task 7 ended as failed: boom"


def test_json_of_data_that_is_not_json_says_what_it_got() -> None:
    """``cronoq submit hello`` sends text: a handler's ``lease.json()`` used to fail with only
    "Expecting value: line 1 column 1"; the error (still a JSONDecodeError) names the payload,
    its content type and the readers that work."""
    lease = Lease(
        pb.Lease(lease=1, task_id=2, attempt=1, payload=b"hello", content_type=CONTENT_TYPE_TEXT), None
    )
    with pytest.raises(json.JSONDecodeError) as exc:
        lease.json()
    assert str(exc.value) == (
        "the payload is not JSON (content type 'text/plain; charset=utf-8', 5 bytes; "
        ".text() or .value() read it): Expecting value: line 1 column 1 (char 0)"
    )
    assert lease.text() == lease.value() == "hello"
    assert Lease(pb.Lease(lease=1, payload=b'{"a": 1}'), None).json() == {"a": 1}
    with pytest.raises(json.JSONDecodeError, match=r"^the output is not JSON \(5 bytes; \.text\(\)"):
        Result(3, "succeeded", b"plain", "", True).json()


def test_json_of_bytes_that_are_not_text_says_what_it_got() -> None:
    """A binary payload (not UTF-8) is no JSON either: ``.json()`` raised a bare
    UnicodeDecodeError, not the documented JSONDecodeError naming the content type."""
    lease = Lease(pb.Lease(lease=1, payload=b"\x80abc", content_type="application/octet-stream"), None)
    with pytest.raises(json.JSONDecodeError) as exc:
        lease.json()
    assert str(exc.value).startswith(
        "the payload is not JSON (content type 'application/octet-stream', 4 bytes; .text() or "
        ".value() read it): not UTF-8 text"
    ), str(exc.value)
    assert lease.value() == b"\x80abc"


def test_submitted_from_wire() -> None:
    assert Submitted.from_wire(pb.SubmitResponse(id=1, duplicate=True)) == Submitted(1, True, None)
    sub = Submitted.from_wire(
        pb.SubmitResponse(
            id=2, result=pb.TaskResult(id=2, status=pb.TASK_STATUS_CANCELLED, message="cancelled")
        )
    )
    assert sub.result == Result(2, "cancelled", None, "cancelled", False)


def test_taskinfo_event_and_admin_views() -> None:
    info = TaskInfo.from_wire(
        pb.TaskInfo(
            id=1,
            status=pb.TASK_STATUS_RUNNING,
            pool="p",
            attempt=2,
            max_attempts=3,
            created_unix_ns=1_500_000_000_000_000_000,
            started_unix_ns=1_500_000_001_500_000_000,
            priority=pb.PRIORITY_LOW,
        )
    )
    assert info.status == "running" and info.key is None and info.kind == "default" and info.tenant is None
    assert info.created_at == 1_500_000_000.0 and info.started_at == 1_500_000_001.5
    assert info.finished_at is None and info.priority == "low" and not info.terminal

    page = TaskPage.from_wire(
        pb.ListTasksResponse(tasks=[pb.TaskInfo(id=1), pb.TaskInfo(id=2)], next_after=2)
    )
    assert [t.id for t in page] == [1, 2] and len(page) == 2 and page.next_after == 2

    ev = Event.from_wire(
        pb.StatusEvent(
            id=4, pool="p", key="k", status=pb.TASK_STATUS_SKIPPED, attempt=0, at_unix_ns=2 * 10**9
        )
    )
    assert ev == Event(4, "p", "k", "skipped", 0, 2.0, "") and ev.terminal

    snap = Snapshot.from_wire(
        pb.SnapshotResponse(
            pools=[
                pb.PoolSnapshot(
                    name="a",
                    capacity=4,
                    pending_by_class=[1, 2, 3, 4],
                    wait_p99_s=0.5,
                    groups=[pb.WorkerGroup(labels={"z": "1"}, capacity=2, busy=1)],
                )
            ],
            live_tasks=10,
            totals=pb.Totals(submitted=12, stale_completions=1),
            workers_connected=2,
        )
    )
    pool = snap.pool("a")
    assert pool is not None and pool.capacity == 4 and pool.pending == 10 and pool.wait_p99 == 0.5
    assert pool.groups[0].labels == {"z": "1"} and snap.pool("b") is None
    assert (
        snap.totals["submitted"] == 12 and snap.totals["stale_completions"] == 1 and snap.totals["shed"] == 0
    )
    assert snap.live_tasks == 10 and snap.workers_connected == 2

    w = WorkerInfo.from_wire(pb.WorkerInfo(id=1, name="w", pool="a", slots=3, connected_unix_ns=10**9))
    assert w.connected_at == 1.0 and w.slots == 3 and w.labels == {}
    rec = RecurringInfo.from_wire(pb.RecurringInfo(name="n", cron="@hourly", overlap=pb.OVERLAP_QUEUE))
    assert rec.overlap == "queue" and rec.tz is None and rec.next_at is None and rec.last_task_id is None
    rec2 = RecurringInfo.from_wire(pb.RecurringInfo(name="n", last_task_id=0, next_unix_ns=3 * 10**9))
    assert rec2.overlap == "skip" and rec2.last_task_id == 0 and rec2.next_at == 3.0


# ---------------------------------------------------------------------------------------------
# errors


class _FakeRpcError(Exception):
    def __init__(self, code: object, details: str | None) -> None:
        self._code, self._details = code, details

    def code(self) -> object:
        return self._code

    def details(self) -> str | None:
        return self._details


def test_client_error() -> None:
    import grpc

    err = from_rpc_error(_FakeRpcError(grpc.StatusCode.NOT_FOUND, "unknown task"))
    assert type(err) is ClientError
    assert err.code == "not_found" and err.message == "unknown task" and not err.retryable
    assert str(err) == "not_found: unknown task"
    assert from_rpc_error(_FakeRpcError(grpc.StatusCode.UNAVAILABLE, "standby")).retryable
    assert from_rpc_error(_FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "overloaded")).retryable
    assert not from_rpc_error(_FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "")).retryable
    assert from_rpc_error(_FakeRpcError(grpc.StatusCode.PERMISSION_DENIED, None)).message == ""

    plain = from_rpc_error(_FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "late"))
    assert type(plain) is ClientError and plain.code == "deadline_exceeded"
    timeout = from_rpc_error(_FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "late"), wait=True)
    assert isinstance(timeout, WaitTimeout) and isinstance(timeout, TimeoutError)
    assert isinstance(timeout, ClientError) and timeout.code == "deadline_exceeded"

    for e in (err, timeout, ClientError("unavailable", "x")):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and back.code == e.code and back.message == e.message
    assert repr(ClientError("a", "b")) == "ClientError('a', 'b')"
    assert Reject("busy").reason == "busy" and CancelTask("no").reason == "no"
    assert pickle.loads(pickle.dumps(Reject("r"))).reason == "r"


def test_import_cronoq_does_not_import_grpc() -> None:
    code = "import sys, cronoq, cronoq.proto; assert 'grpc' not in sys.modules, 'grpc imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_json_default_compact_roundtrip() -> None:
    data, ctype = encode_payload({"a": 1, "b": [True, None]})
    assert json.loads(data) == {"a": 1, "b": [True, None]} and b" " not in data and ctype == CONTENT_TYPE_JSON


def test_to_json_renders_the_wire_message_read_and_refuses_a_hand_made_value() -> None:
    msg = pb.TaskInfo(id=7, status=pb.TASK_STATUS_RUNNING, pool="p", created_unix_ns=1_500_000_000_123)
    out = TaskInfo.from_wire(msg).to_json()
    assert out["id"] == "7" and out["status"] == "running" and out["pool"] == "p"
    assert int(out["created_unix_ns"]) == 1_500_000_000_123  # exact, not through float seconds
    wire = pb.StatusEvent(id=3, pool="p", status=pb.TASK_STATUS_SUCCEEDED, at_unix_ns=2_000_000_000)
    ev = Event.from_wire(wire)
    assert ev.to_json()["id"] == "3" and ev.to_json()["at"] == 2.0
    with pytest.raises(ValueError, match="read from the server"):
        Event(id=1, pool="p", key=None, status="ready", attempt=0, at=1.0, message="").to_json()
