"""Running DAGs on the rehearsal's hosts and checking what they did: state, where each task ran, the answers.

The driver (this machine's own namespace) triggers through host A's CLI, reads run state from the
metadata database on host A, and reads answers from the storage root on host D (S3 or HDFS) as any client
would.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rehearsal.hosts import HostError
from rehearsal.services import (
    BUCKET,
    HADOOP_CONF,
    REPO,
    S3_KEY,
    S3_SECRET,
    VENV_BIN,
    Layout,
    hdfs_reach,
    wait_for,
)

TPCH_SCALE = 0.01


def psql(plan: Layout, sql: str) -> list[list[str]]:
    """Rows of ``sql`` against the metadata database, as tab-separated text."""
    argv = ["runuser", "-u", "postgres", "--", "psql", "-h", "/tmp", "-d", "airflow", "-At", "-F", "\t", "-c", sql]
    out = plan.control.run(argv).stdout
    return [line.split("\t") for line in out.splitlines() if line]


ROOTS = ("s3", "hdfs")


def s3_options(plan: Layout) -> dict[str, Any]:
    """fsspec options for the S3 root, from the driver (by address: it has no /etc/hosts entry)."""
    endpoint = f"http://{plan.storage.address}:5000"
    return {"key": S3_KEY, "secret": S3_SECRET, "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}


def storage_options(plan: Layout, location: str) -> dict[str, Any]:
    """The provider's storage options for ``location`` (``s3://`` or ``hdfs://``), from the driver."""
    return {"webhdfs_url": hdfs_reach(plan)[1]} if location.startswith("hdfs://") else s3_options(plan)


def root_base(plan: Layout, kind: str) -> str:
    """Where a storage ``kind``'s data lives: the S3 bucket or HDFS's root folder."""
    return f"s3://{BUCKET}" if kind == "s3" else hdfs_reach(plan)[0].rstrip("/")


def use_root(plan: Layout, kind: str) -> None:
    """Point both provider connections at the ``kind`` storage root (``s3`` or ``hdfs``), as an operator would."""
    root = f"{root_base(plan, kind)}/root"
    for conn_id in ("finegrained_spark_default", "finegrained_spark_cluster"):
        if kind == "s3":
            set_connection_extra(plan, conn_id, storage_root=root, storage_conn_id="lake")
        else:
            hdfs = {"storage_root": root, "hadoop_conf_dir": HADOOP_CONF}
            set_connection_extra(plan, conn_id, drop=("storage_conn_id",), **hdfs)


