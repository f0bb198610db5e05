"""The cluster simulator (bench/simulate): event loop, cost model, hand-worked runs, the planning core's decisions
(against the provider's own), validation, and the package's imports."""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained import planning
from airflow_provider_finegrained.planning import (
    DagPlan,
    ParallelismConfig,
    RegionSizing,
    StageInput,
    StageSpec,
    plan_stages,
)
from bench.simulate.__main__ import main, status
from bench.simulate.cluster import Cluster, ClusterSpec
from bench.simulate.costs import SHUFFLE_FRACTION, CostModel, fit_cost_model, least_squares
from bench.simulate.decision import StageBytes, decide_region_sizing, forward_group_peers
from bench.simulate.events import EventLoop
from bench.simulate.loopback import LoopbackModel, SharedCPU, fit_loopback, ps_rate
from bench.simulate.phases import region_inputs
from bench.simulate.policies import PolicySpec
from bench.simulate.scenarios import SharedClusterSetup, shared_cluster, validate
from bench.simulate.sim import Simulation, simulate
from bench.simulate.tpch import PIPELINED, STAGE_INPUTS
from bench.simulate.workload import DagRun, DagShape, WorkloadSpec, day_workload, tpch_run

REPO = Path(__file__).resolve().parents[2]
MiB = 2**20
GiB = 2**30
# Round numbers for hand-working: 1 s per task, 4 MiB/s per core, no warm-up, no spill at these sizes.
HAND = CostModel(task_overhead_s=1.0, bytes_per_s=4 * MiB, app_start_s=10.0, executor_start_s=2.0, warmup_s=0.0)
SCHEMA = 1 + 1 / 64  # Spark's schema job before a parquet read: one task over a 64 KiB footer at 4 MiB/s


def one_stage_run(table_bytes: float, run_id: int = 0, arrival: float = 0.0) -> DagRun:
    specs = (StageSpec("only"),)
    shape = DagShape("one", specs, plan_stages(specs), {"only": ("t",)}, {"only": 0.5})
    return DagRun(run_id, arrival, shape, {"t": table_bytes}, 1.0)


def test_event_loop_runs_in_time_order_and_ties_in_scheduling_order() -> None:
    loop = EventLoop()
    seen: list[tuple[float, str]] = []
    loop.at(5.0, lambda: seen.append((loop.now, "b")))
    loop.at(1.0, lambda: seen.append((loop.now, "a")))
    loop.at(5.0, lambda: seen.append((loop.now, "c")))
    loop.at(1.0, lambda: loop.after(0.5, lambda: seen.append((loop.now, "nested"))))
    loop.at(2.0, lambda: loop.at(0.0, lambda: seen.append((loop.now, "past is now"))))
    assert loop.run() == 5.0
    assert seen == [(1.0, "a"), (1.5, "nested"), (2.0, "past is now"), (5.0, "b"), (5.0, "c")]
    assert loop.processed == 7


@pytest.mark.parametrize(
    ("task_bytes", "memory_share", "expected"),
    [
        (0, GiB, 1.0),
        (4 * MiB, GiB, 2.0),  # 1 s overhead + 4 MiB at 4 MiB/s
        (4 * MiB, 6 * MiB, 2.0 + 0.5),  # 12 MiB in memory, 6 MiB spilled = 2 MiB on disk: +0.5 s
        (4 * MiB, 12 * MiB, 2.0),  # exactly fits
    ],
)
def test_task_seconds(task_bytes: float, memory_share: float, expected: float) -> None:
    assert HAND.task_seconds(task_bytes, memory_share) == pytest.approx(expected)


def test_least_squares_recovers_exact_coefficients_and_rejects_dependent_columns() -> None:
    xs = [(1.0, 2.0, 3.0), (0.0, 5.0, 1.0), (1.0, 1.0, 7.0), (0.0, 3.0, 2.0)]
    ys = [0.5 * a + 2 * b + 0.25 * c for a, b, c in xs]
    assert least_squares(xs, ys) == pytest.approx([0.5, 2.0, 0.25])
    with pytest.raises(ValueError, match="vary independently"):
        least_squares([(1.0, 2.0), (2.0, 4.0)], [1.0, 2.0])


def test_cost_model_rejects_bad_values_by_name() -> None:
    with pytest.raises(ValueError, match="app_start_s must be >= 0, got -1"):
        CostModel(app_start_s=-1)
    with pytest.raises(ValueError, match="bytes_per_s"):
        CostModel(bytes_per_s=0)


def test_fit_from_the_measured_runs_has_positive_parameters_and_reports_its_error() -> None:
    model = fit_cost_model()
    assert model.task_overhead_s > 0 and model.bytes_per_s > 0 and model.warmup_s > 0
    assert 10 < model.app_start_s < 40  # (fixed + AQE wall - oracle wall) / 7 extra applications
    assert model.fit["error_all"]["points"] > 50
    assert 0 <= model.fit["error_all"]["median_abs_rel_error"] < 1


