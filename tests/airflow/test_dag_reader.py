"""Reading real Airflow DAGs of stage tasks, and the parse-time policy that rejects broken ones."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pendulum
import pytest
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from airflow_provider_finegrained.dags.declaration import (
    Input,
    all_sources_in_one_region,
    declares_all_sources_in_one_region,
)
from airflow_provider_finegrained.dags.reader import read_dag, stage_specs
from airflow_provider_finegrained.operators.declared_stage import DeclaredStageOperator as Stage
from airflow_provider_finegrained.planning import StageGraphError

START = pendulum.datetime(2026, 1, 1, tz="UTC")


def test_declared_stages_become_the_planning_graph_and_are_wired() -> None:
    with DAG("reader_ok", schedule=None, start_date=START) as dag:
        a = Stage(task_id="a")
        b = Stage(task_id="b", inputs={"x": Input(a, mode="pipelined", distribution="forward")})
        Stage(task_id="c", inputs={"y": b, "z": Input("a", distribution="broadcast")})
        EmptyOperator(task_id="not_a_stage")
    # The operator wires each upstream stage given as an operator before its consumer.
    assert dag.get_task("b").upstream_task_ids == {"a"}
    plan = read_dag(dag)
    assert plan.dag_id == "reader_ok"
    assert plan.regions == {"region-1": ("a", "b"), "region-2": ("c",)}
    assert set(plan.stages) == {"a", "b", "c"}


def test_xcomarg_upstream_is_accepted() -> None:
    with DAG("reader_xcomarg", schedule=None, start_date=START) as dag:
        a = Stage(task_id="a")
        Stage(task_id="b", inputs={"x": a.output})
    assert [i.upstream for i in stage_specs(dag)[1].inputs] == ["a"]


def test_exchange_from_a_task_that_is_not_a_stage() -> None:
    with DAG("reader_not_stage", schedule=None, start_date=START) as dag:
        plain = EmptyOperator(task_id="plain")
        Stage(task_id="b", inputs={"x": plain})
    with pytest.raises(StageGraphError, match="stage 'b' reads input 'x' from 'plain', a EmptyOperator task"):
        read_dag(dag)


def test_upstream_named_by_id_must_run_before() -> None:
    with DAG("reader_order", schedule=None, start_date=START) as dag:
        Stage(task_id="b", inputs={"x": "a"})
        Stage(task_id="a")
    with pytest.raises(StageGraphError, match="stage 'b' reads from 'a' but does not run after it"):
        read_dag(dag)


def test_missing_upstream_task() -> None:
    with DAG("reader_missing", schedule=None, start_date=START) as dag:
        Stage(task_id="b", inputs={"x": "ghost"})
    with pytest.raises(StageGraphError, match="'ghost', which is not a task of DAG 'reader_missing'"):
        read_dag(dag)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"inputs": {"x": Input("a", mode="streaming")}}, "stage 'b': input 'x': unknown exchange mode 'streaming'"),
        ({"inputs": {"x": 42}}, "stage 'b': input 'x' must name an upstream stage"),
        ({"resources": {"cpu_cores": -1, "heap_memory": "1g"}}, "stage 'b': ResourceSpec cpu_cores"),
        ({"resources": {"cpu_cores": 1}}, "stage 'b': ResourceSpec needs cpu_cores and heap_memory"),
    ],
)
def test_bad_declarations_fail_when_the_task_is_created(kwargs: dict[str, object], message: str) -> None:
    with DAG("reader_bad", schedule=None, start_date=START), pytest.raises((StageGraphError, TypeError), match=message):
        Stage(task_id="b", **kwargs)  # type: ignore[arg-type]


BROKEN_DAGS = {
    "mixed": (
        """
        a = Stage(task_id="a", resources={"cpu_cores": 1, "heap_memory": "1g"})
        Stage(task_id="b", inputs={"x": a})
        """,
        "stage 'a' declares a ResourceSpec but stage 'b' does not",
    ),
    "forward_conflict": (
        """
        a = Stage(task_id="a", parallelism=2)
        Stage(task_id="b", inputs={"x": Input(a, distribution="forward")}, parallelism=3)
        """,
        "stage 'a' has parallelism 2 but stage 'b' has parallelism 3",
    ),
    "not_a_stage": (
        """
        Stage(task_id="b", inputs={"x": EmptyOperator(task_id="plain")})
        """,
        "stage 'b' reads input 'x' from 'plain'",
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN_DAGS))
def test_policy_turns_broken_stage_dags_into_import_errors(name: str, tmp_path: Path) -> None:
    body, message = BROKEN_DAGS[name]
    source = (
        "import pendulum\n"
        "from airflow.sdk import DAG\n"
        "from airflow.providers.standard.operators.empty import EmptyOperator\n"
        "from airflow_provider_finegrained.dags.declaration import Input\n"
        "from airflow_provider_finegrained.operators.declared_stage import DeclaredStageOperator as Stage\n"
        f"with DAG('broken_{name}', schedule=None, start_date=pendulum.datetime(2026, 1, 1)):\n"
        + textwrap.indent(textwrap.dedent(body), "    ")
    )
    path = tmp_path / f"broken_{name}.py"
    path.write_text(source)
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(path), safe_mode=False)
    assert not bag.dags
    (error,) = bag.import_errors.values()
    assert f"DAG 'broken_{name}'" in error
    assert message in error


def test_policy_leaves_dags_without_stages_alone(tmp_path: Path) -> None:
    path = tmp_path / "plain.py"
    path.write_text(
        "import pendulum\nfrom airflow.sdk import DAG\n"
        "from airflow.providers.standard.operators.empty import EmptyOperator\n"
        "with DAG('plain', schedule=None, start_date=pendulum.datetime(2026, 1, 1)):\n"
        "    EmptyOperator(task_id='a')\n"
    )
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(path), safe_mode=False)
    assert set(bag.dags) == {"plain"}
    assert not bag.import_errors


def test_two_stages_writing_the_same_path_are_rejected() -> None:
    from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator

    with DAG("reader_same_path", schedule=None, start_date=START) as dag:
        SparkStageOperator(task_id="a", python_callable=print, output_path="shared/out")
        SparkStageOperator(task_id="b", python_callable=print, output_path="shared/out")
    with pytest.raises(StageGraphError, match="stages 'a' and 'b' both write output_path 'shared/out'"):
        read_dag(dag)


def test_region_leader_runs_after_every_blocking_input_of_its_members() -> None:
    with DAG("reader_region_wiring", schedule=None, start_date=START) as dag:
        a = Stage(task_id="a")
        c = Stage(task_id="c")
        Stage(task_id="b", inputs={"x": Input(a, mode="pipelined"), "y": c})
        a2 = Stage(task_id="a2")
        Stage(task_id="d", inputs={"x": Input("b", mode="pipelined"), "z": Input(a2, mode="pipelined")})
    plan = read_dag(dag)
    # a, b, a2 and d form one region led by 'a' (the first created); c is a blocking input of b.
    assert plan.regions[plan.stages["a"].region] == ("a", "b", "a2", "d")
    assert "c" in dag.get_task("a").upstream_task_ids  # the leader waits for its members' blocking inputs
    assert "a" in dag.get_task("a2").upstream_task_ids  # every member runs after the leader
    assert {"a", "b", "a2"} <= dag.get_task("d").get_flat_relative_ids(upstream=True)


def _two_sources_and_a_join(declare_first: bool) -> DAG:
    with DAG(f"reader_all_sources_{declare_first}", schedule=None, start_date=START) as dag:
        if declare_first:
            all_sources_in_one_region(dag)
        a = Stage(task_id="a")
        b = Stage(task_id="b")
        Stage(task_id="c", inputs={"x": a, "y": b})
    if not declare_first:
        all_sources_in_one_region(dag)
    return dag


@pytest.mark.parametrize("declare_first", [True, False], ids=["declared-before-stages", "declared-after"])
def test_all_sources_in_one_region_declared_on_the_dag(declare_first: bool) -> None:
    dag = _two_sources_and_a_join(declare_first)
    assert declares_all_sources_in_one_region(dag)
    # The reader takes the DAG's declaration: both sources in the first region, led by 'a'.
    assert read_dag(dag).regions == {"region-1": ("a", "b"), "region-2": ("c",)}
    # 'a' runs the region as one application, so 'b' (a member) runs after it.
    assert "a" in dag.get_task("b").upstream_task_ids
    # An explicit argument overrides the declaration (what the CLI's --no-all-sources-in-one-region does).
    assert read_dag(dag, all_sources_in_one_region=False).regions == {
        "region-1": ("a",),
        "region-2": ("b",),
        "region-3": ("c",),
    }


def test_without_the_declaration_sources_keep_their_own_regions() -> None:
    with DAG("reader_sources_apart", schedule=None, start_date=START) as dag:
        a = Stage(task_id="a")
        b = Stage(task_id="b")
        Stage(task_id="c", inputs={"x": a, "y": b})
    assert not declares_all_sources_in_one_region(dag)
    assert read_dag(dag).regions == {"region-1": ("a",), "region-2": ("b",), "region-3": ("c",)}
    assert dag.get_task("b").upstream_task_ids == set()
    assert read_dag(dag, all_sources_in_one_region=True).regions == {"region-1": ("a", "b"), "region-2": ("c",)}


def test_all_sources_region_absorbs_pipelined_consumers_and_keeps_blocking_inputs_inside() -> None:
    with DAG("reader_all_sources_wiring", schedule=None, start_date=START) as dag:
        all_sources_in_one_region(dag)
        a = Stage(task_id="a")
        c = Stage(task_id="c")
        Stage(task_id="b", inputs={"x": Input(a, mode="pipelined"), "y": c})
        Stage(task_id="d", inputs={"z": "b"})
    plan = read_dag(dag)
    # Sources a and c join one region; b reads a pipelined, so it joins too; c -> b is blocking inside it.
    assert plan.regions == {"region-1": ("a", "c", "b"), "region-2": ("d",)}
    assert "a" in dag.get_task("c").upstream_task_ids
    assert "c" not in dag.get_task("a").get_flat_relative_ids(upstream=True)  # no cycle: c is a member now
    dag.check_cycle()  # Airflow's own check agrees


def test_all_sources_declared_after_a_source_became_a_blocking_input_names_the_fix() -> None:
    with DAG("reader_all_sources_late", schedule=None, start_date=START) as dag:
        a = Stage(task_id="a")
        c = Stage(task_id="c")
        Stage(task_id="b", inputs={"x": Input(a, mode="pipelined"), "y": c})
    # c already runs before a (a leads b's region and waits for b's blocking input c).
    with pytest.raises(
        StageGraphError, match=r"stage 'a' .* already runs after stage 'c'; call all_sources_in_one_region"
    ):
        all_sources_in_one_region(dag)


def test_all_sources_in_one_region_needs_a_dag() -> None:
    with pytest.raises(TypeError, match="needs an Airflow DAG, got str"):
        all_sources_in_one_region("my_dag")


def test_a_source_added_without_the_wiring_is_named_until_the_declaration_is_repeated() -> None:
    with DAG("reader_all_sources_added", schedule=None, start_date=START) as dag:
        all_sources_in_one_region(dag)
        Stage(task_id="a")
    late = Stage(task_id="b")  # created outside the DAG, so it could not join the region then
    dag.add_task(late)
    with pytest.raises(StageGraphError, match="led by 'a', but source stage 'b' does not run after it"):
        read_dag(dag)
    # The CLI's explicit override shows the plan without checking the wiring.
    assert read_dag(dag, all_sources_in_one_region=True).regions == {"region-1": ("a", "b")}
    all_sources_in_one_region(dag)
    assert read_dag(dag).regions == {"region-1": ("a", "b")}
    assert dag.get_task("b").upstream_task_ids == {"a"}


# output_path containment at parse time (issue 34, item 1): the rule itself is tested in
# tests/storage/test_output_containment.py; here, that a DAG file with such a stage is an import error.
BAD_OUTPUT_PATHS = {
    "dot": (".", "output_path '.' is the storage root itself"),
    "empty": ("", "output_path '' is the storage root itself"),
    "dot_slash": ("./", "output_path './' is the storage root itself"),
    "other_dag_try": (
        "t_hello/manual__2026-01-01T00_00_00_00_00-1a2b3c4d/hello/try=0",
        "has a folder 'try=0' named like a try folder of the default output layout",
    ),
    "own_dag": ("paths_own_dag/exports", "is inside 'paths_own_dag', the folder of DAG 'paths_own_dag'"),
    "history": ("_history/t_hello/hello", "is inside '_history', a folder the provider reserves"),
    "capacity": ("_capacity/local_2_", "is inside '_capacity', a folder the provider reserves"),
    "parent": ("../x", "output_path '../x' is outside the storage root"),
}


@pytest.mark.security
@pytest.mark.parametrize("name", sorted(BAD_OUTPUT_PATHS))
def test_a_literal_output_path_outside_the_users_part_of_the_root_is_an_import_error(name: str, tmp_path: Path) -> None:
    path, message = BAD_OUTPUT_PATHS[name]
    dag_id = "paths_own_dag" if name == "own_dag" else f"paths_{name}"
    source = (
        "import pendulum\n"
        "from airflow.sdk import DAG\n"
        "from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator\n"
        f"with DAG({dag_id!r}, schedule=None, start_date=pendulum.datetime(2026, 1, 1)):\n"
        f"    SparkStageOperator(task_id='hello', python_callable=print, output_path={path!r})\n"
    )
    (tmp_path / f"{dag_id}.py").write_text(source)
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(tmp_path / f"{dag_id}.py"), safe_mode=False)
    assert not bag.dags
    (error,) = bag.import_errors.values()
    assert f"DAG {dag_id!r}: stage 'hello': output_path {path!r} " in error
    assert message in error
    assert "allowed: a folder below the storage root" in error and "leave output_path unset" in error


@pytest.mark.security
@pytest.mark.parametrize("path", ["exports/orders", "/data/lake/exports/orders", "s3://lake/x", "out/{{ ds }}"])
def test_a_plain_subfolder_an_absolute_path_or_a_template_passes_the_parse(path: str) -> None:
    # Absolute paths are judged against the storage root and templates once rendered, when the stage runs.
    from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator

    with DAG("paths_ok", schedule=None, start_date=START) as dag:
        SparkStageOperator(task_id="hello", python_callable=print, output_path=path)
    assert set(read_dag(dag).stages) == {"hello"}


@pytest.mark.security
@pytest.mark.parametrize("name", ["_history", "_regions"])
def test_a_dag_or_a_stage_named_like_a_reserved_folder_is_refused(name: str) -> None:
    with DAG(name, schedule=None, start_date=START) as dag:
        Stage(task_id="a")
    with pytest.raises(StageGraphError, match=rf"dag_id '{name}' is a folder the provider reserves"):
        read_dag(dag)
    with DAG("reserved_stage", schedule=None, start_date=START) as dag:
        Stage(task_id=name)
    with pytest.raises(StageGraphError, match=rf"stage '{name}' is named like a folder the provider reserves"):
        read_dag(dag)


BLOCKING_FORWARD = {"mode": "blocking", "distribution": "forward"}


def _two_forward_producers(dag_id: str) -> DAG:
    """The issue's shape: a -> b and c -> b, both forward and blocking, so a, c and b in three regions."""
    with DAG(dag_id, schedule=None, start_date=START) as dag:
        a, c = Stage(task_id="a"), Stage(task_id="c")
        Stage(task_id="b", inputs={"x": Input(a, **BLOCKING_FORWARD), "y": Input(c, **BLOCKING_FORWARD)})
    return dag