def api(plan: Layout, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """Airflow's REST API on host A (``/api/v2``), as any client reaches it; the answer's JSON."""
    base = f"http://{plan.control.address}:8080"
    with urllib.request.urlopen(base + "/auth/token", timeout=30) as response:
        token = json.load(response)["access_token"]  # SimpleAuthManager with every user an admin
    request = urllib.request.Request(
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def trigger(plan: Layout, dag_id: str, run_id: str, conf: dict[str, Any] | None = None) -> None:
    wait_for(
        f"{dag_id} parsed on host A", lambda: bool(psql(plan, f"select 1 from dag where dag_id = '{dag_id}'")), 180
    )
    api(plan, "PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
    api(
        plan, "POST", f"/api/v2/dags/{dag_id}/dagRuns", {"dag_run_id": run_id, "logical_date": None, "conf": conf or {}}
    )


def set_connection_extra(plan: Layout, conn_id: str, drop: Sequence[str] = (), **changes: Any) -> None:
    """Change some extras of a connection (removing those in ``drop``) through the REST API, as in the UI."""
    conn = api(plan, "GET", f"/api/v2/connections/{conn_id}")
    extra = {k: v for k, v in {**json.loads(conn["extra"] or "{}"), **changes}.items() if k not in drop}
    body = {"connection_id": conn_id, "conn_type": conn["conn_type"], "extra": json.dumps(extra)}
    api(plan, "PATCH", f"/api/v2/connections/{conn_id}?update_mask=extra", body)


def run_state(plan: Layout, dag_id: str, run_id: str) -> str:
    rows = psql(plan, f"select state from dag_run where dag_id = '{dag_id}' and run_id = '{run_id}'")
    return rows[0][0] if rows else "absent"


def wait_run(plan: Layout, dag_id: str, run_id: str, timeout: float = 1200) -> str:
    deadline = time.monotonic() + timeout
    while (state := run_state(plan, dag_id, run_id)) not in ("success", "failed"):
        if time.monotonic() > deadline:
            return f"timeout ({state})"
        time.sleep(3)
    return state


def task_hosts(plan: Layout, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
    """Per task: its state, the host its last try ran on, and its try number."""
    rows = psql(
        plan,
        f"select task_id, state, hostname, try_number from task_instance where dag_id = '{dag_id}' "
        f"and run_id = '{run_id}' order by task_id",
    )
    return {task: {"state": state, "host": host, "try": int(tries)} for task, state, host, tries in rows}


def stage_results(plan: Layout, dag_id: str, run_id: str) -> dict[str, Any]:
    """The provider's own report of the run (traces, outputs, plans), read on host A."""
    a = plan.control
    argv = [
        str(VENV_BIN / "python"),
        "-m",
        "airflow_provider_finegrained",
        "report",
        dag_id,
        "--run-id",
        run_id,
        "--json",
    ]
    out = a.run(argv, env=plan.airflow_env()).stdout
    stages: dict[str, Any] = json.loads(out[out.index("{") :])["stages"]
    return stages


def read_output(plan: Layout, location: str) -> pa.Table:
    """A stage's committed output, exactly the files its marker lists."""
    from airflow_provider_finegrained.runtime.output import read_committed
    from airflow_provider_finegrained.storage import filesystem

    options = storage_options(plan, location)
    committed = read_committed(location, storage_options=options)
    tables = []
    for uri in committed.uris:
        with filesystem.open_file(uri, "rb", options) as handle:
            tables.append(pq.read_table(handle))
    return pa.concat_tables(tables)


def upload_tpch(plan: Layout, kind: str, scale: float = TPCH_SCALE) -> tuple[Path, str]:
    """TPC-H tables generated here and put on the ``kind`` storage; the local copy (for the answers) and the URI."""
    from airflow_provider_finegrained.storage import filesystem

    sys.path.insert(0, str(REPO / "dags_examples"))
    from tpch_data import generate

    local = plan.control.state / f"tpch-sf{scale}"
    generate(scale, local)
    uri = f"{root_base(plan, kind)}/tpch-sf{scale}"
    options = storage_options(plan, uri)
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        filesystem.upload_file(str(path), f"{uri}/{path.relative_to(local).as_posix()}", options)
    return local, uri


def check_spread_region(plan: Layout, run_id: str) -> dict[str, Any]:
    stages = stage_results(plan, "spread_region", run_id)
    totals = read_output(plan, stages["totals"]["output"]["path"]).to_pylist()
    expected: dict[int, int] = {}
    for n in range(0, 200_000, 2):
        expected[n % 10] = expected.get(n % 10, 0) + n
    got = {row["k"]: row["total"] for row in totals}
    return {"answers_equal": got == expected, "decided": _decided(stages)}


def check_tpch(plan: Layout, run_id: str, local: Path) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    from tests.tpch import reference

    stages = stage_results(plan, "tpch_pipeline", run_id)

    def answer(stage: str) -> pa.Table:
        return read_output(plan, stages[stage]["output"]["path"])

    reference.assert_same_answer(
        answer("q1_pricing_summary"), reference.q1(local), keys=["l_returnflag", "l_linestatus"], atol=1e-6
    )
    keys = ["l_orderkey", "o_orderdate", "o_shippriority"]
    reference.assert_same_answer(answer("q3_shipping_priority"), reference.q3(local), keys=keys)
    reference.assert_same_answer(answer("q5_local_supplier_volume"), reference.q5(local), keys=["n_name"])
    return {"answers_equal": True, "decided": _decided(stages)}


def ui_shows_every_decision(plan: Layout, dag_id: str, run_id: str) -> bool:
    """Whether the provider's UI API on host A shows every stage of the run with its decision and rule."""
    page = api(plan, "GET", f"/finegrained/api/dags/{dag_id}/runs/{run_id}")
    shown = {s["stage"]: s for s in page["stages"]}
    return set(shown) == set(page["plan"]["stages"]) and all(
        s["has_trace"] and isinstance(s["parallelism"], int) and s["parallelism"] >= 1 and s["rule"]
        for s in shown.values()
    )


def _decided(stages: dict[str, Any]) -> dict[str, Any]:
    return {name: (result.get("trace") or {}).get("parallelism") for name, result in stages.items()}


def run_dags(plan: Layout, dag_ids: Sequence[str], root: str = "s3") -> list[dict[str, Any]]:
    """Run each DAG once, one after the other; per DAG its state, seconds, hosts per task and checks.

    ``root``: the storage the connections' root is on (``s3`` or ``hdfs``); the TPC-H tables are put there.
    """
    results = []
    for dag_id in dag_ids:
        run_id = f"rehearsal-{int(time.time())}"
        conf: dict[str, Any] = {}
        local = None
        if dag_id == "tpch_pipeline":
            local, uri = upload_tpch(plan, root)
            conf = {"data_dir": uri}
        started = time.monotonic()
        trigger(plan, dag_id, run_id, conf)
        state = wait_run(plan, dag_id, run_id)
        result: dict[str, Any] = {"dag_id": dag_id, "run_id": run_id, "root": root, "state": state,
                                  "seconds": round(time.monotonic() - started, 1),
                                  "tasks": task_hosts(plan, dag_id, run_id)}  # fmt: skip
        try:
            if state == "success":
                check = check_spread_region(plan, run_id) if local is None else check_tpch(plan, run_id, local)
                result.update(check, ui_shows_every_decision=ui_shows_every_decision(plan, dag_id, run_id))
        except (AssertionError, HostError, KeyError) as error:
            result["check_error"] = str(error)[:2000]
        checked = result.get("answers_equal") is True and result.get("ui_shows_every_decision") is True
        result["ok"] = state == "success" and checked
        results.append(result)
    return results
