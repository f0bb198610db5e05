"""Run a pipelined region as one Spark application, on behalf of the region's leader task.

A short sequence, one step each below: gather the stages' inputs, decide (pure, ``decide_region``),
pick a launcher (the warm pool or the master URL's cluster manager), reserve capacity, launch, collect
what the driver recorded, and publish each stage's trace (built once) where the region's other tasks
find it. Which cluster manager is in use is the launcher's business only. The run writes no XCom: the
leader's task hears of it through a ``RunReport`` (``operators.task_report``), and maps how it ended
(``execution.region_outcome``) to publish, defer or raise.

In cluster deploy mode the application outlives the task on purpose: its handle goes to the task state
store as soon as the cluster manager has named it, a retried leader reattaches to it instead of
submitting again (Airflow's resumable-job pattern), and a deferrable leader leaves following it to
``RegionApplicationTrigger``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_finegrained.execution.capacity_gate import Grant, reduced_profile
from airflow_provider_finegrained.execution.decision import RegionDecision, StageInputs
from airflow_provider_finegrained.execution.history_store import RegionHistory
from airflow_provider_finegrained.execution.reattach import (
    ApplicationRecord,
    follower_of,
    remote_result,
)
from airflow_provider_finegrained.execution.region_capacity import reserve_capacity, warm_capacity
from airflow_provider_finegrained.execution.region_collect import collect_region, failure_of
from airflow_provider_finegrained.execution.region_context import (
    LeaderLike,
    RunContext,
    RunFacts,
    RunReport,
    Succeeded,
    member_context,
)
from airflow_provider_finegrained.execution.region_folder import RegionFolder
from airflow_provider_finegrained.execution.region_inputs import gather_inputs, peers_ran_with
from airflow_provider_finegrained.execution.region_job import StageTaskLike, application_conf, build_region_job
from airflow_provider_finegrained.execution.region_launch import Submission
from airflow_provider_finegrained.execution.region_outcome import AwaitApplication, AwaitCapacity, Failed, RegionOutcome
from airflow_provider_finegrained.execution.region_setup import (
    HostArchive,
    check_storage_reachable,
    region_decision,
    stage_config,
    with_jvm_start,
    with_python_env,
)
from airflow_provider_finegrained.execution.region_trace import CapacityRecord, RegionRunFacts
from airflow_provider_finegrained.execution.warm_choice import Carrier, choose_carrier
from airflow_provider_finegrained.launchers.base import Launcher, LaunchHandle, LaunchResult, LaunchSpec, LaunchStatus
from airflow_provider_finegrained.launchers.remote import RemoteApplication
from airflow_provider_finegrained.launchers.select import select, submit_launcher
from airflow_provider_finegrained.planning import ClusterProfile, DagPlan, ParallelismConfig
from airflow_provider_finegrained.planning.capacity import CapacityOutcome
from airflow_provider_finegrained.runtime.job import StageStatus
from airflow_provider_finegrained.secrets import redact_mapping
from airflow_provider_finegrained.storage.hadoop_conf import spark_hadoop_conf
from airflow_provider_finegrained.storage.locations import scheme_of

if TYPE_CHECKING:
    from airflow_provider_finegrained.hooks.settings import ConnectionSettings


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
        report: RunReport,
        waited_since: float | None = None,
        storage_options: dict[str, Any] | None = None,
        deferrable: bool = False,
    ) -> None:
        self.leader = leader
        self.log = leader.log
        self.plan = plan
        self.region = region
        self.members: list[str] = list(plan.regions[region])
        self.settings = settings
        self.run = RunContext.of(context)
        self.report = report
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
        self.deferrable = deferrable
        self.statuses: dict[str, StageStatus] = {}
        self.history = RegionHistory.for_run(settings, self.dag.dag_id, self.run.run_id, self.storage_options, self.log)
        self._launcher: Launcher | None = None
        self._remote: RemoteApplication | None = None
        self._grant: Grant | None = None
        self.host_archive = HostArchive(settings)
        self.record = ApplicationRecord(
            settings,
            self.run.state_store,
            self.log,
            region,
            self.members,
            leader.task_id,
            self.dag.dag_id,
            self.run.run_id,
            self.run.try_number,
            self.storage_options,
        )
        self.submission = Submission(
            settings, self.record, self.log, region, self.members, leader.task_id, leader.submit_timeout, deferrable
        )

    # ------------------------------------------------------------------ the sequence

    def execute(self) -> RegionOutcome:
        prior = self.record.prior_application()
        if isinstance(prior, Failed):
            return prior
        if prior is not None:
            handle, status = prior
            reason = f"reattached to {handle.remote_id} submitted by try {handle.try_number}"
            self.log.info(
                "Region %s: %s (%s); not submitting again, collecting from %s",
                self.region,
                reason,
                status.detail or status.state,
                handle.region_folder,
            )
            facts = RunFacts(
                {"mode": "cold", "reason": reason},
                {"outcome": "reattached", "message": f"capacity was granted to try {handle.try_number}"},
            )
            self.record.adopt(handle)
            return self.follow(handle, facts, status)
        self.folder.reset(self.members)
        self.render_members()
        clock = time.perf_counter()
        inputs = self.gather_inputs()
        timings = {"inputs_s": time.perf_counter() - clock}
        clock = time.perf_counter()
        decision = self.decide(inputs)
        carrier = choose_carrier(self.settings, decision.sizing, self.tasks)
        launcher = self.pick_launcher(carrier)
        if launcher.capacity_kind == "none":
            timings["decide_s"] = time.perf_counter() - clock
            return self.launch_and_collect(launcher, carrier, decision, inputs, warm_capacity(carrier), timings)
        grant = self.reserve(launcher, decision)
        if not isinstance(grant, Grant):
            return grant
        try:
            capacity = CapacityRecord(grant.trace(self.waited_s()))
            if grant.decision.outcome is CapacityOutcome.REDUCED:
                smaller = reduced_profile(self.settings.cluster_profile(), decision.sizing, grant.decision.executors)
                decision = self.decide(inputs, smaller)
                capacity = CapacityRecord(capacity.trace, decision.sizing.executor_instances)
            timings["decide_s"] = time.perf_counter() - clock
            return self.launch_and_collect(launcher, carrier, decision, inputs, capacity, timings)
        finally:
            self._grant = None
            grant.release()

    def render_members(self) -> None:
        """Render each other member's templates with its own task context (Airflow rendered the leader's)."""
        for member in self.members:
            if member != self.leader.task_id:
                task = self.tasks[member]
                task.render_template_fields(member_context(self.run.raw, task))

    def log_lines(self, stage: str) -> list[str]:
        status = self.statuses.get(stage)
        return list(status.log) if status else []

    def kill(self) -> None:
        """Stop the region's application wherever it runs (the launcher knows how)."""
        self.submission.killed = True  # no submission, first or again, is made after this
        grant, self._grant = self._grant, None
        if grant is not None:
            # First, and fast: Airflow SIGKILLs a stopped task within seconds, and a reservation left behind would
            # hold the cluster's capacity from every other region until it goes stale (15 min from another host).
            try:
                grant.release()
            except Exception as exc:  # storage out of reach (a host cut off): still stop the application
                self.log.warning("Region %s: its capacity reservation stays until it goes stale: %s", self.region, exc)
        launcher, remote = self._launcher, self._remote
        handle = self.submission.handle  # the application this try submitted, once submitted
        follower = follower_of(handle, self.storage_options)
        if remote is None and follower is not None:
            # A try cut off from Airflow (its host lost the network) is stopped when it comes back: the retry
            # that reattached owns the application now, and killing it would fail the retry too.
            self.log.info("Region %s: try %d follows the application now; leaving it running", self.region, follower)
            return
        if remote is not None:  # reattached: no process of this try runs it
            self.log.info("Region %s: %s", self.region, remote.kill())
        elif launcher is not None:
            self.log.info("Region %s: %s", self.region, launcher.kill(handle))

    # ------------------------------------------------------------------ 0. follow an application not started here

    def follow(self, handle: LaunchHandle, facts: RunFacts, status: LaunchStatus | None = None) -> RegionOutcome:
        """Collect the region from ``handle``'s application, which this process did not start (a retry that
        reattached, or the leader back from its deferral): no reset, no capacity, no submit. The region folder
        and output fencing token stay those of the try that submitted it."""
        self.folder = RegionFolder(
            self.settings.storage_root,
            self.dag.dag_id,
            self.run.run_id,
            self.region,
            handle.try_number,
            self.storage_options,
        )
        self.render_members()
        clock = time.perf_counter()
        inputs = self.gather_inputs()
        timings = {**facts.timings, "inputs_s": time.perf_counter() - clock}
        # Decided again (pure and deterministic) for the trace, on the executors the application got.
        decision = self.decide(inputs)
        if facts.reduced_to_executors is not None:
            smaller = reduced_profile(self.settings.cluster_profile(), decision.sizing, facts.reduced_to_executors)
            decision = self.decide(inputs, smaller)
        self.push_region_info(handle.try_number)
        self._remote = RemoteApplication(self.settings, handle)
        self.record.stored = True  # back from a deferral, the handle is in the store
        if status is None or not status.done:
            if self.deferrable:
                return AwaitApplication(handle, facts)
            followed = self.record.follow(self._remote, handle, self.leader.submit_timeout)
            if isinstance(followed, Failed):
                return followed
            status = followed
        result = remote_result(handle, status)
        run_facts = RegionRunFacts(
            carrier=facts.carrier,
            capacity=CapacityRecord(facts.capacity, facts.reduced_to_executors),
            timings=timings,
            launched_at=handle.submitted_at or time.time(),
            launch=result,
        )
        app_conf = self.application_conf(submit_launcher(self.settings, self.log), decision)
        spark_conf = {m: redact_mapping({**app_conf, **decision.session_conf(m)}) for m in self.members}
        outcome = self.collect(decision, run_facts, spark_conf)
        self.record.forget()
        ended = f"application {handle.remote_id} (submitted by try {handle.try_number}) ended {status.state}"
        return self.failure_of(result, ended) or outcome

    # ------------------------------------------------------------------ 1. inputs

    def gather_inputs(self) -> dict[str, StageInputs]:
        external = {m: self.tasks[m].external_inputs for m in self.members}
        return gather_inputs(
            self.plan,
            self.members,
            external,
            self.run.ti,
            self.folder,
            self.settings.storage_root,
            self.storage_options,
        )

    # ------------------------------------------------------------------ 2. decide

    def config_for(self, stage: str) -> ParallelismConfig:
        return stage_config(self.settings, self.plan, stage)

    def decide(self, inputs: Mapping[str, StageInputs], profile: ClusterProfile | None = None) -> RegionDecision:
        profile = profile or self.settings.cluster_profile()
        learned = self.history.learned(self.members)
        ran_with = peers_ran_with(self.plan, self.region, self.run.ti)
        return region_decision(self.settings, self.plan, self.region, self.tasks, inputs, profile, learned, ran_with)

    # ------------------------------------------------------------------ 3. launcher

    def pick_launcher(self, carrier: Carrier) -> Launcher:
        launcher = select(self.settings, carrier.pool, self.log)
        self._launcher = launcher
        if carrier.pool is not None:
            self.log.info("Region %s runs warm in %s: %s", self.region, carrier.pool.url, carrier.reason)
        if launcher.name in CLASSPATH_FROM_SPARK_HOME:
            confs = [self.tasks[m].spark_conf for m in self.members]
            check_storage_reachable(self.settings, self.region, self.members, confs)
        return launcher

    # ------------------------------------------------------------------ 4. capacity (FLIP-138)

    def waited_s(self) -> float | None:
        return time.time() - self.waited_since if self.waited_since else None

    def reserve(self, launcher: Launcher, decision: RegionDecision) -> Grant | AwaitCapacity | Failed:
        reserved = reserve_capacity(
            self.settings,
            self.storage_options,
            launcher,
            self.application_conf(launcher, decision),
            decision.sizing,
            {m: self.config_for(m).min_parallelism for m in self.members},
            self.region,
            self.members,
            f"{self.dag.dag_id}/{self.run.run_id}/{self.region}/try={self.run.try_number}",
            self.app_name,
            self.log,
        )
        if isinstance(reserved, Grant):
            self._grant = reserved
        return reserved

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
        job = build_region_job(self.plan, self.region, self.tasks, decision, inputs, self.folder, self.settings)
        # A warm region runs with the pool's application settings; only its session settings are its own.
        app_conf = {} if launcher.capacity_kind == "none" else self.application_conf(launcher, decision)
        spark_conf = {m: redact_mapping({**app_conf, **decision.session_conf(m)}) for m in self.members}
        spec = LaunchSpec(
            region=self.region,
            app_name=self.app_name,
            job_path=self.folder.write_job(job),
            conf=app_conf,
            timeout_s=self.leader.submit_timeout,
        )
        self.push_region_info(self.run.try_number)
        clock, launched = time.perf_counter(), time.time()
        carried = RunFacts(carrier.trace(), dict(capacity.trace), capacity.reduced_to_executors, dict(timings))
        result = self.launch(launcher, spec, carried)
        if not isinstance(result, LaunchResult):
            return result
        restarted = self.submission.restarted
        facts = RegionRunFacts(
            carrier=carrier.trace() | ({"restarted": restarted} if restarted else {}),
            capacity=capacity,
            timings={**timings, "submit_s": time.perf_counter() - clock},
            launched_at=launched,
            launch=result,
        )
        outcome = self.collect(decision, facts, spark_conf)
        self.record.forget()  # collected: a retry from here on submits its own application
        return self.failure_of(result) or outcome

    def application_conf(self, launcher: Launcher, decision: RegionDecision) -> dict[str, str]:
        conf = application_conf(
            decision,
            self.settings,
            launcher.application_conf(self.app_name),
            [self.tasks[m].spark_conf for m in self.members],
            spark_hadoop_conf(scheme_of(self.settings.storage_root), self.storage_options),
        )
        # Spark's OpenLineage listener (when the user has it) links its events to the leader's task.
        conf = conf | self.report.lineage_conf(conf)
        conf = with_python_env(self.settings, self.storage_options, launcher, conf, self.log, self.region)
        return with_jvm_start(self.settings, decision, conf, self.host_archive.path())

    def push_region_info(self, try_number: int) -> None:
        """Where the region's other tasks find its results (the folder of the try whose application ran)."""
        self.report.region_info(self.region, self.folder.path, self.leader.task_id, try_number, self.members)

    def launch(self, launcher: Launcher, spec: LaunchSpec, facts: RunFacts) -> LaunchResult | AwaitApplication | Failed:
        if self.submission.killed:
            return Failed(RuntimeError(f"region {self.region} was killed before it was submitted"))
        live = self.report.live_link(launcher.ui_links)  # the Spark UI link, while the application runs
        return self.submission.launch(launcher, spec, facts, live, self.folder.path, self.run.try_number)

    # ------------------------------------------------------------------ 6. collect and publish

    def collect(
        self, decision: RegionDecision, facts: RegionRunFacts, spark_conf: Mapping[str, Mapping[str, str]]
    ) -> Succeeded:
        args = (self.folder, decision, facts, spark_conf, self.history, self.log, self.statuses)
        return collect_region(self.region, self.members, *args)

    def failure_of(self, result: LaunchResult, ended: str | None = None) -> Failed | None:
        return failure_of(self.region, self.members, self.statuses, result, self.log, ended)
