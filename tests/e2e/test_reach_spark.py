"""Every decision reaches Spark: read back from Spark itself, end to end on local Spark, AQE off and on.

One region (one application, to keep the cost to one spark-submit): ``src`` reads parquet files and hands its
aggregation over in memory, pipelined and forward, to two consumers, ``top_off`` (AQE off through its own
``spark_conf``) and ``top_on`` (AQE on, the connection's setting). ``src``'s scan and aggregation run inside each
consumer's Spark jobs. Inside each stage function the stage records what its Spark session really holds
(every ``spark.sql.*`` setting, the application's SparkConf and the driver JVM's heap); Spark's status API (the
stage's task report) gives the task count of every Spark stage it ran. Both are compared with what the
provider decided.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.cli.report import stage_results
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = pytest.mark.slow

P = 6
"""The source's decided parallelism: its files' bytes over avg_bytes_per_task (3 even waves on 2 slots)."""

DAG_FILE = """
import json
import pendulum
from airflow.sdk import DAG
from pyspark.sql import functions as F
from airflow_provider_finegrained.dags.declaration import ExternalDataset, Input
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

RECORD_DIR = {record_dir!r}
EVENTS = ExternalDataset(path={events!r})


def record(spark, name):
    # What this stage's session holds when the provider calls it, and what the application started with.
    conf = spark.sparkContext.getConf()
    seen = {{
        "session": {{k: v for k, v in spark.conf.getAll.items() if k.startswith("spark.sql.")}},
        "app": {{k: conf.get(k, None) for k in ("spark.driver.memory", "spark.memory.fraction", "spark.master")}},
        "heap": spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory(),
    }}
    with open(f"{{RECORD_DIR}}/{{name}}.json", "w") as out:
        json.dump(seen, out)


def src(spark, events, name):
    record(spark, name)
    return events.groupBy((events.id % 600).alias("k")).count()


def top(spark, rows, name):
    record(spark, name)
    # Grouped by the aggregate's value too, so Spark cannot merge the two aggregations into one.
    return rows.groupBy(((rows.k + rows["count"]) % 7).alias("bucket")).agg(F.sum("count").alias("n"))


