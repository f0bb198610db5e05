"""The launcher interface: one typed protocol for the way a region reaches Spark, and what goes in and out.

A launcher is made for one region run (``launchers.select``): it knows its connection's settings, which
capacity source the cluster manager offers, the application settings that cluster manager needs, and how
to submit, wait for, ask after, kill, read the driver log of, and link to one application.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from airflow_provider_finegrained.launchers.links import SparkUITargets
from airflow_provider_finegrained.launchers.master import MasterKind
from airflow_provider_finegrained.spark.process import SubmitResult

CapacityKind = Literal["standalone", "yarn", "declared", "local", "none"]
"""Where free capacity is read: a standalone master's ``/json/``, a YARN ResourceManager, the connection's
declared capacity, this machine (local modes), or nowhere (a warm pool's executors are already running)."""

LaunchState = Literal["pending", "running", "succeeded", "failed", "killed", "unknown"]
FINAL_STATES: frozenset[LaunchState] = frozenset({"succeeded", "failed", "killed"})


@dataclass(frozen=True)
class LaunchSpec:
    """One region's application: what the launcher submits."""

    region: str
    app_name: str
    job_path: str
    """The region job (``RegionJob.dump()``) the driver program runs."""
    conf: Mapping[str, str] = field(default_factory=dict)
    """Application-level Spark settings decided for the region (sizing, the connection's, the stages')."""
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "conf", dict(self.conf))
        object.__setattr__(self, "env", dict(self.env))


REATTACHABLE_LAUNCHERS = frozenset({"standalone", "yarn", "kubernetes"})
"""Launchers whose cluster deploy mode runs the driver on the cluster, where it outlives the submitting task."""

_HANDLE_FIELDS = ("launcher", "app_name", "submission_id", "application_id", "driver_id", "master", "deploy_mode")


def reattach_refusal(launcher: str, deploy_mode: str) -> str | None:
    """Why an application of ``launcher`` in ``deploy_mode`` cannot outlive its task; None when it can."""
    if launcher == "warm":
        return "a warm region runs as Spark Connect sessions in the pool, whose client is the task itself"
    if launcher not in REATTACHABLE_LAUNCHERS:
        return f"the {launcher} launcher runs the driver as a child of the task"
    if deploy_mode != "cluster":
        return f"in {deploy_mode} deploy mode the driver is a child of the task and dies with it"
    return None


@dataclass(frozen=True)
class LaunchHandle:
    """What identifies a submitted application to its launcher, and (``to_dict``) to a later process.

    A handle rebuilt with ``from_dict`` is followed through ``launchers.remote`` (the cluster manager's
    own records), since the process that submitted it may be gone.
    """

    launcher: str
    app_name: str
    submission_id: str | None = None
    """The cluster manager's name for the submission when it is chosen up front (Kubernetes ``ns:pod``)."""
    application_id: str | None = None
    """Spark's (or YARN's) application id, once known."""
    driver_id: str | None = None
    """A standalone cluster-mode driver's id (``driver-…``), once the master named it."""
    master: str = ""
    deploy_mode: str = "client"
    region_folder: str = ""
    """The region folder (of the submitting try) the application reads its job from and records in."""
    try_number: int = 0
    """The task try that submitted it: its region folder and output fencing token are the application's."""
    submitted_at: float = 0.0
    """Wall-clock time of the submission (0 when unknown)."""

    def identified(self) -> bool:
        """Whether the cluster manager can be asked about the application from another process."""
        if self.launcher == "standalone":
            return self.driver_id is not None
        if self.launcher == "yarn":
            return self.application_id is not None
        return self.submission_id is not None

    @property
    def remote_id(self) -> str:
        """The id a cluster manager knows the application by (for messages)."""
        return self.driver_id or self.application_id or self.submission_id or self.app_name

    def to_dict(self) -> dict[str, str | int | float | None]:
        """A JSON-able form, for the task state store and trigger arguments."""
        return {name: getattr(self, name) for name in (*_HANDLE_FIELDS, "region_folder", "try_number", "submitted_at")}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LaunchHandle:
        """The handle ``to_dict`` wrote; ValueError naming what is missing or wrong."""
        if not isinstance(data, Mapping):
            raise ValueError(f"launch handle: expected a mapping, got {type(data).__name__}")
        missing = [k for k in ("launcher", "app_name", "try_number") if data.get(k) in (None, "")]
        if missing:
            raise ValueError(f"launch handle: {', '.join(missing)} missing in {sorted(data)}")
        try_number = data["try_number"]
        if isinstance(try_number, bool) or not isinstance(try_number, int) or try_number < 1:
            raise ValueError(f"launch handle: try_number {try_number!r} is not a try number (an integer >= 1)")
        optional = {k: None if data.get(k) is None else str(data[k]) for k in _HANDLE_FIELDS[2:5]}
        return cls(
            launcher=str(data["launcher"]),
            app_name=str(data["app_name"]),
            master=str(data.get("master") or ""),
            deploy_mode=str(data.get("deploy_mode") or "client"),
            region_folder=str(data.get("region_folder") or ""),
            try_number=try_number,
            submitted_at=float(data.get("submitted_at") or 0.0),
            **optional,
        )