@pytest.mark.parametrize(
    ("executors", "finish", "reserved"),
    [
        # 8 MiB, default parallelism 2: the schema job's one task, 2 scan tasks of 4 MiB (2 s each), then the
        # shuffle's 8 MiB x 0.26 coalesced by AQE into 2 tasks of 1.04 MiB (1.26 s each). App registered at 10,
        # executors up at 12.
        (2, 12 + SCHEMA + 2 + (1 + SHUFFLE_FRACTION), 2 * (14 + SCHEMA + (1 + SHUFFLE_FRACTION) - 10)),
        # One executor runs them one after another.
        (1, 12 + SCHEMA + 4 + 2 * (1 + SHUFFLE_FRACTION), 1 * (16 + SCHEMA + 2 * (1 + SHUFFLE_FRACTION) - 10)),
    ],
)
def test_fixed_policy_on_one_node_by_hand(executors: int, finish: float, reserved: float) -> None:
    cluster = ClusterSpec(1, 2, 8 * GiB, 1, 1 * GiB)
    result = simulate(
        cluster, HAND, PolicySpec("fixed", fixed_executors=executors, default_parallelism=2), [one_stage_run(8 * MiB)]
    )
    assert result["makespan_s"] == pytest.approx(finish, abs=1e-3)
    assert result["queue_s"]["mean"] == pytest.approx(10.0)  # the application start, then executors are free
    assert result["reserved_core_s"] == pytest.approx(reserved, abs=0.1)
    # As an event log counts them: from each executor's registration (2 s after its grant).
    assert result["added_core_s"] == pytest.approx(reserved - 2.0 * executors, abs=0.1)
    assert result["app_queue_sum_s"] == pytest.approx(2.0)
    assert result["used_core_s"] == pytest.approx(SCHEMA + 2 * 2.0 + 2 * (1 + SHUFFLE_FRACTION), abs=0.1)
    assert result["tasks"] == 5 and result["applications"] == 1
    # Reserved, split by what the executors did: starting, running tasks, idle (the second executor while
    # the schema job's one task runs).
    parts = result["reserved_breakdown_core_s"]
    assert sum(parts.values()) == pytest.approx(result["reserved_core_s"], abs=0.1)
    assert parts["starting"] == pytest.approx(2.0 * executors) and parts["idle_driver"] == 0
    assert parts["idle_no_task"] == pytest.approx((executors - 1) * SCHEMA, abs=0.1)


def test_second_run_queues_for_the_only_executor_place() -> None:
    cluster = ClusterSpec(1, 1, 8 * GiB, 1, 1 * GiB)  # one executor place in all
    runs = [one_stage_run(8 * MiB, 0), one_stage_run(8 * MiB, 1)]
    result = simulate(cluster, HAND, PolicySpec("fixed", fixed_executors=1, default_parallelism=2), runs)
    one = 2 + SCHEMA + 4 + 2 * (1 + SHUFFLE_FRACTION)  # executor start + the run's five tasks
    # Run 0 holds the place from 10 to 10 + one; run 1 registered at 10 too and gets it then.
    assert result["queue_s"]["p95"] == pytest.approx(10 + one, abs=1e-3)
    assert result["makespan_s"] == pytest.approx(10 + 2 * one, abs=1e-3)
    assert result["reserved_over_cluster"] == pytest.approx(2 * one / (10 + 2 * one), abs=1e-3)


def test_dynamic_allocation_asks_after_the_backlog_timeout_and_doubles() -> None:
    cluster = ClusterSpec(1, 16, 64 * GiB, 1, 1 * GiB)
    sim = Simulation(cluster, HAND, PolicySpec("dynamic", default_parallelism=16), [one_stage_run(64 * MiB)])
    grants: list[tuple[float, int]] = []
    granted = sim._granted

    def record(owner: object, executors: int) -> None:
        grants.append((sim.loop.now, executors))
        granted(owner, executors)

    sim.cluster._grant = record
    result = sim.run().summary()
    # The schema job's one task: one executor asked at 11 s, up at 13, the task done at 13 + SCHEMA. Then 16
    # scan tasks of 4 MiB: the backlog asks for 1 after a second, then 2, 4, 8 each further second.
    scan = 13 + SCHEMA
    assert grants[:4] == [(11.0, 1), (scan + 1, 1), (scan + 2, 2), (scan + 3, 4)]
    # By scan + 4, tasks that ended leave 6 to ask for, not 8.
    assert grants[4] == (scan + 4, 6)
    assert result["queue_s"]["mean"] == pytest.approx(11.0)


def test_provider_policy_runs_the_real_planner() -> None:
    cluster = ClusterSpec(10, 16, 64 * GiB, 4, 14 * GiB)
    sim = Simulation(cluster, HAND, PolicySpec("provider"), [one_stage_run(1 * GiB)])
    result = sim.run().summary()
    (planned,) = sim._region_plans.values()
    # decide_parallelism: 1 GiB / 64 MiB per task = 16 tasks; size_region: 16 / 4 slots = 4 executors.
    assert planned.ran_with == {"only": 16}
    assert planned.request.executors == 4 and planned.request.parallelism == 16
    # The shuffle (1 GiB x 0.26) coalesces under AQE towards 64 MiB per task: 5 of the 16 partitions.
    assert planned.phases[-1].tasks == math.ceil(GiB * SHUFFLE_FRACTION / (64 * MiB))
    assert result["capacity_outcomes"] == {"as_requested": 1} and result["planner_calls"] == 1


