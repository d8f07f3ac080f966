"""cronoq's test kit: the real Scheduler on virtual time.

    import cronoq.testing

    async with cronoq.testing.run(app, start=datetime(2026, 1, 1, tzinfo=UTC)) as env:
        handle = await nightly_report.options(start_in=86_400).submit("eu")
        assert await handle == "ok"          # a day passes in milliseconds
        await env.advance(3600)              # or move time by hand
        print(env.now, env.events)

* :func:`run` / :class:`Environment` — the environment (:mod:`cronoq.testing.env`);
* :class:`VirtualClock` — the clock it runs on (:mod:`cronoq.testing.clock`);
* :func:`eager` — calls run inline, no scheduler, for unit tests (:mod:`cronoq.testing.eager`);
* the pytest plugin (:mod:`cronoq.testing.plugin`, registered as a ``pytest11`` entry point):
  the ``cronoq_env`` fixture.
"""

from cronoq.testing.clock import VirtualClock
from cronoq.testing.eager import eager
from cronoq.testing.env import Environment, run

__all__ = ["Environment", "VirtualClock", "eager", "run"]
