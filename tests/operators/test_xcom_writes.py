"""Every XCom the provider writes goes through ``operators.xcom_writes``: one module holds the keys and values."""

from __future__ import annotations

import ast
from pathlib import Path

from airflow_provider_finegrained.contract import OUTPUT_KEY, REGION_KEY, TRACE_KEY, OutputRecord, StageTrace
from airflow_provider_finegrained.launchers.links import SparkUITargets
from airflow_provider_finegrained.operators import xcom_writes

PACKAGE = Path(xcom_writes.__file__).parents[1]


class TI:
    def __init__(self) -> None:
        self.pushed: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.pushed[key] = value


def test_no_module_but_xcom_writes_pushes_an_xcom() -> None:
    writers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "xcom_push":
                writers.append(path.relative_to(PACKAGE).as_posix())
    assert set(writers) == {"operators/xcom_writes.py"}


def test_a_stage_result_is_its_trace_and_record_and_returns_the_record() -> None:
    ti = TI()
    record = OutputRecord("s", "/out/s", "parquet", [1, 2], 3, 1)
    trace = StageTrace("s", "region-1", "region-1", "s")
    value = xcom_writes.push_stage_result(ti, record, trace)
    assert value == record.to_xcom() == ti.pushed[OUTPUT_KEY]
    assert ti.pushed[TRACE_KEY] == trace.to_xcom()


def test_region_info_and_failure_keep_their_keys_and_shapes() -> None:
    ti = TI()
    xcom_writes.push_region_info(ti, "region-1", "/root/_regions/region-1/try=2", "a", 2, ("a", "b"))
    assert ti.pushed[REGION_KEY] == {
        "region": "region-1",
        "folder": "/root/_regions/region-1/try=2",
        "leader": "a",
        "try_number": 2,
        "stages": ["a", "b"],
    }
    xcom_writes.push_region_failure(ti, "b", "boom", None)
    assert ti.pushed["finegrained_region_failure"] == {"stage": "b", "error": "boom", "spark_ui": None}
    xcom_writes.push_spark_ui(ti, SparkUITargets(None))
    assert ti.pushed["finegrained_spark_ui"] == SparkUITargets(None).to_xcom()