@pytest.mark.parametrize(
    ("policy", "grants", "queue"),
    [
        # At the first job: the schema job's task waits a second (the backlog timeout), one executor is asked
        # for at 11 and up at 13; the scan's 16 tasks then ask for 1 and 2 more, up to the 4 admitted.
        ("provider", [(11.0, 1), (13 + SCHEMA + 1, 1), (13 + SCHEMA + 2, 2)], 3.0),
        # executors_from="start": all 4 when the application registers (10), up at 12.
        ("provider+start", [(10.0, 4)], 2.0),
    ],
)
def test_provider_asks_for_executors_at_the_first_job_and_the_ledger_holds_its_places_until_then(
    policy: str, grants: list[tuple[float, int]], queue: float
) -> None:
    cluster = ClusterSpec(1, 16, 64 * GiB, 4, 14 * GiB)  # 4 executor places; the 1 GiB region plans 4 executors
    sim = Simulation(cluster, HAND, PolicySpec(policy), [one_stage_run(1 * GiB)])
    seen: list[tuple[float, int]] = []
    granted = sim._granted

    def record(owner: object, executors: int) -> None:
        seen.append((sim.loop.now, executors))
        granted(owner, executors)

    sim._granted = sim.cluster._grant = record  # type: ignore[method-assign]  # kept places, then the cluster's
    free: dict[float, int] = {}
    for at in (12.0, 13.5):
        sim.loop.at(at, lambda at=at: free.setdefault(at, sim.cluster.free))
    result = sim.run().summary()
    assert seen == [(pytest.approx(t), n) for t, n in grants]
    assert result["app_queue_sum_s"] == pytest.approx(queue)
    if policy == "provider":
        # Before its first executor, the ledger keeps all 4 places; once it is added, the 3 not yet asked for are
        # free for other regions (and for its own ramp).
        assert free == {12.0: 0, 13.5: 3}
    else:
        assert free == {12.0: 0, 13.5: 0}


def test_provider_waits_for_capacity_and_runs_smaller_when_part_is_free() -> None:
    cluster = ClusterSpec(2, 4, 64 * GiB, 4, 14 * GiB)  # two executor places of 4 cores
    runs = [one_stage_run(64 * MiB, 0, 0.0), one_stage_run(1 * GiB, 1, 0.5), one_stage_run(1 * GiB, 2, 0.6)]
    result = simulate(cluster, HAND, PolicySpec("provider"), runs)
    # The small run gets its one executor; the next asks for both places and runs on the one left; the
    # last finds none free, waits, and runs smaller on the place the small run gives back.
    assert result["capacity_outcomes"] == {"as_requested": 1, "reduced": 2, "wait": 1}
    assert result["queue_s"]["p95"] > 30  # the waiting run's first executor came after the small run ended


def test_cluster_grants_in_order_and_in_part() -> None:
    grants: list[tuple[str, int]] = []
    cluster = Cluster(ClusterSpec(1, 4, 64 * GiB, 1, 1 * GiB), lambda owner, n: grants.append((str(owner), n)))
    cluster.request("a", 3)
    cluster.request("b", 3)
    assert grants == [("a", 3), ("b", 1)] and cluster.waiting == 1
    cluster.release(3)
    assert grants[-1] == ("b", 2) and cluster.free == 1 and cluster.waiting == 0
    with pytest.raises(ValueError, match="cannot release 4"):
        cluster.release(4)


def test_cluster_spec_rejects_an_executor_that_fits_no_node() -> None:
    with pytest.raises(ValueError, match="does not fit a node of 2 cores"):
        ClusterSpec(1, 2, 8 * GiB, 4, 1 * GiB)


def test_workload_is_deterministic_and_spans_four_decades() -> None:
    spec = WorkloadSpec(runs=400, window_s=3600.0)
    a, b = day_workload(spec, 3), day_workload(spec, 3)
    assert [(r.arrival, r.scale, r.shape.name) for r in a] == [(r.arrival, r.scale, r.shape.name) for r in b]
    scales = [r.scale for r in a]
    assert min(scales) == pytest.approx(0.01) and max(scales) == pytest.approx(100.0)
    assert all(0 <= r.arrival <= 3600 for r in a) and [r.arrival for r in a] == sorted(r.arrival for r in a)
    assert {r.shape.name == "tpch" for r in a} == {True, False}