def test_a_forward_group_over_regions_that_may_run_at_once_is_refused() -> None:
    # a and c could both run first and each decide the group's parallelism (the issue: 12 and 3).
    dag = _two_forward_producers("reader_forward_unordered")
    with pytest.raises(StageGraphError) as info:
        read_dag(dag)
    assert str(info.value) == (
        "stages ['a', 'c', 'b'] form one forward group (one parallelism) over the regions led by ['a', 'c', 'b'], "
        "but none of these regions runs before all the others (the region led by 'c' does not run after any of "
        "['a']), so two of them could each decide the group's parallelism, differently. Make one run first (for "
        "example a >> c), give a stage of the group a fixed parallelism, or make the edges between them not forward"
    )


def test_a_forward_group_over_ordered_regions_is_read() -> None:
    # The fix the error names: c runs after a, so a's region decides and c and b take its value.
    dag = _two_forward_producers("reader_forward_ordered")
    dag.get_task("a") >> dag.get_task("c")
    assert len(read_dag(dag).regions) == 3
    # Ordered the other way round (against the plan's region order) is as good: c's region runs first.
    dag = _two_forward_producers("reader_forward_ordered_back")
    dag.get_task("c") >> dag.get_task("a")
    assert len(read_dag(dag).regions) == 3
    # A fixed parallelism decides nothing at run time.
    with DAG("reader_forward_fixed", schedule=None, start_date=START) as dag:
        a, c = Stage(task_id="a", parallelism=4), Stage(task_id="c")
        Stage(task_id="b", inputs={"x": Input(a, **BLOCKING_FORWARD), "y": Input(c, **BLOCKING_FORWARD)})
    assert len(read_dag(dag).regions) == 3


def test_a_forward_group_in_a_region_and_its_downstream_regions_is_read() -> None:
    # a's region runs before both b's and c's (its blocking forward consumers): it decides, they follow.
    with DAG("reader_forward_fan_out", schedule=None, start_date=START) as dag:
        a = Stage(task_id="a")
        Stage(task_id="b", inputs={"x": Input(a, **BLOCKING_FORWARD)})
        Stage(task_id="c", inputs={"x": Input(a, **BLOCKING_FORWARD)})
    assert len(read_dag(dag).regions) == 3
