"""The no-regression check, side by side: the TPC-H example at two commits, on the loopback standalone cluster
(``airflow dags test``) and under ``airflow standalone`` (the embedded default), alternating.

    .venv/bin/python scripts/base_vs_head.py --base 4c63f14 [--head HEAD] [--scale 0.01] [--rounds 2]

Each commit is checked out into its own worktree and its provider is put first on PYTHONPATH (of Airflow, of
spark-submit's driver and of the executors), so the one virtualenv runs either. One standalone cluster (2
workers of 2 cores) and one data set serve both. Rounds alternate the order (base, head; then head, base; ...)
so that a machine growing busier or a cache growing warmer favours neither. Each measurement records the JVM
options it ran with (``JAVA_TOOL_OPTIONS``: unset, as users start their JVMs) and the load average before it.
Prints one JSON line per measurement, then each commit's median and the ratio head/base, and writes the lines
to ``.cache/base-vs-head/results.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# bench's harness, from this checkout (a base commit's own bench/ may predate it; its tests/ does).
from bench.lib.airflow import Standalone, free_port, standalone_env  # noqa: E402

VENV = Path(sys.executable).parent
EXAMPLES = ("tpch_pipeline.py", "tpch_queries.py", "tpch_data.py")


def checkout(rev: str, folder: Path) -> Path:
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--force", "--detach", str(folder), rev], check=True)
    return folder


def dags_home(source: Path, home: Path) -> None:
    (home / "dags").mkdir(parents=True)
    for name in EXAMPLES:
        shutil.copy(source / "dags_examples" / name, home / "dags" / name)


def on_cluster(source: Path, work: Path, cluster: dict[str, Any], data: Path) -> tuple[float, bool]:
    """Seconds of ``airflow dags test tpch_pipeline`` against the standalone cluster, and whether it succeeded."""
    home = work / "cluster"
    dags_home(source, home)
    extra = {
        "master_webui_url": cluster["webui_url"],
        "total_cores": 4,
        "total_memory": "8g",
        "executor_cores": 1,
        "executor_memory": "1g",
        "storage_root": str(home / "storage"),
        "spark_conf": {"spark.pyspark.python": str(VENV / "python"), "spark.executorEnv.PYTHONPATH": str(source)},
    }
    conn = {"conn_type": "finegrained_spark", "host": cluster["master_url"], "extra": extra}
    env = dict(os.environ, PYTHONPATH=str(source), AIRFLOW_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1")
    env |= {"AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    env["AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT"] = json.dumps(conn)
    env.pop("JAVA_TOOL_OPTIONS", None)  # as users start their JVMs
    subprocess.run([str(VENV / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True)
    started = time.monotonic()
    run = subprocess.run(
        [str(VENV / "airflow"), "dags", "test", "tpch_pipeline", "--conf", json.dumps({"data_dir": str(data)})],
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - started
    (work / "cluster.log").write_text(run.stdout + run.stderr)
    return seconds, run.returncode == 0 and "state=success" in run.stdout + run.stderr


def under_standalone(source: Path, work: Path, data: Path) -> tuple[float, str]:
    """Seconds from ``airflow dags trigger`` to the run's end under ``airflow standalone``, and its state."""
    home = work / "standalone"
    dags_home(source, home)
    env = standalone_env(home, free_port(), pythonpath=(str(source),))
    env.pop("JAVA_TOOL_OPTIONS", None)
    airflow = Standalone(home, env)
    try:
        airflow.start()
        deadline = time.monotonic() + 180
        while not airflow.dag_ready("tpch_pipeline"):
            if time.monotonic() > deadline:
                raise TimeoutError("tpch_pipeline was not parsed in 180 s")
            time.sleep(1)
        started = time.monotonic()
        airflow.cli(
            "dags",
            "trigger",
            "tpch_pipeline",
            "--run-id",
            "base-vs-head",
            "--conf",
            json.dumps({"data_dir": str(data)}),
        )
        while (state := airflow.run_state("tpch_pipeline", "base-vs-head")) not in ("success", "failed"):
            if time.monotonic() - started > 900:
                raise TimeoutError("the run did not end in 900 s")
            time.sleep(1)
        return time.monotonic() - started, str(state)
    finally:
        airflow.stop()
        # A warm pool started by the run outlives it until idle: stop it now, not during the next measurement.
        stop = [str(VENV / "python"), "-m", "airflow_provider_finegrained", "warm", "stop", "--dir"]
        from airflow_provider_finegrained.warm.folders import pool_folders  # either layout: base may predate <host>/

        for pool in pool_folders(home / "finegrained" / "storage" / "_warm"):
            subprocess.run([*stop, str(pool)], env=env, capture_output=True, check=False)