def test_validate_compares_every_figure_within_20_percent(tmp_path: Path) -> None:
    setup = SharedClusterSetup(scales=(0.01, 0.1))
    simulated = shared_cluster(setup, HAND, ["provider", "dynamic"])
    measured: dict[str, Any] = {
        "setup": {"scales": [0.01, 0.1]},
        "policies": {
            name: {
                "makespan_s": r["makespan_s"],
                "reserved_core_s": r["added_core_s"] * (1.3 if name == "dynamic" else 1.1),
                "used_core_s": r["used_core_s"],
                "queue_s": r["app_queue_sum_s"],
            }
            for name, r in simulated.items()
        },
    }
    path = tmp_path / "shared_cluster.json"
    path.write_text(json.dumps(measured))
    outcome = validate(path, HAND)
    assert outcome["validated"] is False
    assert outcome["comparison"]["provider"]["reserved_core_s"]["within"] is True
    assert outcome["comparison"]["dynamic"]["reserved_core_s"]["ratio"] == pytest.approx(1 / 1.3, abs=1e-3)
    assert outcome["comparison"]["dynamic"]["reserved_core_s"]["within"] is False
    assert all(row["within"] for row in outcome["comparison"]["provider"].values())
    # The shape python -m bench.shared_cluster writes: medians per policy under "summary".
    path.write_text(
        json.dumps(
            {
                "cluster": {"workers": 2, "cores_per_worker": 4, "memory": "6g"},
                "scales": ["0.01", "0.1"],
                "shape": {"executor_cores": 1, "executor_memory": "1g", "driver_memory": "1g", "max_executors": 4},
                "summary": {"provider": measured["policies"]["provider"] | {"repeats": 3}, "reserved_ratio": 1.5},
            }
        )
    )
    assert validate(path, HAND)["validated"] is True
    path.write_text(json.dumps({"setup": {"workers": 2, "nodes": 3}, "policies": {"provider": {}}}))
    with pytest.raises(ValueError, match=r"unknown keys \['nodes'\]"):
        validate(path, HAND)
    with pytest.raises(FileNotFoundError, match="item 2 writes them"):
        validate(tmp_path / "missing.json", HAND)


def test_command_writes_unvalidated_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["all", "--runs", "12", "--nodes", "4", "--window-s", "3600", "--saturated-window-s", "60"]
    args += ["--streams", "1,2", "--horizon-s", "600", "--closed-runs", "60"]
    assert main([*args, "--out", str(tmp_path), "--measured", str(tmp_path / "none.json")]) == 0
    results = json.loads((tmp_path / "simulate.json").read_text())
    assert results["validated"] is False and results["status"].startswith("NOT YET VALIDATED")
    assert set(results["day"]["policies"]) == {
        "fixed", "dynamic", "provider", "provider+start", "provider+held", "provider+grow", "provider+queue"
    }  # fmt: skip
    assert results["day"]["policies"]["provider"]["runs"] == 12
    assert "NOT YET VALIDATED" in (tmp_path / "simulate.md").read_text()
    assert "throughput_provider_over_fixed" in results["saturated"]["ratios"]
    closed = results["closed_loop"]["streams"]
    assert set(closed) == {"1", "2"} and set(closed["2"]["policies"]) == {
        "fixed", "dynamic", "provider", "provider+start", "provider+queue"
    }  # fmt: skip
    assert closed["2"]["policies"]["provider"]["makespan_s"] == 600
    assert "### 2 streams" in (tmp_path / "simulate.md").read_text()
    assert "NOT YET VALIDATED" in capsys.readouterr().out


def test_simulator_imports_neither_airflow_nor_spark() -> None:
    code = (
        "import sys, bench.simulate.__main__\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark', 'py4j'))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("cores", "threads", "background", "rate"),
    [
        (2, 0, 0, 1.0),
        (2, 2, 0, 1.0),  # as many threads as cores: each runs at full speed
        (2, 8, 0, 0.25),  # 8 advertised slots busy on 2 physical cores
        (2, 2, 2, 0.5),  # the machine's other load takes its share
        (2, 1, 0.5, 1.0),  # never faster than one core
    ],
)
def test_processor_sharing_rate(cores: float, threads: float, background: float, rate: float) -> None:
    assert ps_rate(cores, threads, background) == pytest.approx(rate)


def test_processor_sharing_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="cores > 0"):
        ps_rate(0, 1, 0)
    with pytest.raises(ValueError, match="background_load must be >= 0, got -1"):
        LoopbackModel(background_load=-1)
    with pytest.raises(ValueError, match="physical_cores must be > 0"):
        LoopbackModel(physical_cores=0)


@pytest.mark.parametrize(
    ("background", "b_ends", "a_ends"),
    [
        # 4 threads on 2 cores: 0.5 each; B (2 CPU s) ends at 4; A's last 2 CPU s alone at full speed: 6.
        (0.0, 4.0, 6.0),
        # With 2 threads of other load: 1/3 each until 6, then A's 2 threads + 2 others: 0.5 each, 4 s more.
        (2.0, 6.0, 10.0),
    ],
)
def test_shared_cpu_by_hand(background: float, b_ends: float, a_ends: float) -> None:
    loop = EventLoop()
    cpu = SharedCPU(loop, cores=2, background=background)
    ended: dict[str, float] = {}
    cpu.run(4.0, 2, lambda: ended.setdefault("a", loop.now))
    cpu.run(2.0, 2, lambda: ended.setdefault("b", loop.now))
    loop.run()
    assert ended == {"b": pytest.approx(b_ends), "a": pytest.approx(a_ends)}
    assert cpu.cpu_s == pytest.approx(4 * 2 + 2 * 2) and cpu.threads == 0


