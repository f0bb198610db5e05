"""One sweep: time the stages at each candidate shuffle partition count, repeatedly, and keep each stage's best.

Every experiment that alternates runs uses the orders here, so that a drifting machine load falls on every
variant (or candidate) alike.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

from bench.lib.pipeline import PIPELINED, STAGES

T = TypeVar("T")

SWEEP_CANDIDATES: Final = (1, 2, 4, 8, 16, 32)

Samples = dict[int, dict[str, list[float]]]
"""Candidate partition count -> stage -> seconds, one sample per round."""


def alternating(items: Sequence[T], repeat: int) -> list[T]:
    """``items`` forward on even repeats, backward on odd ones."""
    return list(items) if repeat % 2 == 0 else list(reversed(items))


def in_turn(items: Sequence[T], repeat: int) -> list[T]:
    """``items`` rotated by ``repeat``: each takes every position in turn."""
    shift = repeat % len(items) if items else 0
    return [*items[shift:], *items[:shift]]


def rounds(items: Sequence[T], repeats: int, *, warmup: bool = False) -> list[list[T]]:
    """The order of each round: forward, backward, forward... With ``warmup`` a first round (backward, its
    samples not kept) comes before the ``repeats`` kept ones, which then start forward."""
    first = -1 if warmup else 0
    return [alternating(items, i) for i in range(first, repeats)]


def sweep(candidates: Sequence[int], repeats: int, time_stages: Callable[[int, int], Mapping[str, float]]) -> Samples:
    """Every candidate ``repeats`` times, in alternating rounds: ``time_stages(candidate, round)`` runs the stages
    at that partition count and gives each stage's seconds."""
    samples: Samples = {}
    for i, order in enumerate(rounds(candidates, repeats)):
        for p in order:
            for stage, seconds in time_stages(p, i).items():
                samples.setdefault(p, {}).setdefault(stage, []).append(seconds)
    return samples


def best_partitions(stage_times: Mapping[int, Mapping[str, Sequence[float]]], fused: bool = True) -> dict[str, int]:
    """Per stage, the candidate whose median time is lowest (``{candidate: {stage: [seconds, ...]}}``; ties: the
    lower count).

    ``fused``: the sweep handed pipelined producers over in memory, so each takes its consumer's count."""
    best: dict[str, int] = {}
    for stage in STAGES:
        timed = [(statistics.median(t[stage]), p) for p, t in stage_times.items() if t.get(stage)]
        if timed:
            best[stage] = min(timed)[1]
    # A forward edge has one parallelism, decided by the fused query's time.
    for producer, consumer in PIPELINED if fused else ():
        if consumer in best:
            best[producer] = best[consumer]
    return best


def sweep_entry(times: Mapping[int, Mapping[str, Sequence[float]]], repeats: int, blocking: bool) -> dict[str, Any]:
    """One scale's entry in a sweep file: every sample by candidate, the fastest median per stage, how it was made."""
    ordered = {p: times[p] for p in sorted(times)}
    return {
        "candidates": {str(p): dict(t) for p, t in ordered.items()},
        "best": best_partitions(ordered, fused=not blocking),
        "repeats": repeats,
        "blocking": blocking,
    }


def load_sweep(path: Path) -> dict[str, Any]:
    """A sweep file's entries by scale; empty when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
