"""Run a pipelined region as one Spark application, on behalf of the region's leader task.

Gathers what every stage of the region reads (upstream outputs from XCom, external file sizes),
decides parallelism and sizing, writes the region job, submits it with spark-submit, and records each
stage's trace and result where the region's other tasks find them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

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
    minimum_resources_conf,
    minimum_slots,
    reduced_profile,
    region_request,
)
from airflow_provider_finegrained.execution.measure import measure_external
from airflow_provider_finegrained.execution.region_run import RegionDecision, StageInputs, decide_region
from airflow_provider_finegrained.execution.warm_choice import Carrier, choose_carrier
from airflow_provider_finegrained.operators.links import LiveLink
from airflow_provider_finegrained.planning import DagPlan, Distribution, ParallelismConfig
from airflow_provider_finegrained.planning.capacity import CapacityOutcome, ExecutorRequest
from airflow_provider_finegrained.runtime import driver
from airflow_provider_finegrained.runtime.job import InputRef, RegionJob, StageJob, StageStatus, trace_path, write_json
from airflow_provider_finegrained.runtime.output import (
    OutputError,
    cleanup_uncommitted,
    ensure_inside_root,
    output_location,
    read_committed,
    stage_folder,
)
from airflow_provider_finegrained.spark.java import check_java
from airflow_provider_finegrained.spark.process import SparkSubmitProcess, SubmitResult
from airflow_provider_finegrained.spark.submit import (
    SubmitRequest,
    build_spark_submit_command,
    build_spark_submit_env,
    is_secret_key,
    redacted_command,
)

if TYPE_CHECKING:
    from airflow_provider_finegrained.runtime.connect_region import ConnectSessions


class RegionRunner:
    """One run of a region for one try of its leader task."""

    def __init__(
        self,
        leader: Any,
        plan: DagPlan,
        region: str,
        settings: Any,
        context: Any,
        waited_since: float | None = None,
    ) -> None:
        self.leader = leader
        self.plan = plan
        self.region = region
        self.members = plan.regions[region]
        self.settings = settings
        self.context = context
        self.ti = context["ti"]
        self.dag = leader.dag
        self.run_id: str = context["run_id"]
        self.try_number: int = int(self.ti.try_number)
        # The leader is the running (rendered) task object; the other members come from the DAG and
        # have their templates rendered in run().
        self.tasks = {m: leader if m == leader.task_id else self.dag.get_task(m) for m in self.members}
        self.statuses: dict[str, StageStatus] = {}
        self._process: SparkSubmitProcess | None = None
        self._warm: ConnectSessions | None = None
        self._killed = False
        self.waited_since = waited_since
        self.app_name = f"{self.dag.dag_id}.{region} [{self.run_id} try {self.try_number}]"
        self.k8s_driver_pod: str | None = None
        if settings.master_kind == "k8s" and settings.deploy_mode == "cluster":
            # A known pod name lets on_kill delete exactly this driver (spark-submit --kill ns:pod).
            digest = hashlib.sha1(self.app_name.encode("utf-8")).hexdigest()[:16]
            self.k8s_driver_pod = settings.spark_conf.get("spark.kubernetes.driver.pod.name", f"fg-{digest}-driver")

    # ------------------------------------------------------------------ public

    def run(self) -> tuple[dict[str, OutputRecord], dict[str, StageTrace]]:
        root = self.settings.storage_root
        folder = os.path.join(
            stage_folder(root, self.dag.dag_id, self.run_id, "_regions"), self.region, f"try={self.try_number}"
        )
        if os.path.isdir(folder):
            shutil.rmtree(folder)  # an earlier attempt with this try number was killed before it ended
        os.makedirs(folder)
        for member in self.members:
            cleanup_uncommitted(stage_folder(root, self.dag.dag_id, self.run_id, member))
            if member != self.leader.task_id:
                self.tasks[member].render_template_fields(self.context)
        clock = time.perf_counter()
        inputs = {m: self._stage_inputs(m) for m in self.members}
        timings = {"inputs_s": time.perf_counter() - clock}
        clock = time.perf_counter()
        profile = self.settings.cluster_profile()
        decision = decide_region(self.plan, self.region, inputs, self._config_for, profile)
        carrier = choose_carrier(self.settings, decision.sizing, self.tasks)
        for trace in decision.traces.values():
            trace.execution = carrier.trace()
        if carrier.pool is not None:
            return self._run_in_pool(carrier, decision, inputs, folder, timings, clock)
        grant = self._acquire(decision)
        try:
            if grant.decision.outcome is CapacityOutcome.REDUCED:
                smaller = reduced_profile(profile, decision.sizing, grant.decision.executors)
                decision = decide_region(self.plan, self.region, inputs, self._config_for, smaller)
                for trace in decision.traces.values():
                    trace.execution = carrier.trace()
            timings["decide_s"] = time.perf_counter() - clock
            waited_s = time.time() - self.waited_since if self.waited_since else None
            for trace in decision.traces.values():
                trace.capacity = grant.trace(waited_s)
                if grant.decision.outcome is CapacityOutcome.REDUCED:
                    # Each stage keeps its data-driven parallelism (its tasks' memory share is unchanged) and
                    # runs in more waves on the granted executors.
                    trace.capacity["message"] += (
                        f"; sized again on {decision.sizing.executor_instances} executor(s), "
                        f"{trace.waves} wave(s) for this stage"
                    )
            return self._run_decided(decision, inputs, folder, timings)
        finally:
            grant.release()

    def _run_in_pool(
        self,
        carrier: Carrier,
        decision: RegionDecision,
        inputs: Mapping[str, StageInputs],
        folder: str,
        timings: dict[str, float],
        clock: float,
    ) -> tuple[dict[str, OutputRecord], dict[str, StageTrace]]:
        from airflow_provider_finegrained.warm import in_use

        timings["decide_s"] = time.perf_counter() - clock
        pool = carrier.pool
        # The pool's executors are already running: nothing to declare to the cluster.
        for trace in decision.traces.values():
            trace.capacity = {
                "outcome": "warm_pool",
                "message": f"runs in the warm pool's running executors ({pool.url})",
                "source": pool.url,
            }
        self.leader.log.info("Region %s runs warm in %s: %s", self.region, pool.url, carrier.reason)
        with in_use(pool):
            return self._run_decided(decision, inputs, folder, timings, pool=pool)

    def _run_decided(
        self,
        decision: RegionDecision,
        inputs: Mapping[str, StageInputs],
        folder: str,
        timings: dict[str, float],
        pool: Any = None,
    ) -> tuple[dict[str, OutputRecord], dict[str, StageTrace]]:
        job = self._job(decision, inputs, folder)
        # A warm region runs with the pool's application settings; only its session settings are its own.
        app_conf = self._application_conf(decision) if pool is None else {}
        for stage_job in job.stages:
            effective = {**app_conf, **stage_job.session_conf}
            decision.traces[stage_job.name].spark_conf = {
                k: "***" if is_secret_key(k) else v for k, v in sorted(effective.items())
            }
        job_path = job.dump()
        self.ti.xcom_push(
            key=REGION_KEY,
            value={
                "region": self.region,
                "folder": folder,
                "leader": self.leader.task_id,
                "try_number": self.try_number,
                "stages": list(self.members),
            },
        )
        clock, launched = time.perf_counter(), time.time()
        result = self._submit(app_conf, job_path) if pool is None else self._run_warm(job, pool)
        timings["submit_s"] = time.perf_counter() - clock
        records: dict[str, OutputRecord] = {}
        for member in self.members:
            status = StageStatus.read(job.status_path(member))
            self.statuses[member] = status or StageStatus(member, "not_run", error="the driver recorded no result")
            trace = decision.traces[member]
            trace.application_id = result.application_id or (status.application_id if status else None)
            if status and status.output:
                trace.output_bytes = sum(status.output["partition_bytes"])
                trace.output_rows = status.output["rows"]
            if status:
                trace.started_at, trace.ended_at = status.started_at, status.ended_at
                trace.spark_tasks = status.spark_tasks
            trace.timings = {**timings, **_stage_seconds(status)}
            if member == self.members[0] and status and status.ready_at:
                # Start latency: from launching the region to its first stage holding a ready session.
                trace.timings["start_s"] = datetime.fromisoformat(status.ready_at).timestamp() - launched
            if self._warm is not None and member in self._warm.session_ids:
                trace.execution["session"] = self._warm.session_ids[member]
            write_json(trace_path(folder, member), trace.to_xcom())
            if status and status.state == "success":
                records[member] = OutputRecord.from_committed(member, status.output, self.try_number)
        self._raise_for_failure(result)
        return records, decision.traces

    def log_lines(self, stage: str) -> list[str]:
        status = self.statuses.get(stage)
        return list(status.log) if status else []

    def kill(self) -> None:
        self._killed = True
        if self._warm is not None:
            self._warm.interrupt()  # this region's session only: the pool and other regions go on
        process = self._process
        if process is None:
            return
        process.kill()
        if self.settings.deploy_mode == "cluster":
            self._kill_cluster_driver(process.driver_id, process.application_id)

    def _kill_cluster_driver(self, driver_id: str | None, application_id: str | None) -> None:
        """In cluster mode the driver runs on the cluster: killing spark-submit leaves it running there."""
        from airflow_provider_finegrained.spark import cluster_managers, standalone_driver

        settings, log = self.settings, self.leader.log
        if settings.master_kind == "standalone" and driver_id:
            urls = settings.webui_json_urls()
            state = standalone_driver.kill_driver(
                settings.master.split(",")[0],
                driver_id,
                spark_home=settings.spark_home,
                webui_json_url=urls[0] if urls else None,
            )
            log.info("Driver %s on %s ended: %s", driver_id, settings.master, state)
        elif settings.master_kind == "yarn" and application_id and settings.yarn_resourcemanager_url:
            state = cluster_managers.kill_yarn_app(settings.yarn_resourcemanager_url, application_id)
            log.info("YARN application %s: %s", application_id, state)
        elif settings.master_kind == "k8s" and self.k8s_driver_pod:
            namespace = settings.spark_conf.get("spark.kubernetes.namespace", "default")
            command = cluster_managers.k8s_kill_command(
                settings.master, namespace, self.k8s_driver_pod, spark_home=settings.spark_home
            )
            subprocess.run(command, check=False, timeout=120)
            log.info("Asked Kubernetes to delete driver pod %s/%s", namespace, self.k8s_driver_pod)
        else:
            log.warning(
                "The driver of region %s runs on %s and could not be stopped from here (driver %s, application %s)",
                self.region,
                settings.master,
                driver_id,
                application_id,
            )

    # ------------------------------------------------------------------ capacity (FLIP-138)

    def _request(self, decision: RegionDecision) -> ExecutorRequest:
        minimums = {m: self._config_for(m).min_parallelism for m in self.members}
        least = minimum_slots(minimums, self.settings.min_slots, decision.sizing.slots)
        return region_request(decision.sizing, least, count_overhead=self.settings.master_kind != "standalone")

    def _acquire(self, decision: RegionDecision) -> Grant:
        source = capacity_source(self.settings)
        key = f"{self.dag.dag_id}/{self.run_id}/{self.region}/try={self.try_number}"
        try:
            grant = acquire(source, self._request(decision), key, self.app_name)
        except CapacityImpossible as exc:
            raise CapacityImpossible(f"region {self.region} (stages {', '.join(self.members)}): {exc}") from None
        except CapacityWait as exc:
            raise CapacityWait(f"region {self.region} (stages {', '.join(self.members)}): {exc}", exc.request) from None
        except CapacityUnavailable as exc:
            raise CapacityUnavailable(
                f"region {self.region}: cannot read the free capacity of {self.settings.master}: {exc}; "
                "the task fails and Airflow retries it if it has retries left"
            ) from None
        self.leader.log.info("Capacity for region %s: %s", self.region, grant.decision.message)
        return grant

    # ------------------------------------------------------------------ inputs and decisions

    def _config_for(self, stage: str) -> ParallelismConfig:
        plan = self.plan.stages[stage]
        overrides = {
            k: v
            for k, v in (("min_parallelism", plan.min_parallelism), ("max_parallelism", plan.max_parallelism))
            if v is not None
        }
        try:
            config: ParallelismConfig = self.settings.parallelism_config(**overrides)
        except ValueError as exc:
            raise ValueError(f"stage {stage!r}: {exc}") from exc
        return config

    def _stage_inputs(self, stage: str) -> StageInputs:
        upstream: dict[str, OutputRecord] = {}
        upstream_parallelism: dict[str, int] = {}
        for exchange in self.plan.stages[stage].inputs:
            if exchange.producer in self.members:
                continue
            value = self.ti.xcom_pull(task_ids=exchange.producer, key=OUTPUT_KEY)
            record = OutputRecord.from_xcom(value, upstream=exchange.producer, consumer=stage)
            try:
                read_committed(record.path)
            except OutputError as exc:
                raise UpstreamOutputError(
                    f"stage {stage!r} reads from {exchange.producer!r}, whose output is not readable: {exc}; "
                    f"clear and rerun {exchange.producer!r}"
                ) from exc
            upstream[exchange.input_name] = record
            if exchange.distribution is Distribution.FORWARD:
                trace = self.ti.xcom_pull(task_ids=exchange.producer, key=TRACE_KEY) or {}
                if "parallelism" in trace:
                    upstream_parallelism[exchange.input_name] = int(trace["parallelism"])
        external = {}
        broadcast = set()
        for name, dataset in self.tasks[stage].external_inputs.items():
            try:
                external[name] = measure_external(dataset.path, dataset.format)
            except FileNotFoundError as exc:
                raise FileNotFoundError(f"stage {stage!r}, input {name!r}: {exc}") from exc
            if dataset.broadcast:
                broadcast.add(name)
        return StageInputs(upstream, external, frozenset(broadcast), upstream_parallelism)

    # ------------------------------------------------------------------ the job

    def _job(self, decision: RegionDecision, inputs: Mapping[str, StageInputs], folder: str) -> RegionJob:
        from pyspark import cloudpickle

        stages = []
        for member in self.members:
            task = self.tasks[member]
            refs = []
            for exchange in self.plan.stages[member].inputs:
                broadcast = exchange.distribution is Distribution.BROADCAST
                if exchange.producer in self.members:
                    refs.append(InputRef(exchange.input_name, "stage", stage=exchange.producer, broadcast=broadcast))
                else:
                    record = inputs[member].upstream[exchange.input_name]
                    refs.append(
                        InputRef(
                            exchange.input_name,
                            "committed",
                            path=record.path,
                            format=record.format,
                            broadcast=broadcast,
                        )
                    )
            for name, dataset in task.external_inputs.items():
                refs.append(
                    InputRef(
                        name,
                        "external",
                        path=dataset.path,
                        format=dataset.format,
                        options=dict(dataset.options),
                        broadcast=dataset.broadcast,
                    )
                )
            callable_path = None
            if task.python_callable is not None:
                callable_path = os.path.join(folder, f"callable-{member}.pkl")
                with open(callable_path, "wb") as handle:
                    handle.write(_pickle_by_value(cloudpickle, task.python_callable))
            needs_output = bool(decision.outside_consumers[member]) or not decision.in_region_consumers[member]
            stages.append(
                StageJob(
                    name=member,
                    inputs=refs,
                    session_conf={
                        **decision.sizing.stages[member].session_conf(),
                        **self._adaptive_conf(member),
                        **{k: str(v) for k, v in task.spark_conf.items() if k.startswith("spark.sql.")},
                    },
                    output_location=self._output_location(task) if needs_output or task.output_path else None,
                    output_format=task.output_format,
                    callable_path=callable_path,
                    application=task.application,
                    application_args=[str(a) for a in task.application_args],
                    kwargs=dict(task.op_kwargs),
                    handover=bool(decision.in_region_consumers[member]),
                )
            )
        return RegionJob(
            self.region, self.dag.dag_id, self.run_id, self.try_number, self.settings.storage_root, folder, stages
        )

    def _output_location(self, task: Any) -> str:
        root = self.settings.storage_root
        if task.output_path:
            try:
                return ensure_inside_root(root, task.output_path)
            except ValueError as exc:
                raise ValueError(
                    f"stage {task.task_id!r}: output_path {task.output_path!r} is outside the storage root "
                    f"{root!r}; give a path inside it or leave output_path unset"
                ) from exc
        return output_location(root, self.dag.dag_id, self.run_id, task.task_id, self.try_number)

    def _adaptive_conf(self, stage: str) -> dict[str, str]:
        if not self.settings.adaptive_query_execution:
            return {"spark.sql.adaptive.enabled": "false"}
        # AQE stays on as an in-query correction: the decided parallelism is an upper bound that AQE
        # may coalesce towards the same bytes per task when filters leave less data than planned.
        per_task = self._config_for(stage).avg_bytes_per_task
        return {
            "spark.sql.adaptive.enabled": "true",
            "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
            "spark.sql.adaptive.advisoryPartitionSizeInBytes": str(per_task),
        }

    def _application_conf(self, decision: RegionDecision) -> dict[str, str]:
        conf = {
            "spark.ui.showConsoleProgress": "false",
            **decision.sizing.application_conf(),
            **minimum_resources_conf(self.settings.resource_bounds(), decision.sizing),
        }
        if not decision.sizing.local:
            # Local mode sizes the driver as the executors; elsewhere the driver keeps the connection's size.
            conf["spark.driver.memory"] = f"{self.settings.driver_memory // 2**20}m"
            # Even spread (FLIP-370): start the first tasks only once every granted executor has registered;
            # Spark's default starts on the first one, which then takes the first wave almost alone.
            conf["spark.scheduler.minRegisteredResourcesRatio"] = "1.0"
            conf["spark.scheduler.maxRegisteredResourcesWaitingTime"] = "60s"
        if self.k8s_driver_pod:
            conf["spark.kubernetes.driver.pod.name"] = self.k8s_driver_pod
        conf.update({k: str(v) for k, v in self.settings.spark_conf.items()})
        for member in self.members:
            conf.update({k: str(v) for k, v in self.tasks[member].spark_conf.items() if not k.startswith("spark.sql.")})
        return conf

    def _submit(self, app_conf: dict[str, str], job_path: str) -> Any:
        check_java(self.settings.java_home)
        env = {"PYTHONUNBUFFERED": "1"}
        if self.settings.java_home:
            env["JAVA_HOME"] = self.settings.java_home
        if self.settings.master.startswith("local"):
            env.setdefault("SPARK_LOCAL_IP", os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"))
        request = SubmitRequest(
            application=os.path.abspath(driver.__file__),
            master=self.settings.master,
            deploy_mode=self.settings.deploy_mode,
            name=self.app_name,
            conf=app_conf,
            application_args=[job_path],
            env=env,
        )
        command = build_spark_submit_command(request, self.settings.spark_home)
        log = self.leader.log
        log.info(
            "Submitting region %s (%s) to %s: %s",
            self.region,
            ", ".join(self.members),
            self.settings.master,
            " ".join(redacted_command(command)),
        )
        live = LiveLink(self.ti, self.settings)  # the Spark UI link, while the application runs

        def on_line(line: str) -> None:
            log.info("%s", line)
            live.on_line(line)

        def on_app_id(app_id: str) -> None:
            log.info("Spark application id: %s", app_id)
            if not app_id.startswith("driver-"):  # standalone cluster mode reports its driver's id too
                live.on_application(app_id)

        process = SparkSubmitProcess(
            command,
            build_spark_submit_env(request, spark_home=self.settings.spark_home),
            on_line=on_line,
            app_id_callback=on_app_id,
            timeout=self.leader.submit_timeout,
        )
        self._process = process
        if self._killed:
            raise RuntimeError(f"region {self.region} was killed before it was submitted")
        process.start()
        return process.wait()

    def _run_warm(self, job: RegionJob, pool: Any) -> SubmitResult:
        from airflow_provider_finegrained.runtime.connect_region import ConnectSessions, run_region_warm

        sessions = ConnectSessions(pool.url, pool.ui_url, own_pool=pool.folder is not None)
        self._warm = sessions
        if self._killed:
            raise RuntimeError(f"region {self.region} was killed before it started")
        clock = time.perf_counter()
        failed = run_region_warm(job, sessions)
        return SubmitResult(
            returncode=1 if failed else 0,
            application_id=sessions.application_id or pool.application_id,
            duration_s=time.perf_counter() - clock,
            killed=self._killed,
        )

    def _raise_for_failure(self, result: Any) -> None:
        from airflow_provider_finegrained.operators.spark_stage import StageFailedError

        broken = next((s for s in self.statuses.values() if s.state == "failed"), None)
        if broken is not None:
            raise StageFailedError(
                f"region {self.region} failed in stage {broken.stage!r}: {broken.error}\n{broken.traceback or ''}"
            )
        if result.returncode != 0:
            tail = "\n".join(result.tail[-20:])
            raise StageFailedError(
                f"region {self.region}: spark-submit exited with code {result.returncode} before the stages "
                f"reported (stages {list(self.members)}); last output lines:\n{tail}"
            )


def _stage_seconds(status: StageStatus | None) -> dict[str, float]:
    if status is None or not status.started_at or not status.ended_at:
        return {}
    started, ended = datetime.fromisoformat(status.started_at), datetime.fromisoformat(status.ended_at)
    return {"spark_stage_s": (ended - started).total_seconds()}


def _pickle_by_value(cloudpickle: Any, fn: Any) -> bytes:
    """Pickle ``fn`` with the code of its module, so the driver needs no access to the DAG folder."""
    import sys

    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    by_value = module is not None and _is_user_module(module)
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        data: bytes = cloudpickle.dumps(fn)
        return data
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)


def _is_user_module(module: Any) -> bool:
    path = getattr(module, "__file__", None) or ""
    return bool(path) and "site-packages" not in path and not path.startswith(os.path.dirname(os.__file__))
