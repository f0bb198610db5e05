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


@dataclass(frozen=True)
class LaunchHandle:
    """What identifies a submitted application to its launcher; ids known at submission time only."""

    launcher: str
    app_name: str
    submission_id: str | None = None
    """The cluster manager's name for the submission when it is chosen up front (Kubernetes ``ns:pod``)."""


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

    def application_conf(self, app_name: str) -> dict[str, str]:
        """Spark settings this cluster manager needs for every application (e.g. YARN's one attempt)."""
        ...

    def submit(self, spec: LaunchSpec, events: LaunchEvents | None = None) -> LaunchHandle:
        """Start the application; raise LaunchCancelled if ``kill`` came first."""
        ...

    def wait(self, handle: LaunchHandle) -> LaunchResult:
        """Block until the application has ended (streaming its output to ``events``)."""
        ...

    def status(self, handle: LaunchHandle) -> LaunchStatus: ...

    def kill(self, handle: LaunchHandle | None) -> str:
        """Stop the application, its driver wherever it runs, and every local process it started; say what was done."""
        ...

    def driver_log(self, handle: LaunchHandle) -> str | None:
        """The driver's log, or where to find it, when it runs elsewhere; None when the output already showed it."""
        ...

    def ui_links(self, application_id: str | None, driver_ui_url: str | None = None) -> SparkUITargets: ...
