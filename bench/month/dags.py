"""The month's DAGs, one per policy, as a team would write them: a run per day, its data the day's landing folder.

Every DAG reads the day's tables from ``<days>/{{ ds }}`` (the harness lands each day's TPC-H tables there,
a link to the scale the pattern gives that date) and runs one DAG run at a time (``max_active_runs=1``).
They declare no schedule: the harness triggers each logical date in turn, the policies alternating, so the
scheduler never runs the three policies' months at once (a ``@daily`` schedule with catchup would).
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
from collections.abc import Mapping
from typing import Final

from bench.lib.pipeline import STAGE_APP, STAGES
from bench.lib.session import spark_submit
from bench.shared_cluster.policies import upstream_stages

DAG_IDS: Final = {"hand": "tpch_month_hand", "dynamic": "tpch_month_dynamic", "provider": "tpch_month_provider"}
PROVIDER_CONN_ID: Final = "finegrained_spark_month"
DAY_FOLDER: Final = "{{ ds }}"
RETRIES: Final = '"retries": 1, "retry_delay": pendulum.duration(seconds=10)'
"""Every policy's tasks retry once, as teams set them: Spark 4.3's client-mode driver on YARN sometimes fails in its
SparkContext's start (``ConcurrentModificationException`` while SparkUI attaches its handlers and the
ApplicationMaster's web filter arrives), the hand-sized policy's as the provider's (which submits such a region
again itself, in the same try)."""


def _start(start: dt.date) -> str:
    return f"pendulum.datetime({start.year}, {start.month}, {start.day}, tz='UTC')"


def submit_dag_text(
    dag_id: str, master: str, conf: Mapping[str, str], days: str, out_root: str, start: dt.date, driver_memory: str
) -> str:
    """A spark-submit per stage (BashOperator), wired like the example DAG; ``days`` and ``out_root`` are URIs or
    paths the cluster's drivers and executors read (``file:`` ones on YARN, whose default file system is HDFS)."""
    tasks = []
    for stage in STAGES:
        spec = {"tables": f"{days}/{DAY_FOLDER}", "out": f"{out_root}/{{{{ run_id }}}}", "stages": [stage]}
        name = f"{dag_id}.{stage}"
        argv = spark_submit(
            STAGE_APP, [json.dumps(spec)], master=master, conf=conf, name=name, driver_memory=driver_memory
        )
        tasks.append(f"    t[{stage!r}] = BashOperator(task_id={stage!r}, bash_command={shlex.join(argv)!r})")
    edges = [f"    t[{up!r}] >> t[{stage!r}]" for stage in STAGES for up in upstream_stages(stage)]
    return "\n".join(
        [
            f'"""The month\'s {dag_id}: a spark-submit per stage, the day\'s tables by logical date (generated)."""',
            "import pendulum",
            "from airflow.providers.standard.operators.bash import BashOperator",
            "from airflow.sdk import DAG",
            "",
            f"with DAG(dag_id={dag_id!r}, schedule=None, start_date={_start(start)}, catchup=False,"
            f" max_active_runs=1, default_args={{{RETRIES}}}) as dag:",
            "    t = {}",
            *tasks,
            *edges,
            "",
        ]
    )


REPLACEMENTS: Final = (
    (
        'dag_id="tpch_pipeline",',
        'dag_id={dag_id!r}, default_args={{"finegrained_spark_conn_id": {conn!r}, ' + RETRIES + "}},",
    ),
    ("catchup=False,", "catchup=False, max_active_runs=1,"),
    ('start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),', "start_date={start},"),
    ('path="{{ params.data_dir }}/" + name', 'path={days!r} + "/{{{{ ds }}}}/" + name'),
)
"""What the provider's copy of the example DAG changes, each found exactly once in the example."""


def provider_dag_text(example: str, days: str, start: dt.date, dag_id: str = DAG_IDS["provider"]) -> str:
    """The example DAG as the month runs it: its own id and connection, one run at a time, the day's tables."""
    values = {"dag_id": dag_id, "conn": PROVIDER_CONN_ID, "start": _start(start), "days": days}
    text = example
    for old, new in REPLACEMENTS:
        if text.count(old) != 1:
            raise ValueError(f"the example DAG no longer has {old!r} once: update bench/month/dags.py")
        text = text.replace(old, new.format(**values))
    return text
