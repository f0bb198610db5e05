"""``python -m tests.chaos --trials N``: kill trials, their table and results files (docs/exactly-once.md)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from tests.chaos.region import parse_moment
from tests.chaos.results import render_results
from tests.chaos.runner import MODES, REPO, Options, run


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--trials", type=int, default=20, help="trials per mode (default 20)")
    parser.add_argument(
        "--modes",
        default="cold,warm",
        help="comma-separated: cold, warm (under airflow standalone), region (a stand-in task, no Airflow; "
        "default cold,warm)",
    )
    parser.add_argument("--label", default="after", help="results file name under bench/results/kill_trials/")
    parser.add_argument(
        "--source",
        default="HEAD",
        help="git revision of the provider to run (exported to a temp folder), or 'worktree'",
    )
    parser.add_argument(
        "--kill-delay",
        type=float,
        default=1.0,
        help="cold, warm: seconds between the kill moment (see --kill-at-parts) and the kill (default 1)",
    )
    parser.add_argument(
        "--kill-at-parts",
        default="0,2",
        help="cold, warm: part files the slow stage's attempt folder must hold before the kill, cycled over the trials "
        "(default 0,2: odd trials kill as the job starts writing, even ones mid-write)",
    )
    parser.add_argument(
        "--region-kill-at",
        default="8,w1",
        help="region mode's kill moments, cycled over the trials: N (seconds after the stand-in task started) or "
        "wN (N seconds after both Python workers run) (default 8,w1)",
    )
    parser.add_argument(
        "--row-sleep", type=float, default=2.0, help="cold, warm: seconds the slow stage sleeps per row (default 2)"
    )
    parser.add_argument("--run-timeout", type=float, default=420, help="cold, warm: seconds a trial's run may take")
    parser.add_argument("--no-fast-jvm", action="store_true", help="without the test suite's JVM start-up options")
    parser.add_argument(
        "--results",
        type=Path,
        default=REPO / "bench" / "results" / "kill_trials",
        help="folder of <label>.json and <label>.md (default bench/results/kill_trials)",
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=Path(tempfile.gettempdir()),
        help="where the run's home (Airflow's, the source snapshot, the region trials' folders) is made",
    )
    parser.add_argument("--render", type=Path, help="only re-render this results JSON as markdown and exit")
    args = parser.parse_args(argv)
    modes = tuple(mode for mode in args.modes.split(",") if mode)
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown or not modes:
        parser.error(f"--modes {args.modes!r}: unknown mode(s) {unknown}; allowed: {', '.join(MODES)}")
    if args.trials < 1:
        parser.error(f"--trials {args.trials}: must be at least 1")
    args.modes = modes
    given = args.kill_at_parts
    try:
        args.kill_at_parts = tuple(int(n) for n in given.split(","))
        if min(args.kill_at_parts) < 0 or max(args.kill_at_parts) > 9:
            raise ValueError
    except ValueError:
        parser.error(f"--kill-at-parts {given!r}: comma-separated whole numbers from 0 to 9")
    given = args.region_kill_at
    args.region_kill_at = tuple(moment for moment in given.split(",") if moment)
    try:
        if not args.region_kill_at:
            raise ValueError
        for moment in args.region_kill_at:
            parse_moment(moment)
    except ValueError:
        parser.error(f"--region-kill-at {given!r}: comma-separated N or wN, N seconds (0 or more)")
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    if args.render:
        data = json.loads(args.render.read_text())
        args.render.with_suffix(".md").write_text(render_results(data))
        return 0
    options = Options(
        trials=args.trials,
        modes=args.modes,
        label=args.label,
        source=args.source,
        kill_delay_s=args.kill_delay,
        kill_at_parts=args.kill_at_parts,
        row_sleep_s=args.row_sleep,
        run_timeout_s=args.run_timeout,
        fast_jvm=not args.no_fast_jvm,
        results=args.results,
        work=args.work,
        region_kill_at=args.region_kill_at,
    )
    return run(options, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
