"""A Spark application's life in the simulation: its start, its executors and tasks, and dynamic allocation.

A stage runs as a scan phase (file splits) then a shuffle phase; a phase's tasks are equal, each taking
``CostModel.task_seconds`` on one core. Stages of one application run one after another. With a
:class:`~bench.simulate.loopback.LoopbackModel`, every start, executor start and task is CPU work on a few
shared physical cores; without one, each takes its cost model's seconds on its own core.
"""

from __future__ import annotations

import math
from typing import Any

from bench.simulate.state import App, SimulationState


class Applications(SimulationState):
    """Applications start, get executors, run their phases' tasks and give executors back."""

    # --- an application's start ----------------------------------------------------------------------------

    def _airflow_start(self, tasks: int, callback: Any, *args: Any) -> None:
        """Airflow (loopback): the scheduler's delay, then ``tasks`` fresh task processes, then ``callback``."""
        assert self.loopback is not None and self.cpu is not None
        cpu, work = self.cpu, self.loopback.airflow_task_cpu_s
        self.loop.after(self.loopback.scheduler_delay_s, cpu.run, work, float(tasks), callback, *args)

    def _start_app(self, app: App) -> None:
        """The application's start in three parts: to its SparkContext's beginning (an event log's
        ApplicationStart), to its registration (a static application's executors are launched now), then the
        driver's own start before its first job."""
        self.metrics.applications += 1
        self._app_start_part(app, self.context_share, self._context_began)

    def _context_began(self, app: App) -> None:
        app.queued_at = self.loop.now
        self._app_start_part(app, self.cost.app_registered_share - self.context_share, self._registered)

    def _app_start_part(self, app: App, share: float, callback: Any) -> None:
        if self.cpu is not None and self.loopback is not None:
            threads = self.loopback.app_threads
            self.cpu.run(self.loopback.app_cpu_s * share / threads, threads, callback, app)
        else:
            self.loop.after(self.cost.app_start_s * share, callback, app)

    def _registered(self, app: App) -> None:
        self._account(app)
        app.blocked = True
        if self.at_first_job:
            # Asked for at the first job (_backlog), from the ledger's places first; cluster_queue holds none.
            app.held = 0 if self.queue else app.want
        elif self.provider:
            app.target = app.want  # initial = max = what the capacity decision admitted
            self._granted(app, app.want)  # places held since the capacity decision
        elif self.policy.name == "fixed":
            self.cluster.request(app, app.want)
        self._app_start_part(app, 1.0 - self.cost.app_registered_share, self._driver_started)

    def _driver_started(self, app: App) -> None:
        self._account(app)
        app.blocked = False
        self._driver_work(app)
        self._job_submitted(app)
        self._fill(app)

    # --- executors and tasks ---------------------------------------------------------------------------

    def _granted(self, owner: object, executors: int) -> None:
        app: App = owner  # type: ignore[assignment]
        now = self.loop.now
        app.granted += executors
        self._granted_live += executors
        self.metrics.reserved_core_s -= now * executors * self.spec.executor_cores
        state = app.run
        if now < self.metrics.first_executor[state.index]:
            self.metrics.first_executor[state.index] = now
        if self.cpu is not None and self.loopback is not None:
            self.cpu.run(self.loopback.executor_cpu_s, float(executors), self._executor_ready, app, executors)
        else:
            self.loop.after(self.cost.executor_start_s, self._executor_ready, app, executors)

    def _release(self, app: App, executors: int) -> None:
        app.granted -= executors
        self._granted_live -= executors
        self._added_live -= executors
        self.metrics.reserved_core_s += self.loop.now * executors * self.spec.executor_cores
        self.metrics.added_core_s += self.loop.now * executors * self.spec.executor_cores
        self.cluster.release(executors)
        if self.waiting_regions:
            self._retry_waiting()

    def _executor_ready(self, app: App, executors: int) -> None:
        self.metrics.added_core_s -= self.loop.now * executors * self.spec.executor_cores
        self._added_live += executors
        if app.queued_at >= 0:
            self.metrics.app_queue_sum_s += self.loop.now - app.queued_at
            app.queued_at = -1.0
            self._drop_hold(app)
        if app.done:
            self._release(app, executors)
            return
        self._account(app)
        app.ready += executors
        app.cold += executors
        self._fill(app)
        self._maybe_idle(app)

    def _account(self, app: App) -> None:
        """Ready executor cores without a task since the last change: waiting on the driver, or on nothing."""
        now = self.loop.now
        idle = (app.ready * self.spe - app.running) * (now - app.mark)
        if app.blocked:
            self.metrics.idle_driver_core_s += idle
        else:
            self.metrics.idle_slot_core_s += idle
        app.mark = now

    def _driver_work(self, app: App) -> None:
        """The phase starting now waits for the driver's work on it, if any (executors stay held)."""
        seconds = app.phases[app.phase].driver_s + self.driver_job_s
        if seconds <= 0:
            return
        self._account(app)
        app.blocked = True
        if self.cpu is not None:
            self.cpu.run(seconds, 1.0, self._driver_done, app)
        else:
            self.loop.after(seconds, self._driver_done, app)

    def _driver_done(self, app: App) -> None:
        self._account(app)
        app.blocked = False
        self._job_submitted(app)
        self._fill(app)
        self._maybe_idle(app)

    def _fill(self, app: App) -> None:
        free = app.ready * self.spe - app.running
        if free <= 0 or app.pending <= 0 or app.blocked:
            return
        phase = app.phases[app.phase]
        count = min(free, app.pending)
        app.pending -= count
        self._account(app)
        app.running += count
        app.activity += 1
        self.metrics.tasks += count
        if phase.spills:
            self.metrics.spilled_tasks += count
        seconds = phase.task_s
        if app.cold:  # a fresh executor's first task loads classes and warms the JIT
            warm = min(app.cold, count)
            app.cold -= warm
            count -= warm
            self._run_tasks(app, warm, seconds + self.warmup_s)
        if count:
            self._run_tasks(app, count, seconds)

    def _run_tasks(self, app: App, count: int, seconds: float) -> None:
        """Equal tasks started together end together: one event (or CPU job) for the batch."""
        if self.cpu is not None:
            self.cpu.run(seconds, float(count), self._task_done, app, count, self.loop.now)
        else:
            self.loop.after(seconds, self._task_done, app, count, self.loop.now)

    def _task_done(self, app: App, count: int, launched: float) -> None:
        # Used as an event log counts it: each task's launch to finish (wall, not CPU, on a shared machine).
        self.metrics.used_core_s += (self.loop.now - launched) * count
        self._account(app)
        app.running -= count
        if app.pending == 0 and app.running == 0:
            app.phase += 1
            if app.phase == len(app.phases):
                self._finish(app)
                return
            phase = app.phases[app.phase]
            # Executors that ran the previous phase's (map) tasks keep their shuffle files while this
            # phase reads them; a phase that reads files leaves the finished shuffle behind.
            maps = app.phases[app.phase - 1].tasks
            app.shuffle_holders = min(app.ready, math.ceil(maps / self.spe)) if phase.reads_shuffle else 0
            app.pending = phase.tasks
            self._driver_work(app)
            self._job_submitted(app)
        self._fill(app)
        self._maybe_idle(app)

    def _finish(self, app: App) -> None:
        app.done = True
        if app.record is not None:
            app.record[4] = round(self.loop.now, 1)
        self.cluster.cancel(app)
        self._drop_hold(app)
        self._account(app)
        if app.ready:
            ready, app.ready = app.ready, 0
            self._release(app, ready)
        self._unit_done(app.run, app.stages)

    # --- dynamic allocation ----------------------------------------------------------------------------

    def _job_submitted(self, app: App) -> None:
        """Dynamic allocation sees a phase's tasks once its driver work is done (the job is submitted)."""
        if self.scales_executors and not app.blocked:
            self._backlog(app)

    def _ask(self, app: App, executors: int) -> None:
        """Ask the cluster for executors; places the ledger kept for the application go first."""
        kept = min(executors, app.held)
        app.held -= kept
        if kept:
            self._granted(app, kept)
        self.cluster.request(app, executors - kept)

    def _drop_hold(self, app: App) -> None:
        """The ledger forgets the application's reservation (its first executor is added, or it ended)."""
        if app.held:
            held, app.held = app.held, 0
            self.cluster.release(held)
            if self.waiting_regions:
                self._retry_waiting()

    def _needed(self, app: App) -> int:
        needed = math.ceil((app.pending + app.running) / self.spe)
        cap = self._cap(app)
        return needed if cap is None else min(cap, needed)

    def _cap(self, app: App) -> int | None:
        """The most executors the application may hold: dynamic's cap, the admitted or the requested count."""
        if self.grow and app.record is not None:
            return int(app.record[1])
        return app.want if self.release else self.policy.max_executors

    def _backlog(self, app: App) -> None:
        """Pending tasks start the backlog timer; a lower need cancels requests not yet granted."""
        needed = self._needed(app)
        if app.target > needed:
            dropped = self.cluster.cancel(app)
            app.target = max(app.granted, app.target - dropped)
        if app.pending and app.target < needed and not app.ticking:
            app.ticking = True
            app.step = 1
            self.loop.after(self.policy.backlog_timeout_s, self._tick, app)

    def _tick(self, app: App) -> None:
        app.ticking = False
        if app.done or not app.pending:
            return
        needed = self._needed(app)
        if app.target < needed:
            add = min(app.step, needed - app.target)
            app.target += add
            app.step *= 2
            self._ask(app, add)
            app.ticking = True
            self.loop.after(self.policy.backlog_timeout_s, self._tick, app)  # the sustained backlog timeout

    def _maybe_idle(self, app: App) -> None:
        if not self.scales_executors or app.pending:
            return
        if self.policy.name == "dynamic" and app.phase != len(app.phases) - 1:
            return  # (one stage per application: its scan's executors all hold map output)
        if self._idle_executors(app):
            self.loop.after(self.policy.idle_timeout_s, self._idle_check, app, app.activity, False)
        timeout = self.policy.shuffle_timeout_s
        if self.release and timeout is not None and self._idle_executors(app, holders=True):
            self.loop.after(timeout, self._idle_check, app, app.activity, True)

    def _idle_executors(self, app: App, holders: bool = False) -> int:
        """Ready executors with no task and (unless ``holders``) no shuffle data still read."""
        idle = (app.ready * self.spe - app.running) // self.spe
        return max(0, min(idle, app.ready if holders else app.ready - app.shuffle_holders))

    def _idle_check(self, app: App, activity: int, holders: bool) -> None:
        if app.done or app.activity != activity:
            return
        idle = self._idle_executors(app, holders)
        if idle:
            if holders:
                app.shuffle_holders = max(0, app.shuffle_holders - idle)
            self._account(app)
            app.ready -= idle
            app.target = max(0, app.target - idle)
            self._release(app, idle)
            if app.pending:
                # Released while its driver worked on the next stage (Spark does that too): the pending
                # tasks ask again after the backlog timeout, or the application would wait for ever.
                self._backlog(app)
