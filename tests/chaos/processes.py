"""Finding the task process to kill and the processes of the killed try that outlive it (psutil)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from tests.chaos.outcome import ProcessInfo


def cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ""


def role(text: str) -> str:
    """What a process is, from its command line."""
    if "airflow worker -- " in text and "LocalExecutor" not in text:
        return "task runner"
    if "LocalExecutor" in text:
        return "task supervisor"
    if "org.apache.spark.deploy.SparkSubmit" in text:
        return "spark-submit JVM"
    if "pyspark.daemon" in text or "pyspark/daemon" in text or "pyspark.worker" in text:
        return "pyspark worker"
    if "java" in text.split(" ", 1)[0]:
        return "JVM"
    if "python" in text.split(" ", 1)[0]:
        return "python driver"
    return "other"


def info(process: psutil.Process) -> ProcessInfo:
    text = cmdline(process)
    return ProcessInfo(pid=process.pid, role=role(text), cmdline=text[:300])


def marked(name: str, value: str) -> list[psutil.Process]:
    """The live processes whose environment has ``name=value`` (the marker a region trial gives its region)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(name) == value and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def find_task_runner(ti_id: str) -> psutil.Process | None:
    """The LocalExecutor's forked task runner of one task instance: its title is ``airflow worker -- <ti id>``."""
    for process in psutil.process_iter():
        if cmdline(process).strip() == f"airflow worker -- {ti_id}":
            return process
    return None


@dataclass(frozen=True)
class Snapshot:
    """Processes seen at the kill, identified by pid and start time (a pid may be reused)."""

    members: tuple[tuple[int, float], ...]

    @classmethod
    def of_tree(cls, root: psutil.Process) -> Snapshot:
        members = []
        for process in [root, *root.children(recursive=True)]:
            try:
                members.append((process.pid, process.create_time()))
            except psutil.NoSuchProcess:
                continue
        return cls(tuple(members))

    def alive(self) -> list[psutil.Process]:
        found = []
        for pid, started in self.members:
            try:
                process = psutil.Process(pid)
                if process.create_time() == started and process.status() != psutil.STATUS_ZOMBIE:
                    found.append(process)
            except psutil.NoSuchProcess:
                continue
        return found


def descendants(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def survivors(snapshot: Snapshot, markers: tuple[str, ...], exclude_pids: set[int]) -> list[ProcessInfo]:
    """Processes of the killed try still alive: snapshot members (and what they started since), plus any
    process whose command line holds one of ``markers`` (the killed try's app name or region folder)."""
    found: dict[int, psutil.Process] = {}
    for process in snapshot.alive():
        for member in descendants(process):
            found[member.pid] = member
    me = os.getpid()
    for process in psutil.process_iter():
        if process.pid in found or process.pid == me:
            continue
        text = cmdline(process)
        if any(marker in text for marker in markers):
            found[process.pid] = process
            for member in descendants(process):
                found[member.pid] = member
    return [info(process) for pid, process in sorted(found.items()) if pid not in exclude_pids and cmdline(process)]


def pool_pids(root: str) -> set[int]:
    """The warm pool's processes (its supervisor under ``root`` and everything it started): they outlive
    every task on purpose, so they are never orphans even when a killed task started the pool."""
    found: set[int] = set()
    for process in psutil.process_iter():
        text = cmdline(process)
        if "airflow_provider_finegrained.warm.supervisor" in text and root in text:
            found.update(member.pid for member in descendants(process))
    return found
