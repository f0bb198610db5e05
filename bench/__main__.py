"""``python -m bench <experiment> [options]``: every benchmark of the lab from one command.

``python -m bench --help`` lists the experiments; ``python -m bench <experiment> --help`` gives one's options.
"""

from __future__ import annotations

import importlib
import signal
import sys
import time
from collections.abc import Sequence

from bench import EXPERIMENTS

USAGE = "usage: python -m bench <experiment> [options]"


def usage() -> str:
    """The command's help: how to call it and every experiment with its one line."""
    width = max(map(len, EXPERIMENTS)) + 2
    lines = [
        USAGE,
        "",
        "Every benchmark of the lab. Results go to bench/results/ (JSON and Markdown); docs/benchmarks.md has",
        "the figures. bench/run_all.sh runs them all.",
        "",
        "experiments:",
        *(f"  {name.ljust(width)}{experiment.summary}" for name, experiment in EXPERIMENTS.items()),
        "",
        "python -m bench <experiment> --help gives that experiment's options.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the experiment named first in ``argv`` with the rest of ``argv`` (its ``main(argv)``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in EXPERIMENTS:
        print(f"{USAGE}\nerror: unknown experiment {name!r}; python -m bench --help lists them", file=sys.stderr)
        return 2
    module = importlib.import_module(EXPERIMENTS[name].module)
    started = time.perf_counter()
    code = module.main(rest)
    print(f"{name}: done in {time.perf_counter() - started:.0f} s")
    return int(code or 0)


if __name__ == "__main__":
    # A terminated run still runs its finally blocks: an experiment stops the pools, clusters and Airflow it
    # started, which would otherwise outlive it for hours.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    sys.exit(main())
