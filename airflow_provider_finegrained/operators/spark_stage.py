"""SparkStageOperator: one PySpark stage, sized from the bytes its upstream stages produced.

A stage is a Python function ``fn(spark, **inputs) -> DataFrame`` or a PySpark application file using
:mod:`airflow_provider_finegrained.runtime.api`. The first stage of a pipelined region (its leader)
runs the whole region as one Spark application; every other stage of the region reports its own part
(log lines, XCom) from the region's results, so no stage's code runs twice.

In cluster deploy mode the leader may defer while the region's application runs (``deferrable``), and a
retried leader reattaches to the application an earlier try started (see ``execution.reattach``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_finegrained.contract import REGION_KEY, OutputRecord, StageTrace
from airflow_provider_finegrained.dags.declaration import StageDeclarationMixin
from airflow_provider_finegrained.execution.region_errors import StageFailedError, submit_timeout_message
from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook
from airflow_provider_finegrained.operators.assets import asset_event_extra
from airflow_provider_finegrained.operators.assets import output_asset as output_asset_of
from airflow_provider_finegrained.operators.lineage import LineageMixin
from airflow_provider_finegrained.operators.links import SparkUILink, SparkUITargets, spark_ui_targets
from airflow_provider_finegrained.operators.region_member import check_leader
from airflow_provider_finegrained.operators.stage_plan import dag_plan, default_deferrable
from airflow_provider_finegrained.operators.trace_text import format_trace
from airflow_provider_finegrained.operators.xcom_writes import (
    push_plan,
    push_region_failure,
    push_spark_ui,
    push_stage_result,
)
from airflow_provider_finegrained.planning import DagPlan, ResourceSpec
from airflow_provider_finegrained.planning.render import plan_to_dict

if TYPE_CHECKING:
    from airflow_provider_finegrained.execution.capacity_gate import CapacityWait
    from airflow_provider_finegrained.execution.region_context import RunFacts
    from airflow_provider_finegrained.execution.region_outcome import RegionOutcome
    from airflow_provider_finegrained.execution.region_sequence import RegionRunner
    from airflow_provider_finegrained.launchers.base import LaunchHandle, LaunchStatus
    from airflow_provider_finegrained.runtime.job import StageStatus
    from airflow_provider_finegrained.settings import ConnectionSettings

OUTPUT_FORMATS = ("parquet", "orc")
APPLICATION_POLL_S = 5.0
"""How often the trigger of a deferred leader asks the cluster manager about the region's application."""


