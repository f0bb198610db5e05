"""Hand-written plans (``plan_to_dict`` shape) and traces for the UI's unit tests."""

from __future__ import annotations

from typing import Any


def plan(regions: dict[str, list[str]], exchanges: list[tuple[str, str, str, str]]) -> dict[str, Any]:
    """A plan with the given regions (slot sharing group = region name) and (producer, consumer, mode, dist)."""
    return {
        "dag_id": "d",
        "regions": [{"name": n, "slot_sharing_group": n, "stages": list(m)} for n, m in regions.items()],
        "stages": {
            s: {"region": n, "slot_sharing_group": n, "memory_fraction": 1 / len(m), "forward_group": 0}
            for n, m in regions.items()
            for s in m
        },
        "exchanges": [
            {"producer": p, "consumer": c, "mode": mode, "distribution": d, "input": p} for p, c, mode, d in exchanges
        ],
    }


SINGLE = plan({"region-1": ["only"]}, [])
# A source pipelined (forward) into a join that also reads a broadcast dimension, then an aggregate.
BROADCAST_FORWARD = plan(
    {"region-1": ["dim"], "region-2": ["src", "join", "agg"]},
    [
        ("dim", "join", "blocking", "broadcast"),
        ("src", "join", "pipelined", "forward"),
        ("join", "agg", "pipelined", "forward"),
    ],
)


def trace(stage: str, consumed: dict[str, int], decided: int, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "stage": stage,
        "region": "region-1",
        "slot_sharing_group": "region-1",
        "consumed_bytes": consumed,
        "decided_parallelism": decided,
        "rule": "bytes / avg_bytes_per_task",
        "parallelism": decided,
        "waves": 1,
        "executors": 1,
        "executor_cores": 2,
        "executor_memory": 2 * 1024**3,
        "memory_overhead": 384 * 1024**2,
        "memory_fraction": 1.0,
        "capacity": {"outcome": "as_requested", "message": "running as planned"},
        "application_id": "local-1",
        "output_bytes": 1024,
        "started_at": "2026-01-01T00:00:00+00:00",
        "ended_at": "2026-01-01T00:00:12.5+00:00",
        "spark_conf": {"spark.secret.key": "***"},
    }
    base.update(extra)
    return base
