"""Run a pipelined region as one Spark application, on behalf of the region's leader task.

A short sequence, one step each below: gather the stages' inputs, decide (pure, ``decide_region``),
pick a launcher (the warm pool or the master URL's cluster manager), reserve capacity, launch, collect
what the driver recorded, and publish each stage's trace (built once) where the region's other tasks
find it. Which cluster manager is in use is the launcher's business only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_finegrained.capacity import CapacityUnavailable
from airflow_provider_finegrained.contract import (
    OUTPUT_KEY,
    REGION_KEY,
    TRACE_KEY,
    OutputRecord,
    StageTrace,
    UpstreamOutputError,
)
from airflow_provider_finegrained.execution.capacity_gate import (
    CapacityImpossible,
    CapacityWait,
    Grant,
    acquire,
    capacity_source,
    minimum_slots,
    reduced_profile,
    region_request,
)
from airflow_provider_finegrained.execution.measure import measure_external
from airflow_provider_finegrained.execution.region_folder import RegionFolder
from airflow_provider_finegrained.execution.region_job import StageTaskLike, application_conf, build_region_job
from airflow_provider_finegrained.execution.region_run import RegionDecision, StageInputs, decide_region
from airflow_provider_finegrained.execution.region_trace import CapacityRecord, RegionRunFacts, stage_trace
from airflow_provider_finegrained.execution.warm_choice import Carrier, choose_carrier
from airflow_provider_finegrained.launchers.base import (
    Launcher,
    LaunchEvents,
    LaunchHandle,
    LaunchResult,
    LaunchSpec,
    LogLike,
)
from airflow_provider_finegrained.launchers.select import select
from airflow_provider_finegrained.operators.links import LiveLink
from airflow_provider_finegrained.planning import DagPlan, Distribution, ParallelismConfig
from airflow_provider_finegrained.planning.capacity import CapacityOutcome
from airflow_provider_finegrained.runtime.job import StageStatus
from airflow_provider_finegrained.runtime.output import OutputError
from airflow_provider_finegrained.secrets import redact_mapping
from airflow_provider_finegrained.spark.submit import spark_home
from airflow_provider_finegrained.storage.classpath import check_spark_filesystem
from airflow_provider_finegrained.storage.errors import StorageConfigError
from airflow_provider_finegrained.storage.hadoop_conf import spark_hadoop_conf
from airflow_provider_finegrained.storage.locations import same_store, scheme_of

if TYPE_CHECKING:
    from airflow_provider_finegrained.hooks.settings import ConnectionSettings


# -- what the run uses of Airflow's objects ---------------------------------------------------------------


class TaskInstanceLike(Protocol):
    """The task instance calls a region run makes."""

    try_number: int

    def xcom_push(self, key: str, value: Any) -> None: ...

    def xcom_pull(self, task_ids: str, key: str) -> Any: ...


class LeaderLike(StageTaskLike, Protocol):
    """The region's leader: the running stage task that runs the region."""

    @property
    def log(self) -> LogLike: ...
    @property
    def dag(self) -> Any:
        """The DAG (``dag_id``, ``get_task``); Airflow types it as optional."""

    @property
    def submit_timeout(self) -> float | None: ...


@dataclass(frozen=True)
class RunContext:
    """The task context's parts a region run uses."""

    ti: TaskInstanceLike
    run_id: str
    try_number: int
    raw: Mapping[str, Any]
    """The whole context, for rendering the other members' templates."""

    @classmethod
    def of(cls, context: Mapping[str, Any]) -> RunContext:
        ti = context["ti"]
        return cls(ti, str(context["run_id"]), int(ti.try_number), context)


@dataclass(frozen=True)
class RegionOutcome:
    """What the leader publishes: each stage's committed output (stages that succeeded) and trace."""

    records: dict[str, OutputRecord]
    traces: dict[str, StageTrace]


CLASSPATH_FROM_SPARK_HOME = frozenset({"local", "standalone", "yarn"})
"""Launchers whose driver runs with this Spark installation's jars (a Kubernetes driver runs its image's;
a warm pool has started already and reads the storage with its own)."""