def resolved(rev: str) -> str:
    """``rev``'s short commit hash."""
    return subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", rev], check=True, capture_output=True, text=True
    ).stdout.strip()


def order(rounds: int) -> list[str]:
    """Which commit runs when: base, head; head, base; ... (each round reverses the one before)."""
    return [label for r in range(rounds) for label in (("base", "head") if r % 2 == 0 else ("head", "base"))]


def measure(label: str, rev: str, source: Path, work: Path, cluster: dict[str, Any], data: Path) -> dict[str, Any]:
    """One measurement of one commit: the cluster run, then the ``airflow standalone`` run."""
    load_before = os.getloadavg()[0]
    cluster_s, cluster_ok = on_cluster(source, work, cluster, data)
    standalone_load = os.getloadavg()[0]
    standalone_s, state = under_standalone(source, work, data)
    return {
        "label": label,
        "rev": rev,
        "java_tool_options": None,  # popped for both runs: users' JVMs start without the suite's options
        "standalone_cluster_s": round(cluster_s, 1),
        "cluster_ok": cluster_ok,
        "cluster_load_1m": round(load_before, 2),
        "airflow_standalone_s": round(standalone_s, 1),
        "airflow_standalone_state": state,
        "standalone_load_1m": round(standalone_load, 2),
    }


def summary(results: list[dict[str, Any]]) -> list[str]:
    """Each commit's median per run kind and the ratio head/base."""
    lines = []
    for key in ("standalone_cluster_s", "airflow_standalone_s"):
        medians = {
            label: statistics.median(r[key] for r in results if r["label"] == label) for label in ("base", "head")
        }
        ratio = medians["head"] / medians["base"] if medians["base"] else float("nan")
        each = {label: [r[key] for r in results if r["label"] == label] for label in ("base", "head")}
        lines.append(
            f"{key}: base {medians['base']:.1f} s {each['base']}, head {medians['head']:.1f} s {each['head']}, "
            f"head/base {ratio:.2f}"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True)
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--scale", default="0.01")
    parser.add_argument("--rounds", type=int, default=1, help="measurements of each commit, alternating (default 1)")
    args = parser.parse_args()
    out = REPO / ".cache" / "base-vs-head"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    sys.path.insert(0, str(REPO / "dags_examples"))
    from tpch_data import generate

    data = out / f"tpch-sf{args.scale}"
    generate(float(args.scale), data)
    python = [str(VENV / "python"), "-m", "airflow_provider_finegrained", "cluster"]
    subprocess.run([*python, "start", "--dir", str(out / "spark")], check=True, capture_output=True)
    # The commits as resolved now (a name such as HEAD moves on): what the results say was measured.
    revs = {label: resolved(rev) for label, rev in (("base", args.base), ("head", args.head))}
    results = []
    try:
        cluster = json.loads((out / "spark" / "cluster.json").read_text())
        sources = {label: checkout(rev, out / f"src-{label}") for label, rev in revs.items()}
        for n, label in enumerate(order(args.rounds)):
            work = out / f"{n}-{label}"
            work.mkdir()
            results.append(measure(label, revs[label], sources[label], work, cluster, data))
            print(json.dumps(results[-1]), flush=True)
    finally:
        subprocess.run([*python, "stop", "--dir", str(out / "spark")], check=False, capture_output=True)
        for label in revs:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(out / f"src-{label}")],
                           check=False, capture_output=True)  # fmt: skip
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    if {r["label"] for r in results} == {"base", "head"}:
        print("\n".join(summary(results)))
    return 0 if all(r["cluster_ok"] and r["airflow_standalone_state"] == "success" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
