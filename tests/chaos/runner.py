"""One harness run: a source snapshot, ``airflow standalone`` per Airflow mode (the region mode needs none),
N kill trials each, results written."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from airflow_provider_finegrained.warm.folders import pool_folders
from bench.lib.airflow import snapshot_source
from tests.chaos import processes
from tests.chaos.inspect_output import attempt_progress, committed_markers, leftovers
from tests.chaos.outcome import EXPECTED_ROWS, REGION, TrialRecord, classify, passed
from tests.chaos.region import region_trial
from tests.chaos.results import render_results, write_results
from tests.chaos.standalone import VENV_BIN, Standalone, airflow_env, free_port

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "kill_trial"
SLOW = "slow_rows"
CONSUMER = "consume"
ORPHAN_WAIT_S = 15.0
MODE_ENV = {
    "cold": {"AIRFLOW__FINEGRAINED__WARM_POOL": "off"},
    "warm": {"AIRFLOW__FINEGRAINED__WARM_POOL": "auto", "AIRFLOW__FINEGRAINED__WARM_IDLE_TIMEOUT": "3600"},
}
MODES = (*MODE_ENV, REGION)


@dataclass(frozen=True)
class Options:
    trials: int
    modes: tuple[str, ...]
    label: str
    source: str
    kill_delay_s: float
    kill_at_parts: tuple[int, ...]
    row_sleep_s: float
    run_timeout_s: float
    fast_jvm: bool
    results: Path
    work: Path
    region_kill_at: tuple[str, ...] = ("8", "w1")
    """Region mode's kill moments, cycled over the trials: ``N`` s after the start, ``wN`` after the workers run."""


def log(message: str) -> None:
    print(f"[kill-trials {datetime.now(UTC).strftime('%H:%M:%S')}] {message}", flush=True)


def install_dag(dags: Path, row_sleep_s: float) -> None:
    dags.mkdir(parents=True, exist_ok=True)
    text = (Path(__file__).parent / "trial_dag.py").read_text()
    text = re.sub(r"^ROW_SLEEP = .*$", f"ROW_SLEEP = {row_sleep_s!r}", text, flags=re.M)
    (dags / "kill_trial.py").write_text(text)


def fast_jvm_options() -> str | None:
    """The test suite's JVM start-up options (class-data archive, C1 only), when its archive exists."""
    try:
        from tests.jvm_start import archive_path, java_tool_options

        archive = archive_path()
        return java_tool_options(archive) if archive.is_file() else None
    except Exception:
        return None


# -- the warm pool's Spark jobs (its status API)


def pool_jobs(root: Path) -> list[dict[str, Any]] | None:
    """Every Spark job of the embedded default's warm pool, from the pool's status API; None when there is no
    pool or its status cannot be read (the caller must not take that for "no job running")."""
    jobs: list[dict[str, Any]] = []
    states = [Path(f) / "pool.json" for f in pool_folders(root / "_warm") if (Path(f) / "pool.json").is_file()]
    if not states:
        return None
    for state_file in states:
        try:
            state = json.loads(state_file.read_text())
            ui = str(state.get("ui_url") or "").rstrip("/")
            app = state.get("application_id") or _get_json(f"{ui}/api/v1/applications")[0]["id"]
            jobs += _get_json(f"{ui}/api/v1/applications/{app}/jobs")
        except (OSError, ValueError, KeyError, IndexError):
            return None
    return jobs


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _is_slow_stage_job(job: dict[str, Any]) -> bool:
    text = " ".join(
        [str(tag) for tag in job.get("jobTags", [])] + [str(job.get("jobGroup", "")), str(job.get("description", ""))]
    )
    return SLOW in text


def running_slow_jobs(root: Path) -> list[int] | None:
    """The slow stage's Spark jobs running in the pool now; None when the pool's status cannot be read."""
    jobs = pool_jobs(root)
    if jobs is None:
        return None
    return sorted(int(job["jobId"]) for job in jobs if job.get("status") == "RUNNING" and _is_slow_stage_job(job))


# -- one trial


def wait_for(condition: Callable[[], bool], timeout_s: float, step_s: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step_s)
    return condition()


