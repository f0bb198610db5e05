"""Gathering a region's stage inputs: what each stage reads from outside its region, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.contract import OUTPUT_KEY, TRACE_KEY, OutputRecord, UpstreamOutputError
from airflow_provider_finegrained.execution.region_inputs import gather_inputs, options_for, peers_ran_with
from airflow_provider_finegrained.planning import StageSpec, plan_stages
from airflow_provider_finegrained.runtime.output import OutputError

S = StageSpec.build
BLOCKING_FWD = {"mode": "blocking", "distribution": "forward"}
# a -> b blocking forward: two regions; b -> c pipelined: c is in b's region.
PLAN = plan_stages(
    [S("a"), S("b", {"x": {"upstream": "a", **BLOCKING_FWD}}), S("c", {"y": {"upstream": "b", "mode": "pipelined"}})]
)


class TI:
    """XCom reads on a dict of (task, key) -> value; records what was asked."""

    def __init__(self, values: dict[tuple[str, str], Any]) -> None:
        self.values = values
        self.asked: list[tuple[str, str]] = []

    def xcom_pull(self, task_ids: str, key: str) -> Any:
        self.asked.append((task_ids, key))
        return self.values.get((task_ids, key))


class Folder:
    def __init__(self, unreadable: frozenset[str] = frozenset()) -> None:
        self.unreadable = unreadable
        self.read: list[str] = []

    def read_committed(self, location: str) -> None:
        self.read.append(location)
        if location in self.unreadable:
            raise OutputError(f"no commit marker under {location}")


def record(stage: str) -> dict[str, Any]:
    return OutputRecord(stage, f"/out/{stage}", "parquet", [10, 20], 5, 1).to_xcom()


def region_of(stage: str) -> tuple[str, list[str]]:
    region = PLAN.stages[stage].region
    return region, list(PLAN.regions[region])


def test_an_upstream_outside_the_region_is_read_checked_and_its_forward_parallelism_taken() -> None:
    _, members = region_of("b")
    ti = TI({("a", OUTPUT_KEY): record("a"), ("a", TRACE_KEY): {"parallelism": 7}})
    folder = Folder()
    inputs = gather_inputs(PLAN, members, {m: {} for m in members}, ti, folder, "/out", {})
    assert list(inputs) == members == ["b", "c"]
    assert inputs["b"].upstream["x"].path == "/out/a"
    assert inputs["b"].upstream_parallelism == {"x": 7}
    assert folder.read == ["/out/a"]
    assert not inputs["c"].upstream  # b runs in the same application: nothing read from XCom
    assert ("b", OUTPUT_KEY) not in ti.asked


def test_an_unreadable_upstream_output_names_both_stages_and_what_to_do() -> None:
    _, members = region_of("b")
    ti = TI({("a", OUTPUT_KEY): record("a")})
    with pytest.raises(UpstreamOutputError, match=r"stage 'b' reads from 'a', whose output is not readable.*rerun 'a'"):
        gather_inputs(PLAN, members, {m: {} for m in members}, ti, Folder(frozenset({"/out/a"})), "/out", {})


def test_a_missing_upstream_output_fails_before_anything_is_decided() -> None:
    _, members = region_of("b")
    with pytest.raises(UpstreamOutputError, match="published no output"):
        gather_inputs(PLAN, members, {m: {} for m in members}, TI({}), Folder(), "/out", {})


def test_the_storage_roots_credentials_go_only_to_its_own_store() -> None:
    creds = {"key": "secret"}
    assert options_for("s3://bucket/data/t", "s3://bucket/root", creds) is creds
    assert options_for("s3://elsewhere/t", "s3://bucket/root", creds) is None


def test_peers_outside_the_region_report_the_parallelism_they_ran_with() -> None:
    plan = plan_stages(
        [S("a"), S("c"), S("b", {"x": {"upstream": "a", **BLOCKING_FWD}, "y": {"upstream": "c", **BLOCKING_FWD}})]
    )
    region = plan.stages["c"].region
    ti = TI({("a", TRACE_KEY): {"parallelism": 12}, ("b", TRACE_KEY): {"parallelism": None}})
    assert peers_ran_with(plan, region, ti) == {"a": 12}