def test_loopback_fit_takes_an_applications_start_from_its_measurement(tmp_path: Path) -> None:
    (tmp_path / "app-start.json").write_text(
        json.dumps({"cpu_s": [20.0, 22.0, 21.0], "median_cpu_s": 21.0, "median_wall_s": 13.4, "master": "local[1]",
                    "context_share": [0.4, 0.42, 0.41], "median_context_share": 0.41,
                    "executor": {"cpu_s": [6.0, 7.0], "median_cpu_s": 6.5, "median_wall_s": 9.0}})
    )  # fmt: skip
    (tmp_path / "compare-runs.csv").write_text(
        "variant,ok,scale,applications,process_cpu_s,task_cpu_s\nb,True,0.1,8,400,100\nb,False,0.1,8,9999,0\n"
    )
    model = fit_loopback(tmp_path, driver_stage_s=1.5)
    assert (model.app_cpu_s, model.context_share, model.executor_cpu_s) == (21.0, 0.41, 6.5)
    # Recorded, not charged before the first job: (400 - 100) / 8 - 1.5, the failed run left out.
    assert model.fit["app_life_cpu_per_scale_s"] == {"0.1": 36.0}
    assert "executor_cpu_s" not in model.fit["assumed"] and "airflow_task_cpu_s" in model.fit["assumed"]
    with pytest.raises(FileNotFoundError, match=r"python -m bench app-start"):
        fit_loopback(tmp_path / "none")
    # The measurement in the repository: a trivial application's start costs 15 to 30 CPU s here.
    assert 15 < fit_loopback(REPO / "bench" / "results").app_cpu_s < 30


@pytest.mark.parametrize(
    ("context_share", "queue"),
    [
        (None, 1.0),  # queueing counted from registration (the end of the 4 s start): the executor's start
        (0.5, 3.0),  # from the SparkContext's beginning, half-way through the start: 2 s of it, then 1
    ],
)
def test_loopback_tasks_share_the_physical_cores_and_count_as_wall_time(
    context_share: float | None, queue: float
) -> None:
    # One node of 2 advertised cores on ONE physical core; Airflow: 2 s scheduler delay, 1 CPU s task start.
    cluster = ClusterSpec(1, 2, 8 * GiB, 2, 1 * GiB)
    loopback = LoopbackModel(
        physical_cores=1, app_cpu_s=4, app_threads=1, executor_cpu_s=1, executor_warmup_cpu_s=0,
        airflow_task_cpu_s=1, scheduler_delay_s=2, context_share=context_share,
    )  # fmt: skip
    policy = PolicySpec("fixed", fixed_executors=1, default_parallelism=2)
    result = simulate(cluster, HAND, policy, [one_stage_run(8 * MiB)], loopback)
    scan, reduce = 2.0, 1 + SHUFFLE_FRACTION  # CPU s per task (2 tasks each)
    # 2 + 1 (Airflow) + 4 (application) + 1 (executor): tasks from 8, the schema job's alone at full speed;
    # two at a time on one core take twice as long.
    assert result["makespan_s"] == pytest.approx(8 + SCHEMA + 2 * scan + 2 * reduce, abs=1e-3)
    assert result["used_core_s"] == pytest.approx(SCHEMA + 2 * (2 * scan) + 2 * (2 * reduce), abs=0.05)  # (rounded)
    assert result["app_queue_sum_s"] == pytest.approx(queue)


def two_stage_region_run() -> DagRun:
    """Stage a (1 GiB, 16 tasks on 4 executors) feeding b in memory (pipelined): b runs one small task."""
    specs = (StageSpec("a"), StageSpec("b", inputs=(StageInput("a", mode="pipelined"),)))
    shape = DagShape("two", specs, plan_stages(specs), {"a": ("t",)}, {"a": 0.01, "b": 0.5})
    return DagRun(0, 0.0, shape, {"t": 1 * GiB}, 1.0)


def test_provider_release_gives_back_executors_its_narrow_stage_leaves_idle() -> None:
    cluster = ClusterSpec(10, 16, 64 * GiB, 4, 14 * GiB)
    run = [two_stage_region_run()]
    held = simulate(cluster, HAND, PolicySpec("provider+held"), run)
    # 1.2 s: longer than a's schema job (1.02 s, three executors idle meanwhile), shorter than b's task (1.67 s).
    released = simulate(cluster, HAND, PolicySpec("provider+start", idle_timeout_s=1.2), run)
    assert held["applications"] == released["applications"] == 1
    assert released["makespan_s"] == pytest.approx(held["makespan_s"])
    # b's one task runs on one of the two executors holding a's shuffle output (5 map tasks, 4 slots each); the
    # other two hold none and go after 1.2 s idle, their 4 cores each for the rest of b's task.
    b_task = 1 + 0.01 * GiB * SHUFFLE_FRACTION / (4 * MiB)
    assert released["reserved_core_s"] == pytest.approx(held["reserved_core_s"] - 2 * 4 * (b_task - 1.2), abs=0.1)
    assert released["reserved_breakdown_core_s"]["idle_no_task"] < held["reserved_breakdown_core_s"]["idle_no_task"]