class Trigger:
    """Triggers the next trial's run in the background while this one runs (the DAG's max_active_runs=1
    queues it), so the CLI's start-up and the scheduling gap are not paid between trials."""

    def __init__(self, standalone: Standalone, run_id: str) -> None:
        self.run_id = run_id
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(standalone,), daemon=True)
        self.thread.start()

    def _run(self, standalone: Standalone) -> None:
        try:
            standalone.cli("dags", "trigger", DAG_ID, "--run-id", self.run_id)
        except BaseException as exc:  # re-raised by wait(), in the harness's thread
            self.error = exc

    def wait(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error


def run_id_for(options: Options, mode: str, number: int) -> str:
    return f"{options.label}-{mode}-{number:02d}-{int(time.time())}"


def run_trial(
    standalone: Standalone,
    root: Path,
    mode: str,
    number: int,
    options: Options,
    trigger: Trigger,
    after_kill: Callable[[], None] = lambda: None,
) -> TrialRecord:
    """One trial of the run ``trigger`` started; ``after_kill`` (triggering the next run) is called once
    the kill has been sent, or at the end when no kill happened."""
    run_id = trigger.run_id
    record = TrialRecord(mode=mode, trial=number, run_id=run_id, load_before=os.getloadavg()[0])
    stage_folder = root / DAG_ID / run_id / SLOW
    trigger.wait()
    triggered = time.monotonic()
    runner: psutil.Process | None = None
    deadline = triggered + options.run_timeout_s
    # The moment that breaks today: try 1 of the slow stage runs AND its Spark job has started writing
    # (its attempt folder exists under the storage root), with at least `parts` part files written when
    # the trial kills mid-write (the retry's clean-up then deletes files the orphan already wrote).
    parts = options.kill_at_parts[(number - 1) % len(options.kill_at_parts)]
    while time.monotonic() < deadline:
        task = standalone.task(DAG_ID, run_id, SLOW)
        if task is not None and task[1] == "running" and task[2] == 1 and runner is None:
            runner = processes.find_task_runner(task[0])
        writing, written = attempt_progress(stage_folder / "try=1")
        if runner is not None and writing and written >= parts:
            break
        if task is not None and task[2] > 1 and runner is None:
            record.notes.append(f"try 1 ended on its own before the kill moment; try {task[2]} is {task[1]}")
            break
        if standalone.run_state(DAG_ID, run_id) in ("success", "failed"):
            record.notes.append("the run ended before the kill moment was reached")
            break
        time.sleep(0.5)
    else:
        record.notes.append(f"no kill moment within {options.run_timeout_s:.0f} s")
    if runner is not None and attempt_progress(stage_folder / "try=1")[0]:
        time.sleep(options.kill_delay_s)
        _, written = attempt_progress(stage_folder / "try=1")
        try:
            snapshot = processes.Snapshot.of_tree(runner)
            record.killed_tree = [processes.info(p) for p in processes.descendants(runner)[1:]]
            killed = processes.info(runner)
            if mode == "warm":
                at_kill = running_slow_jobs(root)
                if at_kill is None:
                    record.notes.append("the pool's status API could not be read at the kill")
                record.killed_try_jobs = at_kill or []
                if at_kill == []:
                    record.notes.append("no Spark job of the killed try was running at the kill: orphan_job unchecked")
            runner.kill()
            killed_at = time.monotonic()
            record.killed = killed
            after_kill()
            after_kill = lambda: None  # noqa: E731
        except psutil.NoSuchProcess:
            record.notes.append("the task runner ended before it could be killed")
        else:
            record.seconds_to_kill = killed_at - triggered
            record.kill_moment = (
                f"try 1 running, its attempt folder present with {written} part file(s) under it "
                f"({options.kill_delay_s:.0f} s after {'it appeared' if parts == 0 else f'{parts} were there'})"
            )
            log(
                f"{run_id}: SIGKILL to {killed.role} {killed.pid}; {len(record.killed_tree)} descendant(s); "
                f"{record.kill_moment}"
            )
            time.sleep(max(0.0, killed_at + ORPHAN_WAIT_S - time.monotonic()))
            record.orphans = processes.survivors(
                snapshot, (f"[{run_id} try 1]",), exclude_pids={runner.pid} | processes.pool_pids(str(root))
            )
            if mode == "warm":
                still = running_slow_jobs(root)
                if still is None:  # unknown counts as still running: a trial must not pass on a failed read
                    record.notes.append("the pool's status API could not be read 15 s after the kill")
                record.orphan_jobs = [job for job in record.killed_try_jobs if still is None or job in still]
            if record.orphans or record.orphan_jobs:
                log(
                    f"{run_id}: alive {ORPHAN_WAIT_S:.0f} s after the kill: "
                    f"{[(o.pid, o.role) for o in record.orphans]} jobs {record.orphan_jobs}"
                )
            ended = wait_for(
                lambda: standalone.run_state(DAG_ID, run_id) in ("success", "failed"),
                max(30.0, deadline - time.monotonic()),
                step_s=1.0,
            )
            record.seconds_to_finish = time.monotonic() - killed_at
            if not ended:
                record.notes.append("the run had not ended at the harness's timeout")
    else:
        wait_for(
            lambda: standalone.run_state(DAG_ID, run_id) in ("success", "failed"),
            max(30.0, deadline - time.monotonic()),
            step_s=1.0,
        )
    after_kill()
    _settle_orphans(record)
    record.run_state = standalone.run_state(DAG_ID, run_id)
    record.slow_tries = standalone.tries(DAG_ID, run_id, SLOW)
    record.markers = committed_markers(stage_folder)
    record.leftovers = leftovers(stage_folder)
    consumer = [m for m in committed_markers(root / DAG_ID / run_id / CONSUMER) if m.complete(m.claimed_rows)]
    record.downstream_rows = consumer[-1].claimed_rows if consumer else None
    record.load_after = os.getloadavg()[0]
    log_verdict(record)
    return record


def log_verdict(record: TrialRecord) -> None:
    verdict = "pass" if passed(record) else "FAIL"
    if record.mode == REGION:
        orphans = [(o.pid, o.role) for o in record.orphans]
        log(f"{record.run_id}: {verdict} {classify(record)} {record.kill_moment}; orphans {orphans}")
        return
    log(
        f"{record.run_id}: {verdict} {classify(record)} run={record.run_state} tries={record.slow_tries} "
        f"markers={[m.describe() for m in record.markers]} downstream={record.downstream_rows}"
    )


def _settle_orphans(record: TrialRecord) -> None:
    """Orphans still alive when the run has ended are ended here, so that the next trial starts clean."""
    for orphan in record.orphans:
        try:
            process = psutil.Process(orphan.pid)
            if processes.cmdline(process)[:300] == orphan.cmdline:  # the same process, not a reused pid
                process.kill()
                record.notes.append(f"the harness ended orphan {orphan.pid} ({orphan.role}) after the run")
        except psutil.NoSuchProcess:
            continue


# -- the whole harness run


def run(options: Options, argv: Sequence[str]) -> int:
    """Every mode's trials, the results written after each trial; the table printed at the end."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    home = options.work / f"kill-trials-{stamp}"
    home.mkdir(parents=True)
    commit, source_dir = snapshot_source(options.source, home / "src")
    extra: dict[str, str] = {}
    if source_dir is not None:
        extra["PYTHONPATH"] = str(source_dir)  # ahead of the editable install's finder
    jvm = fast_jvm_options() if options.fast_jvm else None
    if jvm:
        extra["JAVA_TOOL_OPTIONS"] = jvm
    port = free_port()
    log(f"home {home}, provider code {commit}, API port {port}")
    records: list[TrialRecord] = []
    context = {
        "command": "python -m tests.chaos " + " ".join(shlex.quote(arg) for arg in argv),
        "label": options.label,
        "provider_code": commit,
        "started_at": stamp,
        "trials_per_mode": options.trials,
        "modes": list(options.modes),
        "kill_delay_s": options.kill_delay_s,
        "kill_at_parts": list(options.kill_at_parts),
        "row_sleep_s": options.row_sleep_s,
        "expected_rows": EXPECTED_ROWS,
        "fast_jvm": bool(jvm),
        "cpus": os.cpu_count(),
        "standalone_start_s": {},
    }
    if REGION in options.modes:
        context["region_kill_at"] = list(options.region_kill_at)
    migrated = False
    for mode in options.modes:
        if mode == REGION:
            run_region_mode(home, options, extra, context, records)
            continue
        if not migrated:  # once, before the first Airflow mode
            install_dag(home / "dags", options.row_sleep_s)
            subprocess.run(
                [str(VENV_BIN / "airflow"), "db", "migrate"],
                env=airflow_env(home, port, extra),
                check=True,
                capture_output=True,
                timeout=600,
            )
            migrated = True
        run_airflow_mode(home, airflow_env(home, port, {**extra, **MODE_ENV[mode]}), mode, options, context, records)
    context["ended_at"] = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    write_results(options.results, options.label, context, records)
    print(render_results({"context": context, "trials": [record.to_dict() for record in records]}), flush=True)
    log(f"results: {options.results / options.label}.json and .md")
    return 0 if records and all(passed(record) for record in records) else 1


def run_airflow_mode(
    home: Path, env: dict[str, str], mode: str, options: Options, context: dict[str, Any], records: list[TrialRecord]
) -> None:
    """``airflow standalone`` with the mode's settings (and, warm, the pool started outside any task), the
    mode's trials, and everything stopped again."""
    standalone = Standalone(home, env)
    try:
        context["standalone_start_s"][mode] = round(standalone.start(), 1)
        log(f"{mode}: airflow standalone ready")
        if mode == "warm":  # started outside any task, so no killed task is its parent
            started = time.monotonic()
            subprocess.run(
                [str(VENV_BIN / "python"), "-m", "airflow_provider_finegrained", "warm", "start"],
                env=env,
                capture_output=True,
                timeout=300,
                check=True,
            )
            context["warm_pool_start_s"] = round(time.monotonic() - started, 1)
            log(f"warm: pool started in {context['warm_pool_start_s']} s")
        if not wait_for(lambda: standalone.dag_ready(DAG_ID), 180, step_s=2):
            raise RuntimeError(f"DAG {DAG_ID} not parsed and unpaused after 180 s; see {standalone.log}")
        run_mode(standalone, home / "finegrained" / "storage", mode, options, context, records)
    finally:
        standalone.stop()
        if mode == "warm":
            subprocess.run(
                [str(VENV_BIN / "python"), "-m", "airflow_provider_finegrained", "warm", "stop"],
                env=env,
                capture_output=True,
                timeout=180,
                check=False,
            )


def run_region_mode(
    home: Path, options: Options, extra: dict[str, str], context: dict[str, Any], records: list[TrialRecord]
) -> None:
    """The region trials, one after another, each on its own stand-in task (no Airflow)."""
    pythonpath = extra.get("PYTHONPATH", str(REPO))
    env = {key: value for key, value in extra.items() if key != "PYTHONPATH"}
    for number in range(1, options.trials + 1):
        moment = options.region_kill_at[(number - 1) % len(options.region_kill_at)]
        run_id = run_id_for(options, REGION, number)
        record = region_trial(number, run_id, moment, pythonpath, ORPHAN_WAIT_S, home / "region", env)
        log_verdict(record)
        records.append(record)
        write_results(options.results, options.label, context, records)


def run_mode(
    standalone: Standalone,
    root: Path,
    mode: str,
    options: Options,
    context: dict[str, Any],
    records: list[TrialRecord],
) -> None:
    """The trials of one mode; each trial's kill triggers the next trial's run."""
    following: list[Trigger] = [Trigger(standalone, run_id_for(options, mode, 1))]

    def trigger_next(number: int) -> None:
        if number < options.trials:
            following.append(Trigger(standalone, run_id_for(options, mode, number + 1)))

    for number in range(1, options.trials + 1):
        if len(following) < number:  # the previous trial never triggered this one
            trigger_next(number - 1)
        trigger = following[number - 1]
        records.append(
            run_trial(standalone, root, mode, number, options, trigger, functools.partial(trigger_next, number))
        )
        write_results(options.results, options.label, context, records)