@dataclass(frozen=True)
class LaunchStatus:
    """What the launcher knows of an application now."""

    state: LaunchState
    application_id: str | None = None
    driver_id: str | None = None
    detail: str = ""

    @property
    def done(self) -> bool:
        return self.state in FINAL_STATES


@dataclass(frozen=True)
class LaunchResult(SubmitResult):
    """How an application ended: a spark-submit run's fields (a warm run fills those it has) and more.

    A non-zero returncode is for the caller to judge.
    """

    diagnostics: tuple[str, ...] = ()
    """Where to look on failure: the driver's log lines, a cluster manager's log link."""
    sessions: Mapping[str, str] = field(default_factory=dict)
    """Each stage's Spark Connect session, for a region run in a warm pool."""

    @property
    def succeeded(self) -> bool:
        return self.returncode == 0 and not self.killed


@dataclass(frozen=True)
class LaunchEvents:
    """Callbacks in the thread that calls ``wait``: each output line, and the application id once known."""

    on_line: Callable[[str], None] = lambda _line: None
    on_application: Callable[[str], None] = lambda _app_id: None


class LogLike(Protocol):
    """What launchers and the region run call on a logger (the standard library's, or Airflow's task log)."""

    def info(self, msg: str, /, *args: Any) -> Any: ...

    def warning(self, msg: str, /, *args: Any) -> Any: ...

    def error(self, msg: str, /, *args: Any) -> Any: ...


class LaunchCancelled(RuntimeError):
    """``kill`` came before ``submit``: nothing was started."""


@runtime_checkable
class Launcher(Protocol):
    """The way a region reaches Spark. One instance per region run; ``kill`` may come from any thread."""

    name: str
    """``local``, ``standalone``, ``yarn``, ``kubernetes`` or ``warm``."""
    kinds: frozenset[MasterKind]
    """The master URL kinds it serves."""
    capacity_kind: CapacityKind
    count_overhead: bool
    """Whether the cluster manager books executor memory overhead against a worker (not standalone)."""
    ships_python_env: bool
    """Whether the containers get the Airflow worker's packed Python environment (``python_env``): YARN."""

    def application_conf(self, app_name: str) -> dict[str, str]:
        """Spark settings this cluster manager needs for every application (e.g. YARN's one attempt)."""
        ...

    def master_container(self, conf: Mapping[str, str]) -> tuple[int, int]:
        """Cores and bytes of the container the cluster manager runs for an application with Spark settings
        ``conf`` besides its executors (YARN's ApplicationMaster); ``(0, 0)`` where there is none."""
        ...

    def submit(self, spec: LaunchSpec, events: LaunchEvents | None = None) -> LaunchHandle:
        """Start the application; raise LaunchCancelled if ``kill`` came first."""
        ...

    def wait_named(self, handle: LaunchHandle) -> LaunchHandle:
        """Block until the cluster manager has named the application (or it ended first), streaming its output
        to ``events``; the handle with the names known so far."""
        ...

    def wait(self, handle: LaunchHandle) -> LaunchResult:
        """Block until the application has ended (streaming its output to ``events``)."""
        ...

    def detach(self, handle: LaunchHandle) -> None:
        """Stop following the application from here and leave it running where it runs (cluster deploy mode)."""
        ...

    def status(self, handle: LaunchHandle) -> LaunchStatus: ...

    def kill(self, handle: LaunchHandle | None) -> str:
        """Stop the application, its driver wherever it runs, and every local process it started; say what was done."""
        ...

    def driver_log(self, handle: LaunchHandle) -> str | None:
        """The driver's log, or where to find it, when it runs elsewhere; None when the output already showed it."""
        ...

    def ui_links(self, application_id: str | None, driver_ui_url: str | None = None) -> SparkUITargets: ...