class SparkStageOperator(LineageMixin, StageDeclarationMixin, BaseOperator):
    """Run one PySpark stage with parallelism, memory and executors decided from its input bytes.

    :param python_callable: ``fn(spark, **inputs, **op_kwargs) -> DataFrame``; or give ``application``.
    :param application: a PySpark file that reads ``current_stage().inputs`` and calls ``publish(df)``.
    :param application_args: arguments for ``application`` (templated).
    :param op_kwargs: extra keyword arguments for ``python_callable`` (templated).
    :param inputs: input name to an upstream stage (operator, XComArg, task id or ``Input``) or an
        ``ExternalDataset``.
    :param resources: a ``ResourceSpec`` (or mapping of its fields); all stages of a DAG or none.
    :param parallelism: a fixed parallelism instead of the adaptive decision.
    :param min_parallelism: lower bound of the adaptive decision (default: the connection's).
    :param max_parallelism: upper bound of the adaptive decision (default: the connection's).
    :param slot_sharing_group: a named slot sharing group instead of the region's own.
    :param memory_weight: weight in the region's memory split for stages without a ResourceSpec.
    :param spark_conf: Spark settings for this stage (templated); ``spark.sql.*`` keys apply to this
        stage only, others to its region's application.
    :param output_format: ``parquet`` or ``orc``.
    :param output_path: where to commit the output (templated; inside the storage root). Default:
        ``<root>/<dag_id>/<run_id>/<task_id>/try=<n>``.
    :param finegrained_spark_conn_id: the ``finegrained_spark`` connection (default: embedded local Spark).
    :param submit_timeout: seconds from the region's submission before its Spark application is killed and
        the task fails, in every deploy mode: waiting to be accepted, running, followed after a reattach or
        from the triggerer (a deferred leader). A region run in a warm pool is not bounded by it (the task's
        ``execution_timeout`` is); the application also ends on task timeout.
    :param warm: ``False`` runs this stage's region as an application of its own even when the
        connection has a warm pool (for stages that need SparkContext or RDD APIs, which Spark Connect
        cannot run). Default: the connection's ``warm_pool`` decides.
    :param deferrable: in cluster deploy mode, the region's leader defers once its application is submitted
        and a trigger follows it through the cluster manager, so no worker slot is held while it runs.
        Ignored (with a log line saying why) in client and local mode and for warm regions. Default:
        ``[finegrained] default_deferrable``, else ``[operators] default_deferrable``, else False.
    :param output_asset: declare the committed output as an Airflow asset (an outlet whose URI is the
        output's storage URI), so DAGs can be scheduled on it; needs a fixed ``output_path``. Each success
        emits an asset event whose extra says what was committed (path, data_path, rows, bytes, try).
    """

    template_fields: Sequence[str] = (
        "application",
        "application_args",
        "op_kwargs",
        "spark_conf",
        "external_inputs",
        "output_path",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {"spark_conf": "json", "op_kwargs": "py"}
    ui_color = "#fdd7a8"
    operator_extra_links = (SparkUILink(),)

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any] | None = None,
        application: str | None = None,
        application_args: Sequence[str] = (),
        op_kwargs: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Any] | None = None,
        resources: ResourceSpec | Mapping[str, Any] | None = None,
        parallelism: int | None = None,
        min_parallelism: int | None = None,
        max_parallelism: int | None = None,
        slot_sharing_group: str | None = None,
        memory_weight: float = 1.0,
        spark_conf: Mapping[str, str] | None = None,
        output_format: str = "parquet",
        output_path: str | None = None,
        finegrained_spark_conn_id: str = FineGrainedSparkHook.default_conn_name,
        submit_timeout: float | None = None,
        warm: bool | None = None,
        deferrable: bool | None = None,
        output_asset: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (python_callable is None) == (application is None):
            raise ValueError(f"stage {self.task_id!r}: give exactly one of python_callable and application")
        if python_callable is not None and not callable(python_callable):
            raise TypeError(f"stage {self.task_id!r}: python_callable must be callable, got {python_callable!r}")
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(
                f"stage {self.task_id!r}: output_format {output_format!r} is not one of {', '.join(OUTPUT_FORMATS)}"
            )
        self.python_callable = python_callable
        self.application = application
        self.application_args = application_args
        self.op_kwargs = op_kwargs or {}
        self.spark_conf = spark_conf or {}
        self.output_format = output_format
        self.output_path = output_path
        self.finegrained_spark_conn_id = finegrained_spark_conn_id
        self.submit_timeout = submit_timeout
        self.warm = warm
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self._process: Any = None
        self.output_asset = output_asset_of(self.task_id, output_path) if output_asset else None
        if self.output_asset is not None:
            self.outlets = [*self.outlets, self.output_asset]
        self.declare_stage(
            inputs=inputs,
            resources=resources,
            parallelism=parallelism,
            min_parallelism=min_parallelism,
            max_parallelism=max_parallelism,
            slot_sharing_group=slot_sharing_group,
            memory_weight=memory_weight,
        )

    def execute(self, context: Any) -> dict[str, Any]:
        plan = dag_plan(self.dag)
        # Pushed first, so the UI draws the DAG's regions even for a run whose stages failed.
        push_plan(context["ti"], plan_to_dict(plan))
        # A link target with no application until one is known: the Spark UI link is looked up when the task
        # ends, and a missing XCom is logged as an error (noise in the log of a stage that failed early).
        push_spark_ui(context["ti"], SparkUITargets(None))
        region = plan.stages[self.task_id].region
        leader = plan.regions[region][0]
        if self.task_id != leader:
            return self._report_from_region(context, region, leader)
        return self._run_region(context, plan, region, waited=None)

    def resume_after_capacity(
        self, context: Any, event: Mapping[str, Any] | None = None, waited: Mapping[str, float] | None = None
    ) -> dict[str, Any]:
        """Back from waiting for capacity: run the region, or fail with what was asked and what was free."""
        status = (event or {}).get("status")
        message = (event or {}).get("message", "no event")
        waited = waited or (event or {}).get("waited")
        if status == "impossible":
            raise AirflowFailException(f"stage {self.task_id!r}: {message}")
        if status != "available":
            waited_s = time.time() - (waited or {}).get("since", time.time())
            raise AirflowFailException(
                f"stage {self.task_id!r}: waited {waited_s:.0f} s for capacity, up to capacity_wait_timeout, "
                f"and gave up: {message}"
            )
        plan = dag_plan(self.dag)
        return self._run_region(context, plan, plan.stages[self.task_id].region, waited=waited)

    def execute_complete(self, context: Any, event: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Back from following the region's application in the triggerer: collect and publish its results."""
        from airflow_provider_finegrained.execution.region_context import RunFacts
        from airflow_provider_finegrained.launchers.base import LaunchHandle, LaunchStatus

        event = event or {}
        try:
            handle = LaunchHandle.from_dict(event.get("handle") or {})
        except ValueError as exc:
            raise AirflowFailException(f"stage {self.task_id!r}: resumed without its application: {exc}") from None
        state, detail = str(event.get("status") or "unknown"), str(event.get("detail") or "")
        plan = dag_plan(self.dag)
        region = plan.stages[self.task_id].region
        if state == "timeout":
            message = submit_timeout_message(self.task_id, region, plan.regions[region], self.submit_timeout, detail)
            self._record_region_failure(context, None, message)
            raise StageFailedError(message)
        if state == "unknown":
            message = (
                f"stage {self.task_id!r}: lost track of region {region}'s application {handle.remote_id} on "
                f"{handle.master}: {detail}; a retry asks the cluster manager again and reattaches if it still runs"
            )
            self._record_region_failure(context, None, message)
            raise StageFailedError(message)
        status = LaunchStatus(state, handle.application_id, handle.driver_id, detail)  # type: ignore[arg-type]
        resume = (handle, RunFacts.from_dict(event.get("facts") or {}), status)
        return self._run_region(context, plan, region, waited=None, resume=resume)

    def _run_region(
        self,
        context: Any,
        plan: DagPlan,
        region: str,
        waited: Mapping[str, float] | None,
        resume: tuple[LaunchHandle, RunFacts, LaunchStatus] | None = None,
    ) -> dict[str, Any]:
        from airflow_provider_finegrained.execution.region_outcome import Failed
        from airflow_provider_finegrained.execution.region_sequence import RegionRunner
        from airflow_provider_finegrained.operators.task_report import TaskReport

        hook = FineGrainedSparkHook(self.finegrained_spark_conn_id)
        settings = hook.get_settings()
        runner = RegionRunner(
            self,
            plan,
            region,
            settings,
            context,
            TaskReport(context),
            waited_since=(waited or {}).get("since"),
            storage_options=hook.storage_options(),
            deferrable=self.deferrable,
        )
        self._process = runner
        try:
            outcome = runner.execute() if resume is None else runner.follow(*resume)
        except Exception as exc:  # not one of the ways a region ends: still recorded where the UI shows it
            outcome = Failed(exc)
        finally:
            self._process = None
            # Also for a failed region: its application's UI is where to look for why.
            self._push_spark_ui(context, settings, runner.statuses.get(self.task_id))
        return self._act_on(context, settings, runner, outcome, waited)

    def _act_on(
        self,
        context: Any,
        settings: ConnectionSettings,
        runner: RegionRunner,
        outcome: RegionOutcome,
        waited: Mapping[str, float] | None,
    ) -> dict[str, Any]:
        """The region's outcome as the task's: publish, defer (for capacity or to the trigger) or fail."""
        from airflow_provider_finegrained.execution.region_outcome import (
            AwaitApplication,
            AwaitCapacity,
            Failed,
        )

        if isinstance(outcome, AwaitCapacity):
            self._defer_for_capacity(settings, outcome.wait, waited)
        if isinstance(outcome, AwaitApplication):
            self._defer_for_application(settings, outcome.handle, outcome.facts)
        if isinstance(outcome, Failed):
            self._record_region_failure(context, runner, str(outcome.error))
            if outcome.final:
                raise AirflowFailException(str(outcome.error)) from None  # retrying cannot make a worker larger
            raise outcome.error
        lines = runner.log_lines(self.task_id)
        return self._publish(context, outcome.records[self.task_id], outcome.traces[self.task_id], lines)

    def _defer_for_capacity(
        self, settings: ConnectionSettings, wait: CapacityWait, waited: Mapping[str, float] | None
    ) -> NoReturn:
        from airflow_provider_finegrained.execution.capacity_gate import capacity_source
        from airflow_provider_finegrained.triggers.capacity import CapacityTrigger, request_to_dict
        from airflow_provider_finegrained.triggers.settle import not_before

        now = time.time()
        since = (waited or {}).get("since", now)
        deadline = (waited or {}).get("deadline", now + settings.capacity_wait_timeout)
        if now >= deadline:
            raise AirflowFailException(
                f"stage {self.task_id!r}: {wait.message}; waited {now - since:.0f} s "
                f"(capacity_wait_timeout {settings.capacity_wait_timeout:g} s)"
            )
        self.log.info("Deferring until capacity frees (at most %.0f s): %s", deadline - now, wait.message)
        self.defer(
            trigger=CapacityTrigger(
                source=capacity_source(settings, conn_id=self.finegrained_spark_conn_id).to_dict(),
                request=request_to_dict(wait.request),
                deadline=deadline,
                poll_interval=settings.capacity_poll_interval,
                since=since,
                not_before=not_before(settings.trigger_min_wait),
            ),
            method_name="resume_after_capacity",
            kwargs={"waited": {"since": since, "deadline": deadline}},
        )

    def _defer_for_application(self, settings: ConnectionSettings, handle: LaunchHandle, facts: RunFacts) -> NoReturn:
        from airflow_provider_finegrained.triggers.region_application import RegionApplicationTrigger
        from airflow_provider_finegrained.triggers.settle import not_before

        self.defer(
            trigger=RegionApplicationTrigger(
                conn_id=self.finegrained_spark_conn_id,
                handle=handle.to_dict(),
                facts=facts.to_dict(),
                poll_interval=APPLICATION_POLL_S,
                not_before=not_before(settings.trigger_min_wait),
                submit_timeout=self.submit_timeout,
            ),
            method_name="execute_complete",
        )

    def _record_region_failure(self, context: Any, runner: RegionRunner | None, message: str) -> None:
        """Tell the region's other tasks which stage broke, so each fails with one clear message."""
        failed = next((s for s in (runner.statuses.values() if runner else ()) if s.state == "failed"), None)
        try:
            spark_ui = None
            if runner is not None and failed is not None and failed.application_id:
                spark_ui = spark_ui_targets(runner.settings, failed.application_id).to_xcom()
            push_region_failure(
                context["ti"],
                failed.stage if failed else self.task_id,
                ((failed.error if failed else None) or message).splitlines()[0][:500],
                spark_ui,
            )
        except Exception as exc:  # never hide the region's own failure behind this note's
            self.log.warning("Could not record the region's failure for its other stages: %s", exc)

    def on_kill(self) -> None:
        runner = self._process
        if runner is not None:
            self.log.info("Task killed: stopping the Spark application and every process it started")
            runner.kill()

    def _report_from_region(self, context: Any, region: str, leader: str) -> dict[str, Any]:
        from airflow_provider_finegrained.runtime.job import StageStatus, read_json, status_path, trace_path

        ti = context["ti"]
        check_leader(context, self.dag_id, self.task_id, region, leader)
        region_info = ti.xcom_pull(task_ids=leader, key=REGION_KEY)
        if not region_info:
            raise StageFailedError(
                f"stage {self.task_id!r} runs inside the pipelined region led by {leader!r}, which has not run "
                f"(no {REGION_KEY!r} XCom); run {leader!r} first"
            )
        folder = region_info["folder"]
        hook = FineGrainedSparkHook(self.finegrained_spark_conn_id)
        options = hook.storage_options()
        status = StageStatus.read(status_path(folder, self.task_id), storage_options=options)
        self._push_spark_ui(context, hook.get_settings(), status)
        if status is None or status.state != "success":
            reason = status.error if status is not None else "no result was recorded"
            raise StageFailedError(f"stage {self.task_id!r} did not succeed in region run {folder}: {reason}")
        trace = StageTrace.from_xcom(read_json(trace_path(folder, self.task_id), storage_options=options))
        self.log.info("Ran in the Spark application of region %s (led by %s)", trace.region, leader)
        record = OutputRecord.from_committed(self.task_id, status.output, int(region_info["try_number"]))
        return self._publish(context, record, trace, status.log)

    def _push_spark_ui(self, context: Any, settings: ConnectionSettings, status: StageStatus | None) -> None:
        """Where the Spark UI link points: the stage's application under this connection."""
        if status is None or not status.application_id:
            return
        # ui_url: the driver's spark.sparkContext.uiWebUrl, once the region's driver records it.
        targets = spark_ui_targets(settings, status.application_id, status.ui_url)
        push_spark_ui(context["ti"], targets)

    def _publish(self, context: Any, record: OutputRecord, trace: StageTrace, lines: Sequence[str]) -> dict[str, Any]:
        for line in lines:
            self.log.info("%s", line)
        self.log.info("%s", format_trace(trace, record))
        ti = context["ti"]
        value = push_stage_result(ti, record, trace)
        self.remember_lineage(ti, value, trace.to_xcom())
        if self.output_asset is not None and record.committed:
            context["outlet_events"][self.output_asset].extra = asset_event_extra(value)
        return value
