"""The submission spec: what a task is, declared and checked once, below every layer that takes one.

Theory of operation
-------------------
``runtime/`` (``Scheduler.submit``, ``Task``), ``client/`` (``Client.submit``), ``server/``
(the gRPC and HTTP handlers) and ``tasks/`` (named tasks) all take tasks; this package is
what they share, so none of them imports another for it:

* :mod:`cronoq.spec.fields`: the task-field table (every field's name on every surface);
* :mod:`cronoq.spec.validate`: the validators and the time conversions (one error family);
* :mod:`cronoq.spec.submission`: :class:`Submission`, the one value a task is at each edge,
  built from keyword arguments or from the wire;
* :mod:`cronoq.spec.wire`: ``Submission`` ↔ ``cronoq.v1.TaskSpec`` and the wire enums
  (needs protobuf; imported only by who speaks the wire);
* :mod:`cronoq.spec.payloads`: payload values ↔ bytes and a content type;
* :mod:`cronoq.spec.json_shapes`: the JSON shapes of the HTTP API (needs protobuf).

It depends on the engine's model and the error classes only
(``tests/architecture/test_package_edges.py``).
"""

from __future__ import annotations

from cronoq.spec.submission import Submission
from cronoq.spec.validate import TimeSpec

__all__ = ["Submission", "TimeSpec"]