class RegionRunner:
    """One run of a region for one try of its leader task."""

    def __init__(
        self,
        leader: LeaderLike,
        plan: DagPlan,
        region: str,
        settings: ConnectionSettings,
        context: Mapping[str, Any],
        waited_since: float | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.leader = leader
        self.log = leader.log
        self.plan = plan
        self.region = region
        self.members: list[str] = list(plan.regions[region])
        self.settings = settings
        self.run = RunContext.of(context)
        self.dag = leader.dag
        self.waited_since = waited_since
        # The leader is the running (rendered) task object; the other members come from the DAG and
        # have their templates rendered in execute().
        self.tasks: dict[str, StageTaskLike] = {
            m: leader if m == leader.task_id else self.dag.get_task(m) for m in self.members
        }
        self.app_name = f"{self.dag.dag_id}.{region} [{self.run.run_id} try {self.run.try_number}]"
        # fsspec options for the storage root (from storage_conn_id); Spark gets the same as spark.hadoop.*.
        self.storage_options = storage_options or {}
        self.folder = RegionFolder(
            settings.storage_root, self.dag.dag_id, self.run.run_id, region, self.run.try_number, self.storage_options
        )
        self.statuses: dict[str, StageStatus] = {}
        self._launcher: Launcher | None = None
        self._handle: LaunchHandle | None = None
        self._killed = False

    # ------------------------------------------------------------------ the sequence

    def execute(self) -> RegionOutcome:
        self.folder.reset(self.members)
        for member in self.members:
            if member != self.leader.task_id:
                self.tasks[member].render_template_fields(self.run.raw)
        clock = time.perf_counter()
        inputs = {m: self.stage_inputs(m) for m in self.members}
        timings = {"inputs_s": time.perf_counter() - clock}
        clock = time.perf_counter()
        decision = self.decide(inputs)
        carrier = choose_carrier(self.settings, decision.sizing, self.tasks)
        launcher = self.pick_launcher(carrier)
        if launcher.capacity_kind == "none":
            timings["decide_s"] = time.perf_counter() - clock
            return self.launch_and_collect(launcher, carrier, decision, inputs, self.warm_capacity(carrier), timings)
        grant = self.reserve(launcher, decision)
        try:
            capacity = CapacityRecord(grant.trace(self.waited_s()))
            if grant.decision.outcome is CapacityOutcome.REDUCED:
                smaller = reduced_profile(self.settings.cluster_profile(), decision.sizing, grant.decision.executors)
                decision = decide_region(self.plan, self.region, inputs, self.config_for, smaller)
                capacity = CapacityRecord(capacity.trace, decision.sizing.executor_instances)
            timings["decide_s"] = time.perf_counter() - clock
            return self.launch_and_collect(launcher, carrier, decision, inputs, capacity, timings)
        finally:
            grant.release()

    def log_lines(self, stage: str) -> list[str]:
        status = self.statuses.get(stage)
        return list(status.log) if status else []

    def kill(self) -> None:
        """Stop the region's application wherever it runs (the launcher knows how)."""
        self._killed = True
        launcher = self._launcher
        if launcher is not None:
            self.log.info("Region %s: %s", self.region, launcher.kill(self._handle))

    # ------------------------------------------------------------------ 1. inputs

    def stage_inputs(self, stage: str) -> StageInputs:
        upstream: dict[str, OutputRecord] = {}
        upstream_parallelism: dict[str, int] = {}
        for exchange in self.plan.stages[stage].inputs:
            if exchange.producer in self.members:
                continue
            value = self.run.ti.xcom_pull(task_ids=exchange.producer, key=OUTPUT_KEY)
            record = OutputRecord.from_xcom(value, upstream=exchange.producer, consumer=stage)
            try:
                self.folder.read_committed(record.path)
            except OutputError as exc:
                raise UpstreamOutputError(
                    f"stage {stage!r} reads from {exchange.producer!r}, whose output is not readable: {exc}; "
                    f"clear and rerun {exchange.producer!r}"
                ) from exc
            upstream[exchange.input_name] = record
            if exchange.distribution is Distribution.FORWARD:
                trace = self.run.ti.xcom_pull(task_ids=exchange.producer, key=TRACE_KEY) or {}
                if "parallelism" in trace:
                    upstream_parallelism[exchange.input_name] = int(trace["parallelism"])
        external = {}
        broadcast = set()
        for name, dataset in self.tasks[stage].external_inputs.items():
            try:
                external[name] = measure_external(
                    dataset.path, dataset.format, storage_options=self.options_for(dataset.path)
                )
            except FileNotFoundError as exc:
                raise FileNotFoundError(f"stage {stage!r}, input {name!r}: {exc}") from exc
            if dataset.broadcast:
                broadcast.add(name)
        return StageInputs(upstream, external, frozenset(broadcast), upstream_parallelism)

    def options_for(self, location: str) -> dict[str, Any] | None:
        """The storage root's credentials for a location in the same store; fsspec's defaults elsewhere."""
        if same_store(location, self.settings.storage_root):
            return self.storage_options
        return None

    # ------------------------------------------------------------------ 2. decide

    def config_for(self, stage: str) -> ParallelismConfig:
        plan = self.plan.stages[stage]
        overrides = {
            k: v
            for k, v in (("min_parallelism", plan.min_parallelism), ("max_parallelism", plan.max_parallelism))
            if v is not None
        }
        try:
            return self.settings.parallelism_config(**overrides)
        except ValueError as exc:
            raise ValueError(f"stage {stage!r}: {exc}") from exc

    def decide(self, inputs: Mapping[str, StageInputs]) -> RegionDecision:
        return decide_region(self.plan, self.region, inputs, self.config_for, self.settings.cluster_profile())

    # ------------------------------------------------------------------ 3. launcher

    def pick_launcher(self, carrier: Carrier) -> Launcher:
        launcher = select(self.settings, carrier.pool, self.log)
        self._launcher = launcher
        if carrier.pool is not None:
            self.log.info("Region %s runs warm in %s: %s", self.region, carrier.pool.url, carrier.reason)
        if launcher.name in CLASSPATH_FROM_SPARK_HOME:
            self.check_storage_reachable()
        return launcher

    def check_storage_reachable(self) -> None:
        """Fail before any work when Spark's classpath has no filesystem for the storage root's scheme."""
        conf: dict[str, str] = {k: str(v) for k, v in self.settings.spark_conf.items()}
        for member in self.members:
            conf.update({k: str(v) for k, v in self.tasks[member].spark_conf.items()})
        try:
            check_spark_filesystem(self.settings.storage_root, spark_home(self.settings.spark_home), conf)
        except StorageConfigError as exc:
            raise StorageConfigError(f"region {self.region} (stages {', '.join(self.members)}): {exc}") from None

    # ------------------------------------------------------------------ 4. capacity (FLIP-138)

    def waited_s(self) -> float | None:
        return time.time() - self.waited_since if self.waited_since else None

    @staticmethod
    def warm_capacity(carrier: Carrier) -> CapacityRecord:
        url = carrier.pool.url if carrier.pool is not None else ""
        # The pool's executors are already running: nothing to declare to the cluster.
        return CapacityRecord(
            {"outcome": "warm_pool", "message": f"runs in the warm pool's running executors ({url})", "source": url}
        )

    def reserve(self, launcher: Launcher, decision: RegionDecision) -> Grant:
        minimums = {m: self.config_for(m).min_parallelism for m in self.members}
        least = minimum_slots(minimums, self.settings.min_slots, decision.sizing.slots)
        request = region_request(decision.sizing, least, count_overhead=launcher.count_overhead)
        key = f"{self.dag.dag_id}/{self.run.run_id}/{self.region}/try={self.run.try_number}"
        stages = ", ".join(self.members)
        try:
            grant = acquire(capacity_source(self.settings), request, key, self.app_name)
        except CapacityImpossible as exc:
            raise CapacityImpossible(f"region {self.region} (stages {stages}): {exc}") from None
        except CapacityWait as exc:
            raise CapacityWait(f"region {self.region} (stages {stages}): {exc}", exc.request) from None
        except CapacityUnavailable as exc:
            raise CapacityUnavailable(
                f"region {self.region}: cannot read the free capacity of {self.settings.master}: {exc}; "
                "the task fails and Airflow retries it if it has retries left"
            ) from None
        self.log.info("Capacity for region %s: %s", self.region, grant.decision.message)
        return grant

    # ------------------------------------------------------------------ 5. launch

    def launch_and_collect(
        self,
        launcher: Launcher,
        carrier: Carrier,
        decision: RegionDecision,
        inputs: Mapping[str, StageInputs],
        capacity: CapacityRecord,
        timings: dict[str, float],
    ) -> RegionOutcome:
        job = build_region_job(
            self.plan, self.region, self.tasks, decision, inputs, self.folder, self.settings, self.config_for
        )
        # A warm region runs with the pool's application settings; only its session settings are its own.
        app_conf = {} if launcher.capacity_kind == "none" else self.application_conf(launcher, decision)
        spark_conf = {stage.name: redact_mapping({**app_conf, **stage.session_conf}) for stage in job.stages}
        spec = LaunchSpec(
            region=self.region,
            app_name=self.app_name,
            job_path=self.folder.write_job(job),
            conf=app_conf,
            timeout_s=self.leader.submit_timeout,
        )
        self.run.ti.xcom_push(
            key=REGION_KEY,
            value={
                "region": self.region,
                "folder": self.folder.path,
                "leader": self.leader.task_id,
                "try_number": self.run.try_number,
                "stages": list(self.members),
            },
        )
        clock, launched = time.perf_counter(), time.time()
        result = self.launch(launcher, spec)
        facts = RegionRunFacts(
            carrier=carrier.trace(),
            capacity=capacity,
            timings={**timings, "submit_s": time.perf_counter() - clock},
            launched_at=launched,
            launch=result,
        )
        outcome = self.collect(decision, facts, spark_conf)
        self.raise_for_failure(result)
        return outcome

    def application_conf(self, launcher: Launcher, decision: RegionDecision) -> dict[str, str]:
        return application_conf(
            decision.sizing,
            self.settings,
            launcher.application_conf(self.app_name),
            [self.tasks[m].spark_conf for m in self.members],
            spark_hadoop_conf(scheme_of(self.settings.storage_root), self.storage_options),
        )

    def launch(self, launcher: Launcher, spec: LaunchSpec) -> LaunchResult:
        live = LiveLink(self.run.ti, launcher.ui_links)  # the Spark UI link, while the application runs

        def on_line(line: str) -> None:
            self.log.info("%s", line)
            live.on_line(line)

        if self._killed:
            raise RuntimeError(f"region {self.region} was killed before it was submitted")
        self._handle = launcher.submit(spec, LaunchEvents(on_line=on_line, on_application=live.on_application))
        return launcher.wait(self._handle)

    # ------------------------------------------------------------------ 6. collect and publish

    def collect(
        self, decision: RegionDecision, facts: RegionRunFacts, spark_conf: Mapping[str, Mapping[str, str]]
    ) -> RegionOutcome:
        records: dict[str, OutputRecord] = {}
        traces: dict[str, StageTrace] = {}
        for member in self.members:
            status = self.folder.read_status(member)
            self.statuses[member] = status or StageStatus(member, "not_run", error="the driver recorded no result")
            trace = stage_trace(
                decision.traces[member], facts, spark_conf[member], status, first=member == self.members[0]
            )
            self.folder.write_trace(trace)
            traces[member] = trace
            if status and status.state == "success":
                records[member] = OutputRecord.from_committed(member, status.output, self.run.try_number)
        return RegionOutcome(records, traces)

    def raise_for_failure(self, result: LaunchResult) -> None:
        from airflow_provider_finegrained.operators.spark_stage import StageFailedError

        for line in result.diagnostics:
            self.log.error("%s", line)
        broken = next((s for s in self.statuses.values() if s.state == "failed"), None)
        if broken is not None:
            raise StageFailedError(
                f"region {self.region} failed in stage {broken.stage!r}: {broken.error}\n{broken.traceback or ''}"
            )
        if result.returncode != 0:
            tail = "\n".join(result.tail[-20:])
            where = "\n".join(result.diagnostics[:5])
            raise StageFailedError(
                f"region {self.region}: spark-submit exited with code {result.returncode} before the stages "
                f"reported (stages {list(self.members)}); last output lines:\n{tail}" + (f"\n{where}" if where else "")
            )
