"""The ways K concurrent DAG runs use one cluster (standalone or YARN: ``clusters.py``).

- ``dynamic``: what a team sets once and forgets. Every DAG task is its own application (a
  ``spark-submit`` per stage, as a SparkSubmitOperator per task does), with Spark's dynamic allocation
  (shuffle tracking, 0 to ``max_executors`` executors of a fixed shape) and AQE on with its defaults
  (200 shuffle partitions, coalesced), as a DAG of BashOperators (generated here) wired like the example.
- ``provider``: the example DAG itself, cold: each pipelined
  region one application sized by the provider from the bytes it consumes and the cluster's free capacity.
- ``provider+queue``: the same DAG under another id and a connection with ``admission="cluster_queue"``:
  each region asks the master for its whole request and waits in the master's queue, never smaller.

Every policy runs under the same ``airflow standalone`` (LocalExecutor), on the same cluster, one at a time.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.lib.pipeline import STAGE_APP, STAGE_INPUTS, STAGES, parse_input
from bench.lib.session import spark_submit
from bench.lib.spark_metrics import event_log_conf
from bench.shared_cluster.clusters import Submit, Target

PROVIDER_DAG_ID = "tpch_pipeline"
DYNAMIC_DAG_ID = "tpch_dynamic_allocation"
QUEUE_DAG_ID = "tpch_pipeline_queue"
QUEUE_CONN_ID = "finegrained_spark_queue"


@dataclass(frozen=True)
class Shape:
    """The executors both policies may use (the provider's connection and the dynamic applications)."""

    executor_cores: int = 1
    executor_memory: str = "1g"
    driver_memory: str = "1g"
    max_executors: int = 4
    """The dynamic policy's fixed cap per application."""


def dynamic_conf(shape: Shape, events: Path) -> dict[str, str]:
    return {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",
        "spark.dynamicAllocation.minExecutors": "0",
        "spark.dynamicAllocation.maxExecutors": str(shape.max_executors),
        "spark.executor.cores": str(shape.executor_cores),
        "spark.executor.memory": shape.executor_memory,
        "spark.sql.adaptive.enabled": "true",
        "spark.pyspark.python": sys.executable,
        **event_log_conf(events),
    }


def upstream_stages(stage: str) -> list[str]:
    return [name for kind, name in map(parse_input, STAGE_INPUTS[stage].values()) if kind == "stage"]


def dynamic_dag_text(submit: Submit, shape: Shape, events: Path, out_root: Path) -> str:
    """The baseline DAG: one BashOperator per stage running its spark-submit, wired like the example DAG."""
    tasks = []
    conf = {**submit.conf, **dynamic_conf(shape, events)}
    for stage in STAGES:
        spec = {"tables": "{{ params.data_dir }}", "out": f"{out_root}/{{{{ run_id }}}}", "stages": [stage]}
        submit_argv = spark_submit(
            STAGE_APP, [json.dumps(spec)], master=submit.master, conf=conf, driver_memory=shape.driver_memory
        )
        argv = submit.command(submit_argv)
        tasks.append(f"    t[{stage!r}] = BashOperator(task_id={stage!r}, bash_command={shlex.join(argv)!r})")
    edges = [f"    t[{up!r}] >> t[{stage!r}]" for stage in STAGES for up in upstream_stages(stage)]
    return "\n".join(
        [
            '"""The shared-cluster baseline: a spark-submit per task, dynamic allocation and AQE (generated)."""',
            "import pendulum",
            "from airflow.providers.standard.operators.bash import BashOperator",
            "from airflow.sdk import DAG",
            "",
            f"with DAG(dag_id={DYNAMIC_DAG_ID!r}, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz='UTC'),"
            " catchup=False, max_active_runs=64, params={'data_dir': ''}) as dag:",
            "    t = {}",
            *tasks,
            *edges,
            "",
        ]
    )


def queue_dag_text(example: str) -> str:
    """The example DAG as ``provider+queue`` runs it: its own id, every stage on the queueing connection."""
    old = 'dag_id="tpch_pipeline",'
    if example.count(old) != 1:
        raise ValueError(f"the example DAG no longer declares {old!r} once: update queue_dag_text")
    return example.replace(
        old, f"dag_id={QUEUE_DAG_ID!r}, default_args={{'finegrained_spark_conn_id': {QUEUE_CONN_ID!r}}},"
    )


def provider_connection(target: Target, shape: Shape, events: Path, admission: str = "fit_now") -> str:
    """The finegrained_spark connection of the provider's runs: cold regions on the target's cluster, which
    may use what the standalone cluster's workers advertise (on YARN: its ``default`` queue)."""
    extra = target.connection_extra()
    return json.dumps(
        {
            "conn_type": "finegrained_spark",
            "host": target.host,
            "extra": {
                **extra,
                "warm_pool": "off",
                "total_cores": target.sizes.total_cores,
                "total_memory": target.sizes.total_memory,
                "executor_cores": shape.executor_cores,
                "executor_memory": shape.executor_memory,
                "driver_memory": shape.driver_memory,
                "capacity_poll_interval": 1,
                "admission": admission,
                # A busy scheduler (load 30 on 2 cores) took the deferring try's exit 13 to 20 s after the
                # deferral: at the default 10 s, 4 tasks failed on Airflow's stale-event race
                # (apache/airflow#72716; docs/cluster.md says to raise it on a busy scheduler).
                "trigger_min_wait": 30,
                "spark_conf": {
                    **extra.get("spark_conf", {}),
                    "spark.pyspark.python": sys.executable,
                    **event_log_conf(events),
                },
            },
        }
    )
