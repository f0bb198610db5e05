"""``python -m rehearsal ACTION``: Airflow, Spark and storage on six hosts of one machine.

``up`` makes the hosts (:mod:`rehearsal.hosts`) and starts every service (:mod:`rehearsal.services`);
``run`` runs the DAGs there and checks their answers; ``trial`` runs fault trials (:mod:`rehearsal.trials`);
``load`` raises concurrent runs until something gives (:mod:`rehearsal.load`); ``summary`` prints the results
tables of docs/rehearsal.md (:mod:`rehearsal.summary`); ``down`` stops everything and removes the hosts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rehearsal import hosts, services
from rehearsal.load import load
from rehearsal.runs import ROOTS, run_dags, set_connection_extra, use_root
from rehearsal.summary import load_table, trials_table
from rehearsal.trials import TRIALS

STATE = Path("/var/tmp/fg-rehearsal")
RESULTS = Path(__file__).resolve().parent / "results"
"""Every trial's outcome, one JSON line each (kept in git: docs/rehearsal.md summarises them)."""
DAGS = [
    services.REPO / "rehearsal" / "dags" / "spread_region.py",
    services.REPO / "rehearsal" / "dags" / "cut_region.py",
    services.REPO / "rehearsal" / "dags" / "lose_worker.py",
    services.REPO / "dags_examples" / "tpch_pipeline.py",
    services.REPO / "dags_examples" / "tpch_queries.py",
]


def up(state: Path, names: str, hdfs: bool = True) -> dict[str, str]:
    """Every host and service; what a client needs to reach them (the UI, the master, the storage).

    ``hdfs`` False leaves HDFS out (the S3 root alone: CI's short version).
    """
    from airflow_provider_finegrained.spark.hadoop_cluster import bundled_hadoop_version, resolve_classpath
    from airflow_provider_finegrained.storage.classpath import s3a_jars

    # Resolved here, before the hosts (which reach no registry): the S3A jars and HDFS's classpath.
    jars = s3a_jars(bundled_hadoop_version())
    if hdfs:
        resolve_classpath(bundled_hadoop_version())
    all_hosts = hosts.hosts(state, names)
    hosts.up(all_hosts)
    (state / "secrets.json").unlink(missing_ok=True)
    plan = services.layout(all_hosts, state)
    services.start_postgres(plan)
    services.start_redis(plan)
    master = services.start_spark(plan)
    endpoint = services.start_s3(plan)
    hdfs_root = services.start_hdfs(plan, all_hosts) if hdfs else ""
    services.start_airflow_control(plan, DAGS)
    services.start_airflow_workers(plan, DAGS)
    services.add_connections(plan, master, endpoint, jars, f"s3://{services.BUCKET}/root")
    services.wait_for(
        "both Celery workers",
        lambda: {f"celery@{w.hostname}" for w in plan.workers} <= services.workers_online(plan),
        180,
    )
    reach = {"ui": f"http://{plan.control.address}:8080", "master": master, "s3": endpoint, "hdfs": hdfs_root}
    (state / "reach.json").write_text(json.dumps(reach, indent=1))
    return reach


def _load(plan: services.Layout, dag_id: str, levels: list[int]) -> int:
    results = load(plan, dag_id, levels)
    RESULTS.mkdir(parents=True, exist_ok=True)
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with open(RESULTS / "load.jsonl", "a") as out:
        out.writelines(json.dumps({"at": at, **result}) + "\n" for result in results)
    print(json.dumps(results, indent=1))
    return 0 if not results[-1]["failed"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rehearsal", description=__doc__)
    parser.add_argument("action", choices=["up", "run", "trial", "load", "summary", "status", "down"])
    parser.add_argument("--state", type=Path, default=STATE, help=f"the rehearsal's folder (default {STATE})")
    parser.add_argument("--hosts", default="abcdef", help="host letters; 'abcde' leaves out the second Spark worker")
    parser.add_argument(
        "--dags", default="spread_region,tpch_pipeline", help="DAG ids for run (comma-separated); load: the first"
    )
    # For run and load: how the default connection runs regions.
    parser.add_argument("--deploy-mode", choices=["client", "cluster"], help="the default connection's deploy mode")
    parser.add_argument("--warm-pool", choices=["off", "auto"], help="the default connection's warm_pool")
    parser.add_argument("--root", choices=ROOTS, default="s3", help="the storage root (default s3)")
    parser.add_argument("--trials", default=",".join(TRIALS), help=f"trials to run, of {', '.join(TRIALS)}")
    parser.add_argument("--runs", type=int, default=1, help="how many times each trial runs, for trial")
    parser.add_argument("--levels", default="1,2,4,8", help="for load: concurrent runs per level (comma-separated)")
    args = parser.parse_args(argv)
    args.state.mkdir(parents=True, exist_ok=True)
    all_hosts = hosts.hosts(args.state, args.hosts)
    if args.action == "up":
        print(json.dumps(up(args.state, args.hosts), indent=1))
    elif args.action in ("run", "load"):
        plan = services.layout(all_hosts, args.state)
        changes = {k: v for k, v in (("deploy_mode", args.deploy_mode), ("warm_pool", args.warm_pool)) if v}
        if changes:
            set_connection_extra(plan, "finegrained_spark_default", **changes)
        use_root(plan, args.root)
        if args.action == "load":
            return _load(plan, args.dags.split(",")[0], [int(n) for n in args.levels.split(",")])
        results = run_dags(plan, args.dags.split(","), args.root)
        print(json.dumps(results, indent=1))
        return 0 if all(r["ok"] for r in results) else 1
    elif args.action == "trial":
        plan = services.layout(all_hosts, args.state)
        names = args.trials.split(",")
        unknown = sorted(set(names) - set(TRIALS))
        if unknown:
            parser.error(f"--trials: unknown {', '.join(unknown)}; allowed: {', '.join(TRIALS)}")
        # The trials' DAGs name their deploy mode by connection: the default one is client mode, cold, on S3.
        set_connection_extra(plan, "finegrained_spark_default", deploy_mode="client", warm_pool="off")
        use_root(plan, "s3")
        RESULTS.mkdir(parents=True, exist_ok=True)
        outcomes = []
        for name in [name for _ in range(args.runs) for name in names]:
            try:
                outcome = TRIALS[name](plan)
            except Exception as exc:
                outcome = {"trial": name, "state": "error", "error": f"{type(exc).__name__}: {exc}", "survived": False}
            outcomes.append(outcome)
            with open(RESULTS / "trials.jsonl", "a") as out:  # as each ends: a later one may take long
                out.write(json.dumps({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **outcome}) + "\n")
        for name in names:
            mine = [o for o in outcomes if o["trial"] == name]
            print(f"{name}: {sum(o['survived'] for o in mine)} of {len(mine)} survived")
        return 0 if all(o["survived"] for o in outcomes) else 1
    elif args.action == "summary":
        print(trials_table(RESULTS) + "\n\n" + load_table(RESULTS))
    elif args.action == "status":
        print(json.dumps({h.hostname: len(h.pids()) for h in all_hosts}, indent=1))
    else:
        hosts.down(all_hosts)
        left = hosts.leftovers()
        print("down: nothing left" if not left else f"left behind: {left}")
        return 1 if left else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
