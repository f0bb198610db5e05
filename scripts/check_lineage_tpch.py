"""Run the TPC-H example DAG through OpenLineage's listener and check every stage's events (a one-off check).

    .venv/bin/python scripts/check_lineage_tpch.py [WORK_FOLDER]

Sets up its own AIRFLOW_HOME (SQLite) under WORK_FOLDER (default: a new temporary folder), turns on
OpenLineage's file transport and the parent job settings for Spark, generates TPC-H at SF 0.01, runs
the DAG with ``dag.test()`` in a child Python started outside the repository (see docs/lineage.md why),
then prints one row per stage: the sources of its input datasets (an upstream stage when the dataset is
that stage's output), its output datasets, its decision, and whether its parent run is the DAG run.
Exits 1 if a stage has no COMPLETE event or another parent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RUN = """
import sys
sys.path.insert(0, {examples!r})
from pathlib import Path
from typing import Any
from tpch_data import generate
from airflow.dag_processing.dagbag import DagBag
data = Path({data!r})
generate(0.01, data)
bag = DagBag(dag_folder={dag_file!r}, safe_mode=False)
run = bag.dags["tpch_pipeline"].test(run_conf={{"data_dir": str(data)}})
print("STATE", run.state)
"""


def events(path: Path) -> list[dict[str, Any]]:
    decoder, text, found, at = json.JSONDecoder(), path.read_text(), [], 0
    while (at := len(text) - len(text[at:].lstrip())) < len(text):
        event, at = decoder.raw_decode(text, at)
        found.append(event)
    return found


def main() -> int:
    work = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="lineage-tpch-"))
    home, log = work / "home", work / "events.jsonl"
    (home / "dags").mkdir(parents=True, exist_ok=True)
    for name in ("tpch_pipeline.py", "tpch_queries.py", "tpch_data.py"):
        (home / "dags" / name).write_text((REPO / "dags_examples" / name).read_text())
    env = os.environ | {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(log), "append": True}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "tpch",
        "AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO": "True",
        "AIRFLOW__FINEGRAINED__WARM_POOL": "off",
    }
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=env, cwd=work, check=True, capture_output=True)
    code = RUN.format(
        examples=str(REPO / "dags_examples"), data=str(work / "data"), dag_file=str(home / "dags" / "tpch_pipeline.py")
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=work, capture_output=True, text=True)
    if "STATE success" not in done.stdout:
        print(done.stdout[-3000:], done.stderr[-3000:])
        return 1
    complete = {str(e["job"]["name"]): e for e in events(log) if e["eventType"] == "COMPLETE"}
    dag_run = complete["tpch_pipeline"]["run"]["runId"]
    stages = {name: event for name, event in complete.items() if name != "tpch_pipeline"}
    produced = {(o["namespace"], o["name"]): name.split(".", 1)[1] for name, e in stages.items() for o in e["outputs"]}
    print("| stage | input datasets from | outputs | parallelism | rule | parent is the DAG run |")
    print("|---|---|---|---|---|---|")
    failed = False
    for name, event in sorted(stages.items()):
        inputs = [(d["namespace"], d["name"]) for d in event["inputs"]]
        sources = [produced.get(i, f"external {i[1].rsplit('/', 1)[-1]}") for i in inputs]
        parent = event["run"]["facets"]["parent"]
        decision = event["run"]["facets"]["finegrained_decision"]
        ok = parent["run"]["runId"] == dag_run and parent["job"]["name"] == "tpch_pipeline"
        failed |= not ok
        print(
            f"| {name.split('.', 1)[1]} | {', '.join(sources) or '-'} | {len(event['outputs'])} | "
            f"{decision['parallelism']} | {decision['rule']} | {'yes' if ok else 'NO'} |"
        )
    return 1 if failed or len(stages) != 8 else 0


if __name__ == "__main__":
    raise SystemExit(main())