@pytest.mark.parametrize(
    ("variant", "admitted", "outcomes"),
    [
        # Run 1 asked for both places (all there are) and was admitted with the 1 left; growing, it takes the place
        # run 0 gives back.
        ("provider+grow", [[2, 1]], {"as_requested": 1, "reduced": 1}),
        # admission="cluster_queue": run 1 asks the cluster for both, gets one at its first job and the other once
        # run 0 gives it back.
        ("provider+queue", [[2, 2]], {"queued": 2}),
    ],
)
def test_provider_variants_that_get_more_than_the_free_places_a_region_was_admitted_on(
    variant: str, admitted: list[list[int]], outcomes: dict[str, int]
) -> None:
    cluster = ClusterSpec(2, 4, 64 * GiB, 4, 14 * GiB)  # two executor places of 4 cores
    runs = [one_stage_run(64 * MiB, 0, 0.0), one_stage_run(1 * GiB, 1, 0.5)]
    gated = Simulation(cluster, HAND, PolicySpec("provider"), runs)
    other = Simulation(cluster, HAND, PolicySpec(variant, idle_timeout_s=0.5), runs)
    kept, changed = gated.run().summary(), other.run().summary()
    # The provider runs run 1 on the 1 place left, for good; either variant ends it sooner.
    assert [r[1:3] for r in gated.metrics.admissions[1]] == [[2, 1]]
    assert [r[1:3] for r in other.metrics.admissions[1]] == admitted
    assert changed["capacity_outcomes"] == outcomes
    assert changed["makespan_s"] < kept["makespan_s"]


def test_validate_on_the_loopback_model_fits_three_figures_and_holds_out_the_rest(tmp_path: Path) -> None:
    setup = SharedClusterSetup(scales=(0.01, 0.1))
    truth = LoopbackModel(background_load=1.0, executor_warmup_cpu_s=2.0, driver_job_cpu_s=0.5)
    simulated = shared_cluster(setup, HAND, ["dynamic", "provider"], truth)
    measured = {
        "setup": {"scales": [0.01, 0.1]},
        "policies": {
            name: {"makespan_s": r["makespan_s"], "reserved_core_s": r["added_core_s"], "used_core_s": r["used_core_s"],
                   "queue_s": r["app_queue_sum_s"] * (1.5 if name == "provider" else 1.0)}
            for name, r in simulated.items()
        },
    }  # fmt: skip
    path = tmp_path / "shared_cluster.json"
    path.write_text(json.dumps(measured))
    grid = {"backgrounds": (0.0, 1.0, 3.0), "warmups": (0.0, 2.0, 6.0), "driver_jobs": (0.0, 0.5, 2.0)}
    outcome = validate(path, HAND, LoopbackModel(), grid=grid)
    fit = outcome["fit"]
    assert (fit["background_load"], fit["executor_warmup_cpu_s"], fit["driver_job_cpu_s"]) == (1.0, 2.0, 0.5)
    rows = outcome["comparison"]
    assert rows["dynamic"]["reserved_core_s"]["fitted"] and not rows["dynamic"]["queue_s"]["fitted"]
    assert rows["dynamic"]["queue_s"]["ratio"] == pytest.approx(1.0)
    assert rows["provider"]["reserved_core_s"]["ratio"] == pytest.approx(1.0)
    assert rows["provider"]["queue_s"]["ratio"] == pytest.approx(1 / 1.5) and not rows["provider"]["queue_s"]["within"]
    assert outcome["validated"] is False and outcome["held_out_within"] is False


def test_validate_simulates_a_measured_policy_as_it_ran(tmp_path: Path) -> None:
    setup = SharedClusterSetup(scales=(0.01, 0.1))
    at_start = shared_cluster(setup, HAND, ["provider+start"])["provider+start"]
    figures = {"makespan_s": at_start["makespan_s"], "reserved_core_s": at_start["added_core_s"],
               "used_core_s": at_start["used_core_s"], "queue_s": at_start["app_queue_sum_s"]}  # fmt: skip
    path = tmp_path / "shared_cluster.json"
    path.write_text(json.dumps({"setup": {"scales": [0.01, 0.1]}, "policies": {"provider": figures}}))
    # A provider run from before executors were asked for at the first job: simulated as provider+start.
    outcome = validate(path, HAND, simulate_as={"provider": "provider+start"})
    assert outcome["simulated_as"] == {"provider": "provider+start"}
    assert all(row["ratio"] == pytest.approx(1.0) for row in outcome["comparison"]["provider"].values())
    # As today's provider, the same figures differ (its executors come at the first job).
    assert validate(path, HAND)["comparison"]["provider"]["queue_s"]["ratio"] != pytest.approx(1.0)
    with pytest.raises(ValueError, match="simulated policy must be one of"):
        validate(path, HAND, simulate_as={"provider": "provider+release"})
    with pytest.raises(ValueError, match=r"simulate_as \['dynamic'\]: .* measured only \['provider'\]"):
        validate(path, HAND, simulate_as={"dynamic": "provider"})


