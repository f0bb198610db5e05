"""Where an ``output_path`` may commit under the storage root: the pure rule of storage.locations (issue 34).

The same rule runs at parse time (dags/reader.py, a literal relative path) and when the path is rendered
(execution/region_folder.py, any path once the root is known; tests/execution/test_region_folder.py).
"""

from __future__ import annotations

import pytest

from airflow_provider_finegrained.execution.capacity_gate import LEDGER_FOLDER
from airflow_provider_finegrained.execution.history_store import HISTORY_FOLDER
from airflow_provider_finegrained.python_env.ship import ARCHIVE_FOLDER
from airflow_provider_finegrained.runtime.fence import FENCE_FOLDER
from airflow_provider_finegrained.storage.locations import (
    REGIONS_FOLDER,
    RESERVED_FOLDERS,
    output_path_problem,
    relative_output_path,
    stage_folder,
)
from airflow_provider_finegrained.storage.probe import PROBE_PREFIX
from airflow_provider_finegrained.warm.folders import WARM_FOLDER

pytestmark = pytest.mark.security

DAG = "t_other"
ROOT_ITSELF = "is the storage root itself"
OUTSIDE = "is outside the storage root"
RESERVED = "a folder the provider reserves"
OWN_DAG = "the folder of DAG 't_other' (its default output layout)"
TRY = "named like a try folder of the default output layout"

BAD = [
    (".", ROOT_ITSELF),
    ("", ROOT_ITSELF),
    ("./", ROOT_ITSELF),
    ("exports/..", ROOT_ITSELF),
    ("../x", OUTSIDE),
    ("exports/../../x", OUTSIDE),
    ("..", OUTSIDE),
    ("t_other", OWN_DAG),
    ("t_other/exports", OWN_DAG),
    ("t_hello/manual__2026-01-01T00_00_00_00_00-1a2b3c4d/hello/try=0", TRY),
    ("exports/try=12", TRY),
    ("_anything_new/x", RESERVED),
    (".hidden", RESERVED),
    ("_finegrained-probe-1234", RESERVED),
    *[(name, RESERVED) for name in RESERVED_FOLDERS],
    *[(f"{name}/t_hello/hello", RESERVED) for name in RESERVED_FOLDERS],
]
GOOD = [
    ("exports/orders", "exports/orders"),
    ("exports", "exports"),
    ("./exports//orders/", "exports/orders"),
    ("exports/_staging/orders", "exports/_staging/orders"),  # only the first name is the provider's
    ("t_other_exports/orders", "t_other_exports/orders"),
    ("exports/try=latest", "exports/try=latest"),
]


@pytest.mark.parametrize(("path", "reason"), BAD)
def test_a_relative_output_path_in_the_providers_or_a_dags_folders_is_refused(path: str, reason: str) -> None:
    relative = relative_output_path(path)
    assert relative is not None
    problem = output_path_problem(relative, DAG)
    assert problem is not None and reason in problem


@pytest.mark.parametrize(("path", "relative"), GOOD)
def test_a_plain_subfolder_is_an_allowed_output_path(path: str, relative: str) -> None:
    assert relative_output_path(path) == relative
    assert output_path_problem(relative, DAG) is None


@pytest.mark.parametrize("path", ["/data/fg/exports", "s3://lake/exports", "file:///data/x", "{{ var.value.out }}"])
def test_absolute_and_templated_paths_wait_for_the_root(path: str) -> None:
    # An absolute path is judged relative to the root, a template once rendered: neither is known at parse time.
    assert relative_output_path(path) is None


def test_the_reserved_names_are_every_owners_folder_and_all_start_with_an_underscore() -> None:
    owners = {LEDGER_FOLDER, HISTORY_FOLDER, ARCHIVE_FOLDER, FENCE_FOLDER, REGIONS_FOLDER, WARM_FOLDER}
    assert owners <= set(RESERVED_FOLDERS)
    assert all(name.startswith("_") for name in RESERVED_FOLDERS)
    assert PROBE_PREFIX.startswith("_")  # the probe's objects at the root are in the reserved namespace too


@pytest.mark.parametrize("dag_id", sorted(RESERVED_FOLDERS))
def test_a_dag_named_like_a_reserved_folder_gets_no_default_layout(dag_id: str) -> None:
    with pytest.raises(ValueError, match=rf"dag_id '{dag_id}' is a folder the provider reserves"):
        stage_folder("/data/fg", dag_id, "run", "stage")
