"""A shared cluster's cost: K concurrent DAG runs of mixed scales on one loopback standalone cluster.

One ``airflow standalone`` (LocalExecutor) and one standalone Spark cluster (``--workers`` workers on
127.0.0.1) serve every policy (``policies.py``), one policy at a time, alternating the order per
repeat. Each policy run triggers K DAG runs at once (one per scale in ``--scales``) and waits until all
end. From the Spark event logs of the applications that started in that window: makespan (first trigger
to last run's end), queueing (each application's start to its first executor), executor core-seconds
reserved (executors' lifetimes x cores) and used (tasks' run times x task cpus).

    python -m bench shared-cluster --scales 0.01,0.01,0.1,0.1,0.3,1 --repeats 3

Writes bench/results/shared_cluster.json and .md (the shape bench/simulate validates against).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.lib.airflow import Standalone, free_port, standalone_env
from bench.lib.pipeline import EXAMPLES, REPO, tables_for
from bench.lib.provider import LocalCluster, start_cluster
from bench.lib.report import command_line, write_results
from bench.lib.stats import median
from bench.lib.sweep import in_turn
from bench.shared_cluster.events import AppUsage, idle_totals, read_apps
from bench.shared_cluster.policies import (
    DYNAMIC_DAG_ID,
    PROVIDER_DAG_ID,
    QUEUE_CONN_ID,
    QUEUE_DAG_ID,
    Shape,
    dynamic_dag_text,
    provider_connection,
    queue_dag_text,
)

POLICIES = {"dynamic": DYNAMIC_DAG_ID, "provider": PROVIDER_DAG_ID, "provider+queue": QUEUE_DAG_ID}
RUN_TIMEOUT_S = 3600
"""One policy's K runs took under 30 minutes at a load of 30; an hour means Airflow is stuck."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench shared-cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="0.01,0.01,0.1,0.1,0.3,1", help="one DAG run per entry, all at once")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--policies", default="dynamic,provider", help=f"some of {', '.join(POLICIES)}")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores-per-worker", type=int, default=4)
    parser.add_argument("--memory-per-worker", default="6g")
    parser.add_argument("--max-executors", type=int, default=4, help="the dynamic policy's cap per application")
    parser.add_argument("--parallelism", type=int, default=16, help="Airflow's task parallelism")
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "finegrained-bench-data")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    policies = [p for p in args.policies.split(",") if p]
    unknown = sorted(set(policies) - set(POLICIES))
    if unknown:
        raise SystemExit(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    tables = [tables_for(float(s), args.data) for s in args.scales.split(",")]
    work = Path(tempfile.mkdtemp(prefix="shared-cluster-"))
    shape = Shape(max_executors=args.max_executors)
    results: dict[str, Any] = {
        "command": command_line("shared-cluster", argv),
        "cluster": {
            "workers": args.workers,
            "cores_per_worker": args.cores_per_worker,
            "memory": args.memory_per_worker,
        },
        "scales": args.scales.split(","),
        "shape": shape.__dict__,
        "load_average_1m": [],
        "runs": {p: [] for p in policies},
    }
    events = {p: work / f"events-{p}" for p in POLICIES}
    for folder in events.values():
        folder.mkdir()
    cluster = start_cluster(work / "cluster", args.workers, args.cores_per_worker, args.memory_per_worker)
    try:
        standalone = _standalone(work, cluster, shape, events, args)
        try:
            standalone.start(timeout_s=900)
            for dag_id in (POLICIES[p] for p in policies):
                standalone.wait_parsed(dag_id)
            _run_policies(args, standalone, policies, tables, events, results)
        finally:
            standalone.stop()
    finally:
        cluster.stop()
    _write(args.out, results)
    return 0


def _run_policies(
    args: argparse.Namespace,
    standalone: Standalone,
    policies: list[str],
    tables: list[Path],
    events: dict[str, Path],
    results: dict[str, Any],
) -> None:
    """Each policy's K runs ``--repeats`` times, each policy taking every place in turn; results after each."""
    for repeat in range(args.repeats):
        for policy in in_turn(policies, repeat):
            results["load_average_1m"].append(os.getloadavg()[0])
            run = _run_policy(standalone, POLICIES[policy], tables, f"{policy}-{repeat}")
            run.update(measure(read_apps(events[policy]), run["started"], run["ended"]))
            results["runs"][policy].append(run)
            print(
                f"repeat {repeat} {policy}: makespan {run['makespan_s']:.0f} s, "
                f"reserved {run['reserved_core_s']:.0f} core-s, used {run['used_core_s']:.0f}",
                flush=True,
            )
            _write(args.out, results)


def _standalone(
    work: Path, cluster: LocalCluster, shape: Shape, events: dict[str, Path], args: argparse.Namespace
) -> Standalone:
    home = work / "airflow-home"
    dags = home / "dags"
    dags.mkdir(parents=True)
    for name in ("tpch_pipeline.py", "tpch_queries.py"):
        (dags / name).write_text((EXAMPLES / name).read_text())
    (dags / "tpch_dynamic.py").write_text(
        dynamic_dag_text(cluster.master_url, shape, events["dynamic"], work / "dyn-out")
    )
    (dags / "tpch_pipeline_queue.py").write_text(queue_dag_text((EXAMPLES / "tpch_pipeline.py").read_text()))
    total_cores = args.workers * args.cores_per_worker
    memory = f"{int(args.memory_per_worker[:-1]) * args.workers}{args.memory_per_worker[-1]}"
    env = standalone_env(
        home,
        free_port(),
        {
            "AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT": provider_connection(
                cluster, shape, events["provider"], total_cores, memory
            ),
            f"AIRFLOW_CONN_{QUEUE_CONN_ID.upper()}": provider_connection(
                cluster, shape, events["provider+queue"], total_cores, memory, admission="cluster_queue"
            ),
            "AIRFLOW__CORE__PARALLELISM": str(args.parallelism),
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": str(args.parallelism),
            "AIRFLOW__CORE__MAX_ACTIVE_RUNS_PER_DAG": "64",
            # Its own log-server ports: another Airflow on this machine must not make its components exit.
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        },
    )
    return Standalone(home, env)


def _run_policy(standalone: Standalone, dag_id: str, tables: Sequence[Path], label: str) -> dict[str, Any]:
    """Trigger one run per tables folder at once; wait until all have ended."""
    stamp = int(time.time())
    run_ids = [f"{label}-{i}-{stamp}" for i in range(len(tables))]
    started = time.time()
    load: list[tuple[float, float]] = []
    sampling = threading.Event()

    def sample_load() -> None:
        while not sampling.wait(5):
            load.append((round(time.time() - started, 1), os.getloadavg()[0]))

    threading.Thread(target=sample_load, daemon=True).start()
    triggers = [
        threading.Thread(target=standalone.trigger, args=(dag_id, rid, json.dumps({"data_dir": str(t)})))
        for rid, t in zip(run_ids, tables, strict=True)
    ]
    for t in triggers:
        t.start()
    for t in triggers:
        t.join()
    try:
        states = standalone.wait_ended(dag_id, run_ids, RUN_TIMEOUT_S - (time.time() - started))
    finally:
        sampling.set()
    return {
        "load_average_1m_every_5s": load,
        "started": started,
        "ended": time.time(),
        "states": states,
        "ok": all(s == "success" for s in states.values()),
    }


def measure(apps: Sequence[AppUsage], started: float, ended: float) -> dict[str, Any]:
    """Makespan and core-seconds of the applications that started inside [started, ended]."""
    mine = [a for a in apps if a.start is not None and started <= a.start <= ended]
    queued = [q for a in mine if (q := a.queued_s) is not None]
    return {
        "makespan_s": ended - started,
        "applications": len(mine),
        "reserved_core_s": sum(a.reserved_core_s for a in mine),
        "used_core_s": sum(a.used_core_s for a in mine),
        "queue_s": sum(queued),
        "queue_median_s": median(queued),
        "tasks": sum(a.tasks for a in mine),
        "idle_core_s": idle_totals(mine),
        # Per application, what the simulator's validation replays: when it started and ended, every
        # executor's add / remove time and cores, its tasks.
        "apps": [
            {
                "name": a.name,
                "start": a.start,
                "end": a.end,
                "executors": sorted(a.executors.values(), key=lambda e: e[0]),
                "tasks": a.tasks,
                "used_core_s": a.used_core_s,
            }
            for a in sorted(mine, key=lambda a: a.start or 0.0)
        ],
    }


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per policy, medians over repeats; and each of the provider's policies against dynamic allocation
    (``vs_dynamic``: dynamic's figure over the policy's, above 1 where the policy does better)."""
    keys = ("makespan_s", "reserved_core_s", "used_core_s", "queue_s", "applications", "tasks")
    out: dict[str, Any] = {
        p: {k: median(r[k] for r in rs) for k in keys} | {"repeats": len(rs)} for p, rs in runs.items() if rs
    }
    if "dynamic" in out:
        out["vs_dynamic"] = {
            p: {
                "reserved_ratio": out["dynamic"]["reserved_core_s"] / max(out[p]["reserved_core_s"], 1e-9),
                "makespan_ratio": out["dynamic"]["makespan_s"] / max(out[p]["makespan_s"], 1e-9),
            }
            for p in POLICIES
            if p != "dynamic" and p in out
        }
    return out


def render(results: dict[str, Any]) -> str:
    lines = [
        f"`{results['command']}`",
        "",
        "| repeat | policy | runs ok | makespan (s) | applications | reserved core-s | used core-s | used / reserved "
        "| queued (s, sum) |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for policy, runs in results["runs"].items():
        for i, r in enumerate(runs):
            share = r["used_core_s"] / r["reserved_core_s"] if r["reserved_core_s"] else 0
            lines.append(
                f"| {i} | {policy} | {'yes' if r['ok'] else 'NO'} | {r['makespan_s']:.0f} | {r['applications']} | "
                f"{r['reserved_core_s']:.0f} | {r['used_core_s']:.0f} | {share:.2f} | {r['queue_s']:.0f} |"
            )
    for policy, ratio in ((results.get("summary") or {}).get("vs_dynamic") or {}).items():
        lines += [
            "",
            f"Medians: dynamic allocation reserved {ratio['reserved_ratio']:.2f}x {policy}'s core-seconds; "
            f"its makespan was {ratio['makespan_ratio']:.2f}x {policy}'s.",
        ]
    return "\n".join(lines) + "\n"


def _write(out: Path, results: dict[str, Any]) -> None:
    """Results so far, with their summary: a run cut short still leaves what it measured."""
    results["summary"] = summarize(results["runs"])
    write_results(out / "shared_cluster.json", results, render(results), indent=1)


if __name__ == "__main__":
    raise SystemExit(main())
