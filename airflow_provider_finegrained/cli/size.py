"""``finegrained size``: decide one stage's parallelism and Spark settings from input sizes.

The stage is decided by the run's own decision path (``execution.decision.decide_region``): a one-stage
region whose inputs are files of the given sizes, so the numbers are those a run decides for such a stage
(input balance, AQE, executors' lifecycle included).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict
from typing import Any

from airflow_provider_finegrained.execution.decision import (
    DecisionSettings,
    ExternalSizes,
    RegionDecision,
    StageInputs,
    decide_region,
)
from airflow_provider_finegrained.planning import (
    DEFAULT_AVG_BYTES_PER_TASK,
    ClusterProfile,
    ParallelismConfig,
    ResourceBounds,
    StageSpec,
    format_bytes,
    parse_bytes,
    plan_stages,
)


def add_parser(commands: Any) -> None:
    size = commands.add_parser("size", help="decide a stage's parallelism and Spark settings from its input bytes")
    size.add_argument("--stage", default="stage", help="a name for the stage in the output")
    size.add_argument("--input-bytes", action="append", default=[], help="bytes of one blocking input (repeatable)")
    size.add_argument("--broadcast-bytes", action="append", default=[], help="bytes of one broadcast input")
    size.add_argument("--partitions", type=int, default=1, help="files each input is split into")
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
    size.add_argument("--no-aqe", action="store_true", help="as with adaptive_query_execution off")
    size.add_argument("--json", action="store_true", help="print JSON")
    size.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    decision = decide(args)
    stage = decision.stages[args.stage]
    trace = stage.trace
    conf = {**decision.application_conf, **stage.session_conf}
    if args.json:
        out = {
            "decision": {
                "parallelism": stage.decided_parallelism,
                "rule": stage.rule,
                "computed": trace.computed_parallelism,
            },
            "sizing": {**asdict(stage.sizing), "balance": trace.input_balance},
            "spark_conf": conf,
        }
        print(json.dumps(out, indent=2, default=str))
        return 0
    broadcast = sum(v for k, v in trace.consumed_bytes.items() if k in trace.broadcast_inputs)
    rows = [
        ("input bytes", format_bytes(sum(trace.consumed_bytes.values()) - broadcast)),
        ("broadcast bytes", format_bytes(broadcast)),
        ("decided parallelism", f"{stage.decided_parallelism} ({stage.rule}; computed {trace.computed_parallelism})"),
        ("after sizing", f"{stage.parallelism} in {stage.sizing.waves} wave(s) on {decision.sizing.slots} slot(s)"),
        *(("note", note) for note in trace.sizing_notes),
        *((key, value) for key, value in sorted(conf.items())),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"stage {args.stage}")
    print("\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows))
    return 0


def decide(args: argparse.Namespace) -> RegionDecision:
    """The stage as a one-stage region whose inputs are files of the given sizes, decided as a run decides."""
    external = {f"input_{i}": _files(v, args.partitions) for i, v in enumerate(args.input_bytes, 1)}
    broadcast = {f"broadcast_{i}": _files(v, args.partitions) for i, v in enumerate(args.broadcast_bytes, 1)}
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
    plan = plan_stages([StageSpec.build(args.stage)])
    inputs = {args.stage: StageInputs(external={**external, **broadcast}, external_broadcast=frozenset(broadcast))}
    # A connection's defaults: AQE on, no minimum or maximum resources, executors asked for at the first job.
    settings = DecisionSettings(adaptive_query_execution=not args.no_aqe, resource_bounds=ResourceBounds())
    return decide_region(plan, plan.stages[args.stage].region, inputs, lambda _: config, profile, settings=settings)


def _files(value: str, partitions: int) -> ExternalSizes:
    total = parse_bytes(value, what="input bytes")
    parts = max(1, partitions)
    sizes = [total // parts + (1 if i < total % parts else 0) for i in range(parts)]
    return ExternalSizes("", "parquet", sizes)