with DAG("reach_spark", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    a = Stage(task_id="src", python_callable=src, op_kwargs={{"name": "src"}}, inputs={{"events": EVENTS}},
              finegrained_spark_conn_id="fg_reach")
    for aqe in ("off", "on"):
        Stage(task_id=f"top_{{aqe}}", python_callable=top, op_kwargs={{"name": f"top_{{aqe}}"}},
              finegrained_spark_conn_id="fg_reach",
              inputs={{"rows": Input(a, mode="pipelined", distribution="forward")}},
              spark_conf={{"spark.sql.adaptive.enabled": "false"}} if aqe == "off" else {{}})
"""


def _events(folder: Path) -> int:
    """Six parquet files of unequal sizes (6,000 ids in all); their total bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    start = 0
    for i, rows in enumerate((400, 600, 800, 1000, 1400, 1800)):
        pq.write_table(pa.table({"id": list(range(start, start + rows))}), folder / f"part-{i}.parquet")
        start += rows
    return sum(f.stat().st_size for f in folder.iterdir())


def _connection(avg_bytes_per_task: int) -> str:
    extra = {"adaptive_query_execution": True, "avg_bytes_per_task": avg_bytes_per_task, "warm_pool": "off"}
    return json.dumps({"conn_type": "finegrained_spark", "host": "local[2]", "extra": extra})


def _ran(trace: dict[str, Any]) -> list[int]:
    """Task counts of the Spark stages the stage's jobs ran (skipped ones excluded), from Spark's status API."""
    return [s["tasks"] for s in (trace["spark_tasks"] or {}).get("spark_stages", []) if s["status"] != "SKIPPED"]


def test_decisions_read_back_from_spark(airflow_db: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    total = _events(tmp_path / "events")
    per_task = -(-total // P)  # so that ceil(total / per_task) is P
    monkeypatch.setenv("AIRFLOW_CONN_FG_REACH", _connection(per_task))
    text = DAG_FILE.format(record_dir=str(tmp_path), events=str(tmp_path / "events"))
    path = write_dag_file("reach_spark.py", text)
    run = load_dag(path, "reach_spark").test()
    assert run.state == "success", [(ti.task_id, ti.state) for ti in run.get_task_instances()]
    _, results = stage_results("reach_spark", run.run_id)
    traces = {name: r["trace"] for name, r in results.items()}
    seen = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in results}
    src = traces["src"]
    assert src["rule"] == "bytes / avg_bytes_per_task"
    assert {t["region"] for t in traces.values()} == {src["region"]}

    for name, trace in traces.items():
        assert trace["parallelism"] == P  # one forward group
        # Each stage's session held exactly the spark.sql settings the provider decided for it.
        decided = {k: v for k, v in trace["spark_conf"].items() if k.startswith("spark.sql.")}
        assert {k: seen[name]["session"].get(k) for k in decided} == decided, name
        assert seen[name]["session"]["spark.sql.shuffle.partitions"] == str(P)
        assert seen[name]["session"]["spark.sql.adaptive.enabled"] == ("false" if name == "top_off" else "true")
        # The application's settings, from SparkConf; the driver JVM really got the decided heap.
        app = seen[name]["app"]
        assert app["spark.master"] == "local[2]"
        assert app["spark.driver.memory"] == trace["spark_conf"]["spark.driver.memory"]
        assert app["spark.driver.memory"] == f"{trace['executor_memory'] // 2**20}m"
        assert float(app["spark.memory.fraction"]) == pytest.approx(trace["spark_memory_fraction"], abs=0.005)
        assert 0.8 * trace["executor_memory"] <= seen[name]["heap"] <= trace["executor_memory"]
    # The advisory size is the bytes per task (lower, at least a quarter of it, when src's files are skewed).
    assert (
        per_task // 4 <= int(seen["top_on"]["session"]["spark.sql.adaptive.advisoryPartitionSizeInBytes"]) <= per_task
    )

    # src hands its output over in memory, and the trace says whose jobs run its plan: both consumers'.
    assert src["runs_in"] in ("top_off", "top_on")
    assert traces["top_off"]["runs_in"] is None and traces["top_on"]["runs_in"] is None
    note = next(n for n in src["sizing_notes"] if n.startswith("in-memory handover"))
    assert "'top_off'" in note and "'top_on'" in note and "once per consumer" in note
    # Under src's own job group ran at most the reader's one-task look at the files when its input was
    # loaded; its scan and aggregation ran in each consumer's jobs (below).
    assert len(_ran(src)) <= 1 and P not in _ran(src), _ran(src)
    scan_settings = src["input_balance"]["settings"]
    for aqe in ("off", "on"):
        top = traces[f"top_{aqe}"]
        # src's scan runs in top's jobs, so top's session carried src's balanced scan settings.
        assert {k: seen[f"top_{aqe}"]["session"][k] for k in scan_settings} == scan_settings
        assert any("with 'src''s scan settings" in n for n in top["sizing_notes"])
        # top's jobs ran src's scan and aggregation and its own: the scan, then two shuffles (src's, top's).
        tasks = _ran(top)
        assert len(tasks) == 3, tasks
        scan, shuffles = tasks[0], tasks[1:]
        assert scan == src["input_balance"]["predicted_tasks"]
        if aqe == "off":
            assert shuffles == [P, P]  # the decided parallelism, exactly
        else:
            # An upper bound: AQE coalesced these few kilobytes towards the advisory size, below P.
            assert all(n <= P for n in shuffles) and min(shuffles) < P
        assert results[f"top_{aqe}"]["output"]["rows"] == 7
