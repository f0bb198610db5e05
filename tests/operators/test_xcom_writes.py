"""Every XCom the provider writes goes through ``operators.xcom_writes``: one module holds the keys and values."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

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


SECRET = "xcom-test-secret-9f3b"


@pytest.fixture
def registered_secret() -> Iterator[str]:
    """A secret registered with Airflow's masker, as the hook registers a connection's password."""
    from airflow.sdk._shared.secrets_masker import _secrets_masker

    masker = _secrets_masker()
    masker.add_mask(SECRET)
    try:
        yield SECRET
    finally:
        masker.patterns = {pattern for pattern in masker.patterns if not re.fullmatch(pattern, SECRET)}
        masker.replacer = re.compile("|".join(masker.patterns)) if masker.patterns else None


@pytest.mark.security
def test_a_registered_secret_in_an_error_or_a_trace_reaches_xcom_masked(registered_secret: str) -> None:
    ti = TI()
    error = f"its SparkContext did not start (Py4JJavaError: bad credentials {registered_secret} for s3a://b/x)"
    xcom_writes.push_region_failure(ti, "b", error, None)
    failure = ti.pushed["finegrained_region_failure"]
    assert failure == {"stage": "b", "error": error.replace(registered_secret, "***"), "spark_ui": None}
    restarted = f"its first SparkContext did not start (AccessDenied: {registered_secret})"
    trace = StageTrace("s", "region-1", "region-1", "s", execution={"restarted": restarted})
    record = OutputRecord("s", f"/out/{registered_secret}", "parquet", [1], 1, 1)
    returned = xcom_writes.push_stage_result(ti, record, trace)
    assert registered_secret not in repr(ti.pushed) and registered_secret not in repr(returned)
    assert ti.pushed[TRACE_KEY]["execution"] == {"restarted": restarted.replace(registered_secret, "***")}  # type: ignore[index]
    assert returned["path"] == "/out/***"


def test_masking_keeps_keys_shapes_and_values_named_like_secrets() -> None:
    value = {"tokens": 12, "secret_stage": "kept", "sizes": (1, 2), "nested": [{"password_len": None}]}
    assert xcom_writes.masked(value) == value
    assert isinstance(xcom_writes.masked(value)["sizes"], tuple)
