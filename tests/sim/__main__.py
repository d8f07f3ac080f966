"""``python -m tests.sim``: run, replay or soak the engine simulator.

    python -m tests.sim --seed 42 --steps 3000 -v     # replay one run, printing every call
    python -m tests.sim --seeds 100 --steps 2000      # seeds 0..99 (or --seed S.. S+99)
    python -m tests.sim --soak [--minutes 10]         # random seeds until the time is up

Each seed runs the base simulator (simulator.py), the feature simulator (featsim.py:
dependencies, fixed starts, cron schedules, autoscaling, resources, labels, tenants, crash
recovery) and the remote-worker simulator (remotesim.py: the same behind the server's worker
registry, with Nacks and disconnects); ``--only`` picks one.

Exit status 1 on the first failure, after printing the seed, the step and the replay command.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from .featsim import FeatureSimulator
from .opsim import OpsSimulator
from .remotesim import RemoteSimulator
from .simulator import SimFailure, SimStats, Simulator


def _run(seed: int, steps: int, verbose: bool, only: str | None = None) -> list[SimStats]:
    out = []
    if only in (None, "base"):
        out.append(Simulator(seed, steps, verbose=verbose).run())
    if only in (None, "features"):
        out.append(FeatureSimulator(seed, steps, verbose=verbose).run())
    if only in (None, "remote"):
        out.append(RemoteSimulator(seed, steps, verbose=verbose).run())
    if only in (None, "ops"):
        out.append(OpsSimulator(seed, steps).run())
    return out


def _line(st: SimStats) -> str:
    rate = st.total_steps / st.wall_seconds if st.wall_seconds else 0.0
    kind = st.kind
    return (
        f"seed {st.seed:>10} {kind:>8}: {st.steps} + {st.quiesce_steps} quiesce steps, {st.calls} calls, "
        f"{st.submitted} tasks, {st.shadow.get('dispatches', 0)} dispatches, "
        f"{st.sim_seconds:.1f} sim-s, {st.wall_seconds:.2f} s ({rate:,.0f} steps/s)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=None, help="run (replay) this seed; with --seeds, the first")
    ap.add_argument("--steps", type=int, default=None, help="steps with faults on (default 2000; soak 5000)")
    ap.add_argument("--seeds", type=int, default=None, help="run this many consecutive seeds")
    ap.add_argument("--soak", action="store_true", help="random seeds until --minutes have passed")
    ap.add_argument("--minutes", type=float, default=10.0, help="soak duration (default 10)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every engine call")
    ap.add_argument(
        "--only", choices=("base", "features", "remote", "ops"), default=None, help="run one simulator only"
    )
    args = ap.parse_args(argv)

    if args.soak:
        steps = args.steps or 5000
        rng = random.Random(args.seed)  # --seed makes the soak's seed sequence reproducible
        seeds = (rng.getrandbits(32) for _ in iter(int, 1))
        deadline = time.monotonic() + args.minutes * 60
    else:
        steps = args.steps or 2000
        first = 0 if args.seed is None else args.seed
        count = args.seeds if args.seeds is not None else 1
        seeds = iter(range(first, first + count))
        deadline = None

    total_steps = 0
    total_wall = 0.0
    n = 0
    try:
        for seed in seeds:
            if deadline is not None and time.monotonic() > deadline:
                break
            try:
                runs = _run(seed, steps, args.verbose, args.only)
            except SimFailure as e:
                print(e, file=sys.stderr)
                return 1
            n += 1
            for st in runs:
                total_steps += st.total_steps
                total_wall += st.wall_seconds
                if args.verbose or not args.soak or n % 50 == 0:
                    print(_line(st), flush=True)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
    rate = total_steps / total_wall if total_wall else 0.0
    print(
        f"ok: {n} seeds x {steps} steps ({total_steps} steps incl. quiesce) "
        f"in {total_wall:.1f} s, {rate:,.0f} steps/s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
