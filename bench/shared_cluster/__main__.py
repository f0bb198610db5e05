"""A shared cluster's cost: K concurrent DAG runs of mixed scales on one loopback cluster, standalone or YARN.

One ``airflow standalone`` (LocalExecutor) and one cluster serve every policy (``policies.py``), one
policy at a time, alternating the order per repeat. ``--cluster standalone`` (the default): a Spark
standalone cluster of ``--workers`` workers on 127.0.0.1; ``--cluster yarn``: the loopback YARN and HDFS
(``hadoop start``) whose ``default`` queue has the same cores and memory (``clusters.py``). Each policy
run triggers K DAG runs at once (one per scale in ``--scales``) and waits until all end. Figures: makespan
(first trigger to last run's end), each run's time (Airflow's record), from the Spark event logs of the
applications that started in that window queueing (each application's start to its first executor) and
executor core-seconds used (tasks' run times x task cpus); reserved core-seconds from the executors'
lifetimes in the event logs on standalone and from YARN's application reports (``vcoreSeconds``,
``memorySeconds``) on YARN. Each run's answers (Q1, Q3, Q5) are compared with the first run of its scale.

    python -m bench shared-cluster --scales 0.01,0.01,0.1,0.1,0.3,1 --repeats 3
    python -m bench shared-cluster --cluster yarn --policies provider,provider+queue,dynamic

Writes bench/results/shared_cluster.json and .md (shared_cluster-yarn.* on YARN; the standalone shape is
what bench/simulate validates against).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench.lib.airflow import Standalone, free_port, standalone_env
from bench.lib.answers import Rows
from bench.lib.pipeline import EXAMPLES, REPO, tables_for
from bench.lib.provider import stage_report
from bench.lib.report import command_line, write_results
from bench.lib.stats import median
from bench.lib.sweep import in_turn
from bench.shared_cluster.clusters import CLUSTERS, Sizes, Target, start_target
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
from bench.shared_cluster.runs import AnswerCheck, folder_answers, report_answers, run_seconds

POLICIES = {"dynamic": DYNAMIC_DAG_ID, "provider": PROVIDER_DAG_ID, "provider+queue": QUEUE_DAG_ID}
RUN_TIMEOUT_S = 3600
"""One policy's K runs took under 30 minutes at a load of 30; an hour means Airflow is stuck."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench shared-cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster", choices=CLUSTERS, default="standalone", help="the loopback cluster shared")
    parser.add_argument("--scales", default="0.01,0.01,0.1,0.1,0.3,1", help="one DAG run per entry, all at once")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--policies", default="dynamic,provider", help=f"some of {', '.join(POLICIES)}")
    parser.add_argument("--workers", type=int, default=2, help="on YARN: NodeManagers")
    parser.add_argument("--cores-per-worker", type=int, default=4, help="on YARN: the default queue's share")
    parser.add_argument("--memory-per-worker", default="6g", help="on YARN: the default queue's share")
    parser.add_argument("--max-executors", type=int, default=4, help="the dynamic policy's cap per application")
    parser.add_argument("--parallelism", type=int, default=16, help="Airflow's task parallelism")
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "finegrained-bench-data")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args(argv)
    args.policies = [p for p in args.policies.split(",") if p]
    unknown = sorted(set(args.policies) - set(POLICIES))
    if unknown:
        parser.error(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    return args


def results_name(cluster: str) -> str:
    """The results file's stem: the standalone runs keep the name bench/simulate validates against."""
    return "shared_cluster" if cluster == "standalone" else f"shared_cluster-{cluster}"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    tables = [tables_for(float(s), args.data) for s in args.scales.split(",")]
    work = Path(tempfile.mkdtemp(prefix="shared-cluster-"))
    shape = Shape(max_executors=args.max_executors)
    sizes = Sizes(args.workers, args.cores_per_worker, args.memory_per_worker)
    events = {p: work / f"events-{p}" for p in POLICIES}
    for folder in events.values():
        folder.mkdir()
    target = start_target(args.cluster, work / "cluster", sizes)
    results: dict[str, Any] = {
        "command": command_line("shared-cluster", argv),
        "cluster": target.describe(),
        "scales": args.scales.split(","),
        "shape": shape.__dict__,
        "work": str(work),
        "load_average_1m": [],
        "runs": {p: [] for p in args.policies},
    }
    try:
        standalone = _standalone(work, target, shape, events, args)
        try:
            standalone.start(timeout_s=900)
            for dag_id in (POLICIES[p] for p in args.policies):
                standalone.wait_parsed(dag_id)
            _run_policies(args, standalone, target, tables, events, results)
        finally:
            standalone.stop()
    finally:
        target.stop()
    _write(args, results)
    return 0


def _run_policies(
    args: argparse.Namespace,
    standalone: Standalone,
    target: Target,
    tables: list[Path],
    events: dict[str, Path],
    results: dict[str, Any],
) -> None:
    """Each policy's K runs ``--repeats`` times, each policy taking every place in turn; results after each."""
    answers = AnswerCheck()
    for repeat in range(args.repeats):
        for policy in in_turn(args.policies, repeat):
            results["load_average_1m"].append(os.getloadavg()[0])
            run = _run_policy(standalone, POLICIES[policy], tables, f"{policy}-{repeat}")
            run.update(measure(read_apps(events[policy]), run["started"], run["ended"]))
            run.update(cluster_reserved(run, target.reserved(run["started"], run["ended"])))
            run["answer_differences"] = _check_answers(answers, standalone, policy, run, events)
            results["runs"][policy].append(run)
            print(
                f"repeat {repeat} {policy}: makespan {run['makespan_s']:.0f} s, runs "
                f"{', '.join(f'{s:.0f}' if s is not None else '-' for s in run['run_s'].values())} s, "
                f"reserved {run['reserved_core_s']:.0f} core-s ({run['reserved_from']}), "
                f"used {run['used_core_s']:.0f}, answers {'same' if not run['answer_differences'] else 'DIFFER'}",
                flush=True,
            )
            _write(args, results)


def cluster_reserved(run: dict[str, Any], usage: dict[str, Any] | None) -> dict[str, Any]:
    """Reserved core-seconds from the cluster manager's account where it keeps one (YARN), the event logs'
    executor lifetimes kept beside it; else the event logs' figure stays."""
    if usage is None:
        return {"reserved_from": "event logs (executor lifetimes x cores)"}
    return {
        "reserved_from": "YARN application reports (vcoreSeconds)",
        "event_log_reserved_core_s": run["reserved_core_s"],
        "reserved_core_s": usage["reserved_core_s"],
        "reserved_mb_s": usage["reserved_mb_s"],
        "yarn": usage,
    }


def _check_answers(
    answers: AnswerCheck, standalone: Standalone, policy: str, run: dict[str, Any], events: dict[str, Path]
) -> dict[str, dict[str, list[str]]]:
    """Each run's answers against the first run of its scale; only runs with differences are listed."""
    out = {}
    for index, run_id in enumerate(run["run_s"]):
        if diffs := answers.check(f"{policy} {run_id}", index, _answer_reader(standalone, policy, run_id, events)):
            out[run_id] = diffs
    return out


def _answer_reader(
    standalone: Standalone, policy: str, run_id: str, events: dict[str, Path]
) -> Callable[[], dict[str, Rows]]:
    """The provider's answers from its report of the run; the dynamic policy's from its output folder."""
    if policy == "dynamic":
        return partial(folder_answers, events["dynamic"].parent / "dyn-out" / run_id)
    return lambda: report_answers(stage_report(POLICIES[policy], standalone.env, run_id))


def _standalone(
    work: Path, target: Target, shape: Shape, events: dict[str, Path], args: argparse.Namespace
) -> Standalone:
    home = work / "airflow-home"
    dags = home / "dags"
    dags.mkdir(parents=True)
    for name in ("tpch_pipeline.py", "tpch_queries.py"):
        (dags / name).write_text((EXAMPLES / name).read_text())
    (dags / "tpch_dynamic.py").write_text(dynamic_dag_text(target.submit(), shape, events["dynamic"], work / "dyn-out"))
    (dags / "tpch_pipeline_queue.py").write_text(queue_dag_text((EXAMPLES / "tpch_pipeline.py").read_text()))
    env = standalone_env(
        home,
        free_port(),
        {
            "AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT": provider_connection(target, shape, events["provider"]),
            f"AIRFLOW_CONN_{QUEUE_CONN_ID.upper()}": provider_connection(
                target, shape, events["provider+queue"], admission="cluster_queue"
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
    ended = time.time()
    return {
        "load_average_1m_every_5s": load,
        "started": started,
        "ended": ended,
        "run_s": run_seconds(standalone.home / "airflow.db", dag_id, run_ids),
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
    """Per policy, medians over repeats; each of the provider's policies against dynamic allocation
    (``vs_dynamic``: dynamic's figure over the policy's, above 1 where the policy does better); and the two
    admissions (``queue_vs_fit_now``: ``cluster_queue``'s figure over ``fit_now``'s, above 1 where it costs more)."""
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
    if "provider" in out and "provider+queue" in out:
        queue, fit = out["provider+queue"], out["provider"]
        out["queue_vs_fit_now"] = {
            "reserved_ratio": queue["reserved_core_s"] / max(fit["reserved_core_s"], 1e-9),
            "makespan_ratio": queue["makespan_s"] / max(fit["makespan_s"], 1e-9),
        }
    return out


def render(results: dict[str, Any]) -> str:
    cluster = results.get("cluster") or {}
    lines = [
        f"`{results['command']}`",
        "",
        f"Cluster: {cluster.get('kind', 'standalone')}; reserved core-s from "
        f"{_first_run(results).get('reserved_from', 'event logs (executor lifetimes x cores)')}.",
        "",
        "| repeat | policy | runs ok | makespan (s) | each run (s) | applications | reserved core-s | used core-s "
        "| used / reserved | queued (s, sum) | answers |",
        "|---:|---|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for policy, runs in results["runs"].items():
        for i, r in enumerate(runs):
            share = r["used_core_s"] / r["reserved_core_s"] if r["reserved_core_s"] else 0
            each = ", ".join(f"{s:.0f}" if s is not None else "-" for s in (r.get("run_s") or {}).values())
            same = "-" if "answer_differences" not in r else "differ" if r["answer_differences"] else "same"
            lines.append(
                f"| {i} | {policy} | {'yes' if r['ok'] else 'NO'} | {r['makespan_s']:.0f} | {each} | "
                f"{r['applications']} | {r['reserved_core_s']:.0f} | {r['used_core_s']:.0f} | {share:.2f} | "
                f"{r['queue_s']:.0f} | {same} |"
            )
    summary = results.get("summary") or {}
    for policy, ratio in (summary.get("vs_dynamic") or {}).items():
        lines += [
            "",
            f"Medians: dynamic allocation reserved {ratio['reserved_ratio']:.2f}x {policy}'s core-seconds; "
            f"its makespan was {ratio['makespan_ratio']:.2f}x {policy}'s.",
        ]
    if ratio := summary.get("queue_vs_fit_now"):
        lines += [
            "",
            f"Medians: provider+queue (cluster_queue) reserved {ratio['reserved_ratio']:.2f}x provider's (fit_now) "
            f"core-seconds; its makespan was {ratio['makespan_ratio']:.2f}x provider's.",
        ]
    return "\n".join(lines) + "\n"


def _first_run(results: dict[str, Any]) -> dict[str, Any]:
    return next((runs[0] for runs in results["runs"].values() if runs), {})


def _write(args: argparse.Namespace, results: dict[str, Any]) -> None:
    """Results so far, with their summary: a run cut short still leaves what it measured."""
    results["summary"] = summarize(results["runs"])
    write_results(args.out / f"{results_name(args.cluster)}.json", results, render(results), indent=1)


if __name__ == "__main__":
    raise SystemExit(main())
