"""``finegrained size``: decide one stage's parallelism and Spark settings from input sizes."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from airflow_provider_finegrained.planning import (
    DEFAULT_AVG_BYTES_PER_TASK,
    ClusterProfile,
    ConsumedResult,
    ParallelismConfig,
    StageDemand,
    explain_parallelism,
    format_bytes,
    parse_bytes,
    size_region,
)


def add_parser(commands: Any) -> None:
    size = commands.add_parser("size", help="decide a stage's parallelism and Spark settings from its input bytes")
    size.add_argument("--stage", default="stage", help="a name for the stage in the output")
    size.add_argument("--input-bytes", action="append", default=[], help="bytes of one blocking input (repeatable)")
    size.add_argument("--broadcast-bytes", action="append", default=[], help="bytes of one broadcast input")
    size.add_argument("--partitions", type=int, default=1, help="partitions each input is split into")
    size.add_argument("--min-parallelism", type=int, default=1)
    size.add_argument("--max-parallelism", type=int, default=128)
    size.add_argument("--avg-bytes-per-task", default=str(DEFAULT_AVG_BYTES_PER_TASK))
    size.add_argument("--max-broadcast-ratio", type=float, default=0.5)
    size.add_argument("--normalize", choices=["none", "power_of_two"], default="none")
    size.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="cores the application may use")
    size.add_argument("--memory", default="4g", help="memory the application may use (local: the driver)")
    size.add_argument("--cluster", action="store_true", help="size executors for a cluster instead of local mode")
    size.add_argument("--executor-cores", type=int, default=2)
    size.add_argument("--executor-memory", default="2g")
    size.add_argument("--json", action="store_true", help="print JSON")
    size.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    inputs = [_result(v, args.partitions, broadcast=False) for v in args.input_bytes]
    inputs += [_result(v, args.partitions, broadcast=True) for v in args.broadcast_bytes]
    config = ParallelismConfig(
        min_parallelism=args.min_parallelism,
        max_parallelism=args.max_parallelism,
        avg_bytes_per_task=args.avg_bytes_per_task,
        max_broadcast_ratio=args.max_broadcast_ratio,
        normalize=args.normalize,
    )
    profile = ClusterProfile(
        total_cores=args.cores,
        total_memory=args.memory if args.cluster else parse_bytes(args.memory) + 2**30,
        executor_cores=args.executor_cores,
        executor_memory=args.executor_memory if args.cluster else args.memory,
        local=not args.cluster,
    )
    decision = explain_parallelism(inputs, config)
    consumed = sum(r.total_bytes for r in inputs if not r.broadcast)
    demand = StageDemand(
        args.stage,
        decision.parallelism,
        consumed_bytes=consumed,
        min_parallelism=config.min_parallelism,
        max_parallelism=config.max_parallelism,
    )
    region = size_region([demand], profile)
    stage = region.stages[args.stage]
    conf = {**region.application_conf(), **stage.session_conf()}
    if args.json:
        print(json.dumps({"decision": decision.__dict__, "sizing": stage.__dict__, "spark_conf": conf}, indent=2))
        return 0
    rows = [
        ("input bytes", format_bytes(consumed)),
        (
            "broadcast bytes (counted)",
            f"{format_bytes(decision.broadcast_bytes)} ({format_bytes(decision.counted_broadcast_bytes)})",
        ),
        ("decided parallelism", f"{decision.parallelism} ({decision.rule}; computed {decision.computed})"),
        ("after sizing", f"{stage.parallelism} in {stage.waves} wave(s) on {region.slots} slot(s)"),
        *(("note", note) for note in (*decision.notes, *stage.notes)),
        *((key, value) for key, value in sorted(conf.items())),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"stage {args.stage}")
    print("\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows))
    return 0


def _result(value: str, partitions: int, *, broadcast: bool) -> ConsumedResult:
    total = parse_bytes(value, what="input bytes")
    parts = max(1, partitions)
    sizes = [total // parts + (1 if i < total % parts else 0) for i in range(parts)]
    return ConsumedResult(sizes, broadcast=broadcast)
