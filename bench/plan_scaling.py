"""How the planner scales: plan generated DAGs of 1,000 to 100,000 stages.

Each generated DAG has about three inputs per stage drawn from earlier stages, with a mix of
exchange kinds (blocking all-to-all, pipelined forward, pipelined all-to-all, blocking broadcast),
so regions merge, forward groups form and cycles through blocking edges occur. For each size it
times the parse-time plan (``plan_stages``: validation, regions, forward groups, fractions) and the
run-time decisions (``ConsumedResult`` and ``decide_parallelism`` for every stage from partition
sizes generated beforehand), and measures peak memory in a separate pass (tracemalloc slows the
code it watches).

Run: ``python -m bench plan-scaling`` (``--sizes 1000,10000`` to choose sizes).
"""

from __future__ import annotations

import argparse
import functools
import gc
import itertools
import os
import platform
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_provider_finegrained.planning import (
    ConsumedResult,
    ParallelismConfig,
    StageSpec,
    decide_parallelism,
    plan_stages,
)
from bench.lib.report import command_line, load_1m, write_results
from bench.simulate.workload import generate  # the simulator's generator: for a seed, the same DAG

RESULTS = Path(__file__).parent / "results"


def partition_sizes(specs: list[StageSpec]) -> list[list[tuple[list[int], bool]]]:
    """For every stage, each input's generated partition sizes (8 partitions) and whether it is broadcast."""
    rng = random.Random(11)
    return [
        [([rng.randint(0, 64 * 2**20) for _ in range(8)], i.distribution == "broadcast") for i in spec.inputs]
        for spec in specs
    ]


def run_time_decisions(sizes: list[list[tuple[list[int], bool]]], config: ParallelismConfig) -> int:
    """What a run does per stage: take the measured sizes as ConsumedResults and decide the parallelism."""
    total = 0
    for stage_sizes in sizes:
        consumed = [ConsumedResult(partitions, broadcast=broadcast) for partitions, broadcast in stage_sizes]
        total += decide_parallelism(consumed, config)
    return total


def linear_baseline(specs: list[StageSpec]) -> int:
    """A pass any planner must make: index stages and group every edge by consumer and producer.

    Its time shows what the machine's memory system does to a strictly linear pass at this size, so
    the planner's time can be read against it (their ratio stays flat if planning is linear).
    """
    gc.disable()  # as plan_stages does, so both are measured the same way
    by_name = {spec.name: spec for spec in specs}
    consumers: dict[str, list[str]] = {}
    producers: dict[str, list[str]] = {}
    for spec in specs:
        for stage_input in spec.inputs:
            consumers.setdefault(stage_input.upstream, []).append(spec.name)
            producers.setdefault(spec.name, []).append(by_name[stage_input.upstream].name)
    gc.enable()
    return len(consumers) + len(producers)


def best_of(repeats: int, fn: Callable[[], object]) -> list[float]:
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def peak_memory(fn: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def measure_size(n: int, repeats: int, config: ParallelismConfig) -> dict[str, Any]:
    """One generated DAG of ``n`` stages: the plan's and the decisions' times, the plan's peak memory."""
    specs = generate(n)
    plan_times = best_of(repeats, functools.partial(plan_stages, specs))
    baseline_times = best_of(repeats, functools.partial(linear_baseline, specs))
    sizes = partition_sizes(specs)  # generated outside the timing: random numbers are not the planner's work
    decide_times = best_of(repeats, functools.partial(run_time_decisions, sizes, config))
    plan = plan_stages(specs)
    return {
        "stages": n,
        "edges": sum(len(s.inputs) for s in specs),
        "regions": len(plan.regions),
        "forward_groups": len(plan.forward_groups),
        "plan_seconds_median": statistics.median(plan_times),
        "plan_seconds": plan_times,
        "baseline_seconds_median": statistics.median(baseline_times),
        "plan_over_baseline": statistics.median(plan_times) / statistics.median(baseline_times),
        "decide_seconds_median": statistics.median(decide_times),
        "plan_peak_bytes": peak_memory(functools.partial(plan_stages, specs)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench plan-scaling", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    config = ParallelismConfig(max_parallelism=256)
    load_before = load_1m()  # the machine may be shared: say how busy it was
    rows: list[dict[str, Any]] = []
    for n in (int(s) for s in args.sizes.split(",")):
        rows.append(row := measure_size(n, args.repeats, config))
        print(
            f"{n:>7} stages {row['edges']:>7} edges: plan {row['plan_seconds_median']:.3f} s, decide "
            f"{row['decide_seconds_median']:.3f} s, peak {row['plan_peak_bytes'] / 2**20:.0f} MiB, "
            f"{row['regions']} regions",
            flush=True,
        )
    for prev, cur in itertools.pairwise(rows):
        cur["time_growth_vs_previous"] = cur["plan_seconds_median"] / prev["plan_seconds_median"]
        cur["size_growth_vs_previous"] = cur["stages"] / prev["stages"]
    machine = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count() or 0,
        "date": time.strftime("%Y-%m-%d"),
        "repeats": args.repeats,
        "load_average_1min": [load_before, load_1m()],
    }
    table = render(rows)
    command = command_line("plan-scaling", argv)
    markdown = f"Command: `{command}`; machine: {machine}\n\n{table}\n"
    write_results(RESULTS / "plan_scaling.json", {"machine": machine, "rows": rows}, markdown)
    print(table)
    return 0


def render(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| stages | edges | regions | plan (median s) | linear baseline (s) | plan / baseline | decide all (median s) "
        "| plan peak memory | peak per stage |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['stages']:,} | {r['edges']:,} | {r['regions']:,} | {r['plan_seconds_median']:.3f} | "
        f"{r['baseline_seconds_median']:.3f} | {r['plan_over_baseline']:.0f}x | "
        f"{r['decide_seconds_median']:.3f} | {r['plan_peak_bytes'] / 2**20:.1f} MiB | "
        f"{r['plan_peak_bytes'] / r['stages'] / 1024:.2f} KiB |"
        for r in rows
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