def test_provider_waits_instead_of_running_below_a_share_of_its_request() -> None:
    cluster = ClusterSpec(2, 4, 64 * GiB, 4, 14 * GiB)  # two executor places of 4 cores
    runs = [one_stage_run(64 * MiB, 0, 0.0), one_stage_run(1 * GiB, 1, 0.5)]
    as_is = Simulation(cluster, HAND, PolicySpec("provider"), runs)
    waits = Simulation(cluster, HAND, PolicySpec("provider", min_admit_share=0.6), runs)
    as_is.run()
    waits.run()
    # Run 1 asks for both places while run 0 holds one: the provider runs it on 1 of 2; with a 60% floor it
    # waits for both.
    assert [r[1:3] for r in as_is.metrics.admissions[1]] == [[2, 1]]
    assert [r[1:3] for r in waits.metrics.admissions[1]] == [[2, 2]]
    assert waits.metrics.capacity_outcomes["wait"] == 1
    with pytest.raises(ValueError, match=r"min_admit_share must be in \[0, 1\], got 1.5"):
        PolicySpec("provider", min_admit_share=1.5)


def test_status_names_every_figure_missed() -> None:
    row = {"ratio": 1.49, "within": False, "fitted": False}
    checks = [
        {"measured_file": "r/shared_cluster.json", "comparison": {"provider": {"queue_s": row | {"within": True}}}},
        {"measured_file": "r/earlier/shared_cluster.json", "comparison": {"provider": {"queue_s": row}}},
    ]
    assert status(checks[:1]).startswith("validated against item 2's measured runs (1 file(s)")
    assert status(checks) == (
        "NOT VALIDATED: against 2 measured file(s), the simulator misses by more than 20%: "
        "earlier/provider queue_s 1.49x; no figure it misses may be quoted"
    )


def test_closed_loop_streams_start_the_next_run_when_one_ends_and_count_to_the_horizon() -> None:
    cluster = ClusterSpec(1, 1, 8 * GiB, 1, 1 * GiB)  # one executor place in all
    runs = [one_stage_run(8 * MiB, i) for i in range(6)]
    one = 10 + 2 + SCHEMA + 4 + 2 * (1 + SHUFFLE_FRACTION)  # start, executor start, the run's five tasks
    # One stream: run 1 starts when run 0 ends, run 2 when run 1 ends; run 2 registers (and is granted the place)
    # at 2 x one + 10, 2.5 s before the horizon.
    horizon = 2 * one + 12.5
    policy = PolicySpec("fixed", fixed_executors=1, default_parallelism=2)
    result = simulate(cluster, HAND, policy, runs, streams=1, horizon_s=horizon)
    assert result["runs"] == 2 and result["makespan_s"] == pytest.approx(horizon)
    assert result["throughput_runs_per_h"] == pytest.approx(2 / horizon * 3600, abs=1e-3)
    assert result["run_latency_s"]["p95"] == pytest.approx(one, abs=1e-3)
    # Each finished run held the place from its registration to its end; run 2's is counted up to the horizon.
    assert result["reserved_core_s"] == pytest.approx(2 * (one - 10) + 2.5, abs=0.1)
    # Two streams share the one place: run 1 waits for run 0's executor (its latency 2 x one - 10); from then on
    # one run's start overlaps the other's tasks, and a run ends every one - 10 s: 4 by the horizon.
    both = simulate(cluster, HAND, policy, runs, streams=2, horizon_s=horizon)
    assert both["runs"] == 4 and both["run_latency_s"]["p95"] == pytest.approx(2 * one - 10, abs=1e-3)
    with pytest.raises(ValueError, match="need both streams >= 1 and horizon_s > 0"):
        Simulation(cluster, HAND, policy, runs, streams=1)
    with pytest.raises(RuntimeError, match="a stream had no run left to start at 59 s"):  # 3 x one
        simulate(cluster, HAND, policy, runs[:3], streams=1, horizon_s=10 * one)


SIMULATOR = REPO / "bench" / "simulate"


def test_the_simulator_imports_only_the_planning_cores_public_names_and_no_other_benchmark() -> None:
    """Its own package: of the provider only ``from airflow_provider_finegrained.planning import <__all__>``, of
    bench only bench.simulate itself (other experiments' measurements are read as files), nothing dynamic."""
    public = set(planning.__all__)
    wrong = []
    modules = sorted(SIMULATOR.rglob("*.py"))
    for path in modules:
        where = path.relative_to(REPO)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level > 1:
                    wrong.append(f"{where}:{node.lineno} imports {'.' * node.level}{module}: outside the package")
                    continue
                names = [] if node.level else [module]  # a relative import of one level stays in the package
                if module == "airflow_provider_finegrained.planning" and not node.level:
                    private = sorted(a.name for a in node.names if a.name not in public)
                    if private:
                        wrong.append(f"{where}:{node.lineno} imports {private}, not in planning.__all__")
                    continue
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__":
                wrong.append(f"{where}:{node.lineno} calls __import__")
                continue
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top == "importlib":
                    wrong.append(f"{where}:{node.lineno} imports {name}")
                elif top == "airflow_provider_finegrained":
                    wrong.append(f"{where}:{node.lineno} imports {name}: only planning's public names")
                elif top == "bench" and not (name == "bench.simulate" or name.startswith("bench.simulate.")):
                    wrong.append(f"{where}:{node.lineno} imports {name}: no other benchmark")
    assert len(modules) >= 10
    assert wrong == []


