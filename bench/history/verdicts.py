"""The history experiment's verdicts against an oracle sweep: per stage the swept best, the near-best counts,
and whether a decided parallelism is within 25% of them."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from bench.lib.pipeline import PIPELINED, REPO, STAGES
from bench.lib.stats import SIGNIFICANCE, slower_p_value

RESULTS = REPO / "bench" / "results"
SWEEP_FILE = RESULTS / "compare-oracle-sweep.json"
NEAR_BEST = 0.05
"""With fewer than TESTED_SAMPLES per candidate: a candidate within 5% of the best time counts as near-best."""
TESTED_SAMPLES = 5
"""With at least this many samples per candidate, near-best is a test instead: not significantly slower than
the fastest (one-sided exact Mann-Whitney, p >= SIGNIFICANCE). A 5% margin is narrower than the spread
of repeated runs here (Q1 at SF 1: 3.98-4.89 s at one partition, 3.95-4.52 s at two), so with enough
samples the data, not a fixed margin, decide which counts are told apart from the best."""
WITHIN = 0.25
"""The goal: the decided parallelism within 25% of the swept best."""


def swept(scale: str, sweep_file: Path = SWEEP_FILE) -> dict[str, dict[str, Any]]:
    """Per stage at ``scale``: the best candidate, the near-best ones, and the median time of each candidate."""
    data = json.loads(sweep_file.read_text()) if sweep_file.exists() else {}
    if scale not in data:
        return {}
    candidates = data[scale]["candidates"]
    chosen = data[scale].get("best", {})
    samples = {
        stage: {int(p): list(t[stage]) for p, t in candidates.items() if t.get(stage)}
        for stage in STAGES
        if any(t.get(stage) for t in candidates.values())  # a sweep of some stages only (bench/stage_sweep.py)
    }
    pairs: dict[str, str] = {}
    if data[scale].get("blocking"):
        # A forward edge gives producer and consumer one count even when blocking: judge it on their summed
        # time (samples of one round pair up: both stages ran in it).
        for producer, consumer in PIPELINED:
            if producer in samples and consumer in samples:
                both = samples[producer].keys() & samples[consumer].keys()
                summed = {
                    p: [a + b for a, b in zip(samples[producer][p], samples[consumer][p], strict=True)]
                    for p in sorted(both)
                }
                samples[producer] = samples[consumer] = summed
                pairs[producer], pairs[consumer] = consumer, producer
    out: dict[str, dict[str, Any]] = {}
    for stage, timed in samples.items():
        times = {p: statistics.median(v) for p, v in timed.items()}
        fastest = min(times, key=lambda p: times[p])
        # A fused sweep's own choice (a forward pair shares its consumer's), else the fastest candidate.
        best = fastest if data[scale].get("blocking") else int(chosen.get(stage, fastest))
        if min(map(len, timed.values())) >= TESTED_SAMPLES:
            rule = f"not slower than the fastest at p < {SIGNIFICANCE} (one-sided exact Mann-Whitney)"
            near = {p for p, v in timed.items() if slower_p_value(v, timed[fastest]) >= SIGNIFICANCE}
        else:
            rule = f"within {NEAR_BEST:.0%} of the fastest median"
            near = {p for p, s in times.items() if s <= times[fastest] * (1 + NEAR_BEST)}
        if stage in pairs:
            rule += f", on the time summed with its forward partner {pairs[stage]}"
        out[stage] = {
            "best": best,
            "near_best": sorted({best} | near),
            "best_s": times[best],
            "median_s": times,
            "near_best_rule": rule,
        }
    return out


def within(parallelism: int, best: int) -> bool:
    return abs(parallelism - best) <= WITHIN * best


def row(stage: str, record: dict[str, Any], sweep: dict[str, Any] | None) -> dict[str, Any]:
    shuffled = record["shuffle_bytes"] > 0
    out = {
        "stage": stage,
        "parallelism": record["parallelism"],
        "corrected": record.get("learned_work") is not None,
        "learned_work": record.get("learned_work"),
        "learned_memory": record.get("learned_memory"),
        "consumed_bytes": record["consumed_bytes"],
        "shuffle_bytes": record["shuffle_bytes"],
        "work_ratio": record["shuffle_bytes"] / record["consumed_bytes"] if record["consumed_bytes"] else None,
        "spill_bytes": record.get("spilled_bytes", 0),
        "disk_spill_bytes": record.get("disk_spilled_bytes", 0),
        "stage_s": record.get("stage_s"),
        "shuffling": shuffled,
    }
    return with_sweep(out, sweep)


SWEEP_FIELDS = (
    "swept_best",
    "near_best",
    "within_25pct_of_best",
    "within_25pct_of_near_best",
    "near_best_rule",
    "time_vs_best",
)
"""What :func:`with_sweep` adds to a stage's row."""


def with_sweep(stage: dict[str, Any], sweep: dict[str, Any] | None) -> dict[str, Any]:
    """``stage``'s row with the swept best at its scale and whether its parallelism is within 25% of it."""
    if sweep:
        stage.update(
            swept_best=sweep["best"],
            near_best=sweep["near_best"],
            within_25pct_of_best=within(stage["parallelism"], sweep["best"]),
            within_25pct_of_near_best=any(within(stage["parallelism"], p) for p in sweep["near_best"]),
            near_best_rule=sweep.get("near_best_rule"),
        )
        # The decision's price against the best, where the sweep timed the decided count.
        at_decided = sweep.get("median_s", {}).get(stage["parallelism"])
        stage["time_vs_best"] = at_decided / sweep["best_s"] if at_decided and sweep["best_s"] else None
    return stage
