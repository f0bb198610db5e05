"""Learning a stage's expansion from its past runs: cases worked out by hand."""

from __future__ import annotations

import pytest

from airflow_provider_finegrained.planning.expansion import LearnedExpansion
from airflow_provider_finegrained.planning.history import Learning, StageRun, learn_expansion


def run(
    minute: int,
    shuffle: int,
    consumed: int = 1000,
    memory: int = 0,
    *,
    ok: bool = True,
    runs_in: str | None = None,
    learned_work: float | None = None,
    learned_memory: float | None = None,
    spilled: int = 0,
) -> StageRun:
    return StageRun(
        run_id=f"run-{minute}",
        ended_at=f"2026-11-24T06:{minute:02d}:00+00:00",
        succeeded=ok,
        consumed_bytes=consumed,
        shuffle_bytes=shuffle,
        memory_bytes=memory,
        runs_in=runs_in,
        learned_work=learned_work,
        learned_memory=learned_memory,
        spilled_bytes=spilled,
    )


CASES = [
    # (what, runs, min_runs, expected work, expected memory, expected runs) - None work: nothing learned
    ("three alike runs: their median", [run(1, 3000), run(2, 3100), run(3, 3200)], 3, 3.1, None, 3),
    ("fewer usable runs than needed", [run(1, 3000), run(2, 3100)], 3, None, None, 0),
    ("a failed run is left out", [run(1, 2000), run(2, 2200), run(3, 50_000, ok=False), run(4, 2100)], 3, 2.1, None, 3),
    ("one outlier of five moves the median little", [run(i, s) for i, s in enumerate([3000, 3000, 3100, 90, 2900])],
     3, 3.0, None, 5),
    ("clamped to 64 above", [run(i, 100_000) for i in range(3)], 3, 64.0, None, 3),
    ("less shuffle than bytes on disk: below 1", [run(i, 20) for i in range(3)], 3, 0.02, None, 3),
    ("clamped to 1/64 below (three digits)", [run(i, 1) for i in range(3)], 3, 0.0156, None, 3),
    ("ran inside its consumer's jobs: ignored", [run(1, 300), run(2, 300), run(3, 0, runs_in="consumer")], 3, None,
     None, 0),
    ("shuffled nothing: ignored", [run(1, 300), run(2, 0), run(3, 300)], 3, None, None, 0),
    ("consumed nothing: ignored", [run(1, 300), run(2, 300, consumed=0), run(3, 300)], 3, None, None, 0),
    ("N=2 is enough for two", [run(1, 4000), run(2, 6000)], 2, 5.0, None, 2),
    ("at most 2x down from the factor the last run used", [run(1, 1000), run(2, 1000), run(3, 1000, learned_work=8.0)],
     3, 4.0, None, 3),
    ("a factor used below the floor comes back to it at once", [run(1, 1), run(2, 1), run(3, 1, learned_work=0.001)],
     3, 0.0156, None, 3),
    ("at most 2x down below 1 too", [run(1, 100), run(2, 100), run(3, 100, learned_work=1.5)], 3, 0.75, None, 3),
    ("never below 1/64, whatever the step allows", [run(1, 1), run(2, 1), run(3, 1, learned_work=0.02)], 3, 0.0156,
     None, 3),
    ("at most 2x up from the factor the last run used", [run(1, 3100), run(2, 3100), run(3, 3100, learned_work=1.0)],
     3, 2.0, None, 3),
    ("the step bound follows the newest run, not the oldest", [run(1, 2000, learned_work=32.0), run(2, 2000),
     run(3, 2000)], 3, 2.0, None, 3),
    ("the last 10 usable runs only", [run(i, 5000) for i in range(2)] + [run(i, 1500) for i in range(2, 12)], 3, 1.5,
     None, 10),
    ("memory: peak plus spill per consumed byte, median", [run(1, 500, memory=3000, spilled=900),
     run(2, 500, memory=3100), run(3, 500, memory=9000)], 3, 0.5, 3.1, 3),
    ("memory may be below 1", [run(i, 500, memory=200, spilled=1) for i in range(3)], 3, 0.5, 0.2, 3),
    ("memory: no run spilled, not learned (fixed allocations)", [run(i, 500, memory=9000) for i in range(3)], 3,
     0.5, None, 3),
    ("memory: kept while the newest run decided with it", [run(1, 500, memory=9000), run(2, 500, memory=9000),
     run(3, 500, memory=9000, learned_memory=9.0)], 3, 0.5, 9.0, 3),
    ("memory needs min_runs runs that reported it", [run(1, 500, memory=3000), run(2, 500), run(3, 500)], 3, 0.5,
     None, 3),
    ("memory steps at most 2x too", [run(1, 500, memory=9000), run(2, 500, memory=9000),
     run(3, 500, memory=9000, learned_memory=3.0)], 3, 0.5, 6.0, 3),
]  # fmt: skip


@pytest.mark.parametrize(("what", "runs", "min_runs", "work", "memory", "used"), CASES, ids=[c[0] for c in CASES])
def test_learned_expansion(
    what: str, runs: list[StageRun], min_runs: int, work: float | None, memory: float | None, used: int
) -> None:
    learning = learn_expansion(list(reversed(runs)), min_runs)  # order does not matter: ended_at does
    if work is None:
        assert learning.expansion is None
    else:
        assert learning.expansion == LearnedExpansion(work=work, runs=used, memory=memory)


def test_the_note_says_why_nothing_was_learned_and_what_was() -> None:
    assert learn_expansion([run(1, 300), run(2, 0, runs_in="c")], 3) == Learning(
        None, "1 usable run(s) of the 3 needed; 1 ignored"
    )
    learned = learn_expansion([run(1, 3100), run(2, 3100), run(3, 3000), run(4, 3200), run(5, 3100)], 3)
    assert learned.note == "median of 5 run(s): bytes x learned expansion 3.1 (5 runs) / avg_bytes_per_task"


@pytest.mark.parametrize(
    ("run_", "reason"),
    [
        (run(1, 300, ok=False), "the run failed"),
        (run(1, 0, runs_in="q3_shipping"), "it ran in memory inside q3_shipping's Spark jobs"),
        (run(1, 300, consumed=0), "it consumed no bytes"),
        (run(1, 0), "it shuffled nothing"),
        (run(1, 300), None),
    ],
)
def test_why_a_run_is_ignored(run_: StageRun, reason: str | None) -> None:
    assert run_.ignored_because() == reason


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_min_runs_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ValueError, match=rf"history_min_runs must be an integer >= 1, got {bad!r}"):
        learn_expansion([], bad)  # type: ignore[arg-type]


def test_a_record_round_trips_and_ignores_a_newer_writers_fields() -> None:
    record = run(1, 300, memory=900, learned_work=0.3)
    assert StageRun.from_dict({**record.to_dict(), "from_the_future": 1}) == record
