"""OpenLineage names a stage's output as one logical dataset across runs; the run's location is a facet (issue 30).

The records are the XCom output records two runs of a DAG ``d`` publish for its stages ``orders`` and
``join`` at the default output layout (``<root>/<dag>/<run>/<stage>/try=<n>``), and at a fixed ``output_path``.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_provider_finegrained.operators.lineage import stage_lineage
from airflow_provider_finegrained.storage.locations import output_location

ROOT = "s3://lake/fg"
RUNS = (("scheduled__2026-11-26T00:00:00+00:00", 1), ("scheduled__2026-11-27T00:00:00+00:00", 2))


def record(stage: str, run_id: str, try_number: int, path: str | None = None) -> dict[str, Any]:
    location = path or output_location(ROOT, "d", run_id, stage, try_number)
    return {
        "stage": stage,
        "path": location,
        "data_path": f"{location}/_attempts/a1",
        "rows": 3,
        "total_bytes": 300,
        "try_number": try_number,
        "committed": True,
        "in_memory_only": False,
    }


def facets(dataset: Any) -> dict[str, Any]:
    from openlineage.client.serde import Serde

    return {name: json.loads(Serde.to_json(facet)) for name, facet in dataset.facets.items()}


def test_openlineage_datasets_are_named_stable_across_runs() -> None:
    lineages = [
        stage_lineage({}, {"orders": record("orders", run, n)}, record("join", run, n), None) for run, n in RUNS
    ]
    # One dataset per stage, whatever the run and try: a lineage graph joins one day's run to the next.
    outputs = {(lineage.outputs[0].namespace, lineage.outputs[0].name) for lineage in lineages}
    inputs = {(lineage.inputs[0].namespace, lineage.inputs[0].name) for lineage in lineages}
    assert outputs == {("s3://lake", "fg/d/join")}
    assert inputs == {("s3://lake", "fg/d/orders")}
    # The run's physical location (and the committed attempt's files) is in a facet of the dataset.
    for lineage, (run, n) in zip(lineages, RUNS, strict=True):
        for dataset, stage in ((lineage.outputs[0], "join"), (lineage.inputs[0], "orders")):
            where = output_location(ROOT, "d", run, stage, n)
            assert facets(dataset)["finegrained_location"] | {"_producer": "", "_schemaURL": ""} == {
                "_producer": "",
                "_schemaURL": "",
                "namespace": "s3://lake",
                "name": where.removeprefix("s3://lake/"),
                "location": where,
                "dataPath": f"{where}/_attempts/a1",
                "tryNumber": n,
            }
            assert facets(dataset)["version"]["datasetVersion"] == where.removeprefix("s3://lake/")


def test_a_fixed_output_path_is_its_own_logical_dataset() -> None:
    fixed = f"{ROOT}/exports/orders"
    lineage = stage_lineage({}, {}, record("orders", RUNS[0][0], 1, path=fixed), None)
    (out,) = lineage.outputs
    assert (out.namespace, out.name) == ("s3://lake", "fg/exports/orders")
    assert facets(out)["finegrained_location"]["location"] == fixed