def provider_sizing(
    plan: DagPlan, region: str, inputs: Mapping[str, StageBytes], config: ParallelismConfig, sim: Simulation,
    ran_with: Mapping[str, int],
) -> RegionSizing:  # fmt: skip
    """The provider's own decide_region over the same inputs (the simulator may not import it; its test may)."""
    from airflow_provider_finegrained.contract import OutputRecord
    from airflow_provider_finegrained.execution.decision import ExternalSizes, StageInputs, decide_region

    producers = {e.input_name: e.producer for name in plan.regions[region] for e in plan.stages[name].inputs}
    provider_inputs = {
        name: StageInputs(
            upstream={
                i: OutputRecord(producers[i], "", "parquet", list(sizes), 0, 1) for i, sizes in b.upstream.items()
            },
            external={t: ExternalSizes(t, "parquet", list(sizes)) for t, sizes in b.external.items()},
            upstream_parallelism=dict(b.upstream_parallelism),
        )
        for name, b in inputs.items()
    }
    return decide_region(plan, region, provider_inputs, lambda _: config, sim.profile, ran_with=ran_with).sizing


def test_the_decision_model_sizes_every_region_as_the_providers_decide_region() -> None:
    """bench.simulate.decision against execution.decision.decide_region, on the simulated DAG shapes and scales:
    the same application and the same sizing of every stage (its notes aside), forward-group followers included."""
    spec = WorkloadSpec(runs=400, window_s=3600.0, scale_steps=6)
    runs = day_workload(spec, 1)
    shapes = {r.shape.name: r.shape for r in runs}
    assert "tpch" in shapes and len(shapes) > 5
    scales = (0.01, 0.3, 3.0)
    checked = followed = 0
    for cluster in (ClusterSpec(1000, 16, 64 * GiB, 4, 14 * GiB), ClusterSpec(2, 4, 16 * GiB, 2, 4 * GiB)):
        sim = Simulation(cluster, HAND, PolicySpec("provider"), runs[:1])
        for shape in shapes.values():
            for scale in scales:
                tables = {t: spec.generated_table_bytes_sf1 * scale for ts in shape.external.values() for t in ts}
                run = tpch_run(0, 0.0, scale) if shape.name == "tpch" else DagRun(0, 0.0, shape, tables, scale)
                outputs = run.stage_bytes()[1]
                ran_with: dict[str, int] = {}
                for region, members in shape.plan.regions.items():  # in topological order
                    peers = {p: ran_with[p] for p in forward_group_peers(shape.plan, region) if p in ran_with}
                    inputs = region_inputs(run, outputs, ran_with, members)
                    ours = decide_region_sizing(shape.plan, region, inputs, sim.config, sim.profile, ran_with=peers)
                    theirs = provider_sizing(shape.plan, region, inputs, sim.config, sim, peers)
                    assert replace(ours, stages={}) == replace(theirs, stages={}), (shape.name, scale, region)
                    assert {n: replace(s, notes=()) for n, s in ours.stages.items()} == {
                        n: replace(s, notes=()) for n, s in theirs.stages.items()
                    }, (shape.name, scale, region)
                    ran_with.update({n: ours.stages[n].parallelism for n in members})
                    checked += 1
                    groups = [shape.plan.stages[n].forward_group for n in members]
                    followed += len(groups) - len(set(groups))
    assert checked > 300 and followed > 0  # forward groups with followers in one region were among them


def test_the_tpch_shape_is_the_example_dags() -> None:
    """bench.simulate.tpch's stages, inputs and pipelined edges as dags_examples/tpch_pipeline.py declares them."""
    tree = ast.parse((REPO / "dags_examples" / "tpch_pipeline.py").read_text())

    def is_call(node: ast.AST, name: str) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name

    def keyword(call: ast.Call, name: str) -> Any:
        return next(k.value for k in call.keywords if k.arg == name)

    variables = {
        n.targets[0].id: keyword(n.value, "task_id").value
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and is_call(n.value, "Stage")
    }
    declared: dict[str, dict[str, str]] = {}
    pipelined = set()
    for call in (n for n in ast.walk(tree) if is_call(n, "Stage")):
        stage = keyword(call, "task_id").value
        declared[stage] = {}
        for key, value in zip(keyword(call, "inputs").keys, keyword(call, "inputs").values, strict=True):
            if is_call(value, "table"):
                declared[stage][key.value] = f"table:{value.args[0].value}"
                continue
            if is_call(value, "Input"):
                if any(k.arg == "mode" and k.value.value == "pipelined" for k in value.keywords):
                    pipelined.add((variables[value.args[0].id], stage))
                value = value.args[0]
            declared[stage][key.value] = f"stage:{variables[value.id]}"
    assert list(declared) == list(STAGE_INPUTS) and declared == STAGE_INPUTS
    assert pipelined == PIPELINED
