"""The long-running commands tune the collector of their own process (``cronoq.cli.common.tune_gc``);
the library leaves the application's settings alone."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc, sys
before = gc.get_threshold()
import cronoq
from cronoq import Scheduler  # the library: nothing changes
assert gc.get_threshold() == before and gc.get_freeze_count() == 0, gc.get_freeze_count()
from cronoq.cli.common import GC_GEN0_THRESHOLD, tune_gc
tune_gc()
after = gc.get_threshold()
assert after == (GC_GEN0_THRESHOLD, before[1], before[2]), after
assert gc.get_freeze_count() > 1000, gc.get_freeze_count()  # what start-up loaded is frozen
print("ok")
"""


def test_tune_gc_freezes_start_up_and_raises_generation_0() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_serve_and_worker_tune_their_process() -> None:
    import inspect

    from cronoq.cli import serve_cmd, worker_cmd

    for mod in (serve_cmd, worker_cmd):
        src = inspect.getsource(mod)
        assert src.count("tune_gc()") == 1, mod.__name__
        assert src.index("tune_gc()") < src.index("asyncio.run("), mod.__name__
