"""The breaker of calls to one peer shard (cronoq.server.shards.breaker), on a given clock."""

from __future__ import annotations

from cronoq.server.shards.breaker import Breaker


def test_opens_after_consecutive_failures_and_an_answer_resets_the_count() -> None:
    b = Breaker(failures=3, reset_s=5.0, max_calls=10)
    for _ in range(2):
        assert b.admit(0.0) is False
        b.done(0.0, answered=False, probe=False)
    assert b.admit(0.0) is False
    b.done(0.0, answered=True, probe=False)  # an answer (an error answer too): alive
    for _ in range(3):
        assert b.admit(1.0) is False
        b.done(1.0, answered=False, probe=False)
    assert b.state(1.0) == "open"
    why = b.admit(2.0)
    assert why == "circuit open after 3 failed calls; next probe in 4.0 s"


def test_one_probe_when_half_open_its_answer_closes_its_silence_reopens() -> None:
    b = Breaker(failures=1, reset_s=5.0, max_calls=10)
    assert b.admit(0.0) is False
    b.done(0.0, answered=False, probe=False)
    assert b.state(4.9) == "open" and isinstance(b.admit(4.9), str)
    assert b.admit(5.0) is True  # the probe
    assert b.admit(5.0) == "circuit open; a probe call is in flight"
    b.done(6.0, answered=False, probe=True)
    assert b.state(6.0) == "open" and isinstance(b.admit(10.9), str)
    assert b.admit(11.0) is True
    b.done(11.1, answered=True, probe=True)
    assert b.state(11.1) == "closed" and b.admit(11.1) is False


def test_calls_in_flight_are_capped_streams_are_not_counted() -> None:
    b = Breaker(failures=3, reset_s=5.0, max_calls=2)
    assert b.admit(0.0) is False and b.admit(0.0) is False
    assert b.admit(0.0) == "2 calls to it in flight (limits.max_peer_calls)"
    assert b.admit(0.0, counted=False) is False  # a merged Watch stream
    b.done(0.0, answered=True, probe=False)
    assert b.admit(0.0) is False
