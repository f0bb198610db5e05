"""The cold-start experiment's pure parts: the order of its runs, its per-region figures and its summary."""

from __future__ import annotations

from typing import Any

from bench.cold_start import VARIANTS, connection, order, regions, summary
from bench.lib.provider import LocalCluster


def test_rounds_alternate_the_order() -> None:
    assert order(["a", "b", "c"], 3) == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]


def test_each_variant_changes_only_its_part() -> None:
    cluster = LocalCluster(None, "spark://127.0.0.1:7077", "http://127.0.0.1:8080")  # type: ignore[arg-type]
    extras = {name: connection(cluster, "/s", v, 2)["extra"] for name, v in VARIANTS.items()}  # type: ignore[arg-type]
    common = {"class_archive", "jit", "executors_from", "spark_conf"}
    base = {k: v for k, v in extras["provider"].items() if k not in common}
    assert all({k: v for k, v in e.items() if k not in common} == base for e in extras.values())
    assert extras["none"] | {"spark_conf": None} == {
        **base,
        "class_archive": "off",
        "jit": "tiered",
        "executors_from": "first_job",
        "spark_conf": None,
    }
    assert "spark.executorEnv.JAVA_TOOL_OPTIONS" in extras["suite"]["spark_conf"]
    assert not any("JAVA_TOOL_OPTIONS" in k for n, e in extras.items() if n != "suite" for k in e["spark_conf"])


def trace(leader: str, read: dict[str, int], executors: int, submit: float, jit: str) -> dict[str, Any]:
    return {"trace": {"region_leader": leader, "consumed_bytes": read, "executors": executors, "executor_cores": 1,
                      "timings": {"submit_s": submit, "start_s": 5.0}, "jvm": {"jit": jit}}}  # fmt: skip


def test_regions_sum_what_their_stages_read_per_slot() -> None:
    stages = {
        "join": trace("join", {"a": 600, "b": 400}, 2, 30.0, "c1"),
        "order": trace("join", {"join": 100}, 2, 30.0, "c1"),
        "solo": trace("solo", {}, 0, 10.0, "tiered"),
    }
    got = regions(stages)
    assert got["join"]["read_bytes"] == 1100 and got["join"]["read_per_slot"] == 550
    assert got["join"]["stages"] == ["join", "order"] and got["join"]["submit_s"] == 30.0
    assert got["solo"]["read_per_slot"] == 0 and got["solo"]["slots"] == 1


def test_the_summary_compares_with_the_suite_and_the_first_answers() -> None:
    same: dict[str, Any] = {"q1": [{"l_returnflag": "A", "l_linestatus": "F", "n": 1}], "q3": [], "q5": []}
    other = {**same, "q1": [{"l_returnflag": "A", "l_linestatus": "F", "n": 2}]}
    runs = [
        {"variant": "suite", "seconds": 90.0, "ok": True, "answers": same},
        {"variant": "provider", "seconds": 99.0, "ok": True, "answers": same},
        {"variant": "provider", "seconds": 95.0, "ok": True, "answers": other},
        {"variant": "none", "seconds": 50.0, "ok": False, "answers": {}},
    ]
    got = summary(runs, ["suite", "provider", "none"])
    assert got["provider"] == {"median_s": 97.0, "runs": [99.0, 95.0], "failed": 0, "answers_differ": 1,
                               "over_suite": 1.08}  # fmt: skip
    assert got["none"]["failed"] == 1 and got["none"]["median_s"] is None and got["none"]["over_suite"] is None
