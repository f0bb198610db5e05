"""``test_connection``'s checks of a parsed connection: settings, Java, the master, the history server, the warm pool.

Each is one :class:`Check`, a line of the message; none raises for a service that does not answer.
"""

from __future__ import annotations

import base64
import socket
import urllib.parse
from typing import TYPE_CHECKING, NamedTuple

from airflow_provider_finegrained.hooks.java_check import java_check
from airflow_provider_finegrained.planning import format_bytes
from airflow_provider_finegrained.settings import ConnectionSettings

if TYPE_CHECKING:
    from airflow_provider_finegrained.capacity.sources import ClusterCapacity
    from airflow_provider_finegrained.planning import WorkerCapacity

WEBUI_TIMEOUT_S = 5.0
SPARK_CONNECT_PORT = 15002


class Check(NamedTuple):
    """One line of ``test_connection``'s message."""

    name: str
    ok: bool
    detail: str

    def __str__(self) -> str:
        return f"{self.name}: {self.detail}" if self.ok else f"{self.name} FAILED: {self.detail}"


def connection_checks(settings: ConnectionSettings, storage: Check | None = None) -> list[Check]:
    """Every check of a parsed connection: settings, Java, the master, ``storage`` (the hook probes it), the
    history server, the warm pool."""
    from airflow_provider_finegrained.planning.capacity import minimum_slots

    least_slots = minimum_slots(
        {"min_parallelism": settings.min_parallelism}, settings.min_slots, settings.cluster_profile().total_cores
    )
    checks = [_settings_check(settings, least_slots)]
    java_ok, java = java_check(settings.java_home)
    checks.append(Check("java", java_ok, java))
    checks.extend(_master_checks(settings, least_slots))
    if storage is not None:
        checks.append(storage)
    if settings.history_server_url:
        checks.append(_history_check(settings.history_server_url))
    if urllib.parse.urlsplit(settings.warm_pool).scheme == "sc":
        checks.append(_warm_pool_check(settings.warm_pool))
    elif settings.warm_pool.startswith("conn:"):
        checks.append(_warm_pool_connection_check(settings.warm_pool.removeprefix("conn:")))
    return checks


def _settings_check(settings: ConnectionSettings, least_slots: int) -> Check:
    # Construction already refused inconsistent settings; say what they amount to.
    profile = settings.cluster_profile()
    shape = "local threads" if profile.local else "executors"
    text = (
        f"consistent: master {settings.master} ({settings.deploy_mode} mode), up to {profile.total_cores} core(s) "
        f"and {format_bytes(profile.total_memory)} per application in {shape} of {profile.executor_cores} core(s), "
        f"{format_bytes(profile.executor_memory)}; a region runs with at least {least_slots} slot(s)"
    )
    least, most = _executor_bounds(settings)
    if least or most is not None:
        text += f"; min/max resources hold with {least} to {'any' if most is None else most} executor(s)"
    return Check("settings", True, text)


def _executor_bounds(settings: ConnectionSettings) -> tuple[int, int | None]:
    """Whole executors the minimum and maximum resources ask for (the check passed when the settings were made)."""
    from airflow_provider_finegrained.planning import WorkerShape, check_resource_stability

    profile = settings.cluster_profile()
    shape = WorkerShape(slots=profile.executor_cores, cpu=float(profile.executor_cores), memory=profile.executor_memory)
    return check_resource_stability(settings.resource_bounds(), shape)


def _master_checks(settings: ConnectionSettings, least_slots: int) -> list[Check]:
    from airflow_provider_finegrained.capacity.sources import CapacityUnavailable
    from airflow_provider_finegrained.launchers.standalone.capacity import fetch_standalone_capacity, webui_text
    from airflow_provider_finegrained.launchers.yarn.capacity import DEFAULT_QUEUE, fetch_yarn_capacity

    kind = settings.master_kind
    if kind in ("local", "local-cluster"):
        return [Check("master", True, f"{settings.master} runs on this machine ({settings.total_cores} core(s))")]
    if kind == "k8s":
        host, port = _k8s_api(settings.master)
        return [_tcp_check("master", f"Kubernetes API server {host}:{port}", host, port)]
    if kind == "yarn" and not settings.yarn_resourcemanager_url:
        return [
            Check(
                "master",
                True,
                "yarn is reached by spark-submit at run time (HADOOP_CONF_DIR); set yarn_resourcemanager_url "
                "to check the ResourceManager here",
            )
        ]
    try:
        if kind == "standalone":
            what = f"standalone master {settings.master}"
            asked = f" ({webui_text(settings)})"
            capacity = fetch_standalone_capacity(settings.webui_json_urls(), timeout_s=WEBUI_TIMEOUT_S)
        else:
            what, asked = "YARN ResourceManager", ""
            queue = str(settings.spark_conf.get("spark.yarn.queue") or DEFAULT_QUEUE)
            capacity = fetch_yarn_capacity(str(settings.yarn_resourcemanager_url), WEBUI_TIMEOUT_S, queue=queue)
    except CapacityUnavailable as exc:
        return [Check("master", False, f"{what}{asked} is not reachable: {exc}")]
    # A standalone master books spark.executor.memory against a worker; YARN containers hold the overhead too.
    overhead = 0 if kind == "standalone" else _overhead(settings.executor_memory)
    return [_reachable_check(what, capacity), _fit_check(settings, capacity, overhead, least_slots)]


def _total_cores(worker: WorkerCapacity) -> int:
    # A source that reports no totals (None) knows only what is free: that is the most it can show.
    return worker.free_cores if worker.total_cores is None else worker.total_cores


def _total_memory(worker: WorkerCapacity) -> int:
    return worker.free_memory if worker.total_memory is None else worker.total_memory


def _reachable_check(what: str, capacity: ClusterCapacity) -> Check:
    workers = capacity.workers
    cores = sum(_total_cores(w) for w in workers)
    memory = sum(_total_memory(w) for w in workers)
    text = (
        f"{what} reachable, {len(workers)} alive worker(s), {capacity.total_free_cores} of {cores} core(s) and "
        f"{format_bytes(capacity.total_free_memory)} of {format_bytes(memory)} free ({capacity.source})"
    )
    if not workers:
        return Check("master", False, f"{text}; start a worker: an application would wait forever for resources")
    return Check("master", True, text)


def _fit_check(settings: ConnectionSettings, capacity: ClusterCapacity, overhead: int, least_slots: int) -> Check:
    cores, memory = settings.executor_cores, settings.executor_memory + overhead
    shape = f"{cores} core(s), {format_bytes(memory)}" + (" with overhead" if overhead else "")
    per_worker = [min(_total_cores(w) // cores, _total_memory(w) // memory) for w in capacity.workers]
    fitting = sum(1 for n in per_worker if n)
    if not capacity.workers:
        return Check("executor", False, f"one executor of {shape} has no worker to run on")
    if not fitting:
        biggest = max(capacity.workers, key=lambda w: (_total_memory(w), _total_cores(w)))
        return Check(
            "executor",
            False,
            f"no worker can hold one executor of {shape} (executor_cores, executor_memory; the largest has "
            f"{_total_cores(biggest)} core(s), {format_bytes(_total_memory(biggest))}): applications would wait "
            "forever",
        )
    free_now = sum(1 for w in capacity.workers if w.free_cores >= cores and w.free_memory >= memory)
    text = f"one executor of {shape} fits {fitting} of {len(capacity.workers)} worker(s) ({free_now} with room now)"
    least, _ = _executor_bounds(settings)
    need = max(least, -(-least_slots // cores))
    if sum(per_worker) < need:
        return Check(
            "executor",
            False,
            f"{text}, but the minimum resources (min_slots, min_cpu, min_memory, min_parallelism) need {need} "
            f"executor(s) and the whole cluster holds {sum(per_worker)}",
        )
    return Check("executor", True, text)


def _overhead(executor_memory: int) -> int:
    from airflow_provider_finegrained.settings.resources import MEMORY_OVERHEAD_FACTOR, MIN_MEMORY_OVERHEAD

    return max(MIN_MEMORY_OVERHEAD, int(MEMORY_OVERHEAD_FACTOR * executor_memory))


def _history_check(url: str) -> Check:
    """A history server lists its applications at ``/api/v1/applications``; user info becomes basic auth."""
    from airflow_provider_finegrained.launchers.http import HttpRequestError, get_json

    public, auth = _split_credentials(url)
    headers = {"Authorization": f"Basic {auth}"} if auth else {}
    try:
        answer = get_json(f"{public}/api/v1/applications?limit=1", WEBUI_TIMEOUT_S, headers=headers)
    except HttpRequestError as exc:  # unreachable, timed out, an error status or no JSON
        return Check("history server", False, f"{public} is not reachable: {exc.reason}")
    if not isinstance(answer, list):
        return Check("history server", False, f"{public} did not answer a list of applications")
    listed = "no applications yet" if not answer else "applications listed"
    return Check("history server", True, f"{public} reachable ({listed})")


def _warm_pool_check(url: str) -> Check:
    # Only host and port: an sc:// URL may carry a token in its parameters.
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "", parts.port or SPARK_CONNECT_PORT
    return _tcp_check("warm pool", f"Spark Connect server sc://{host}:{port}", host, port)


def _warm_pool_connection_check(conn_id: str) -> Check:
    """The server an external pool's Airflow connection names (its token stays in the connection)."""
    from airflow_provider_finegrained.warm.external import external_from_connection
    from airflow_provider_finegrained.warm.state import WarmPoolUnavailable

    try:
        url, _ = external_from_connection(conn_id)
    except WarmPoolUnavailable as exc:
        return Check("warm pool", False, str(exc))
    return _warm_pool_check(url)


def _tcp_check(name: str, what: str, host: str, port: int) -> Check:
    try:
        with socket.create_connection((host, port), timeout=WEBUI_TIMEOUT_S):
            pass
    except OSError as exc:
        return Check(name, False, f"{what} is not reachable: {_reason(exc)}")
    return Check(name, True, f"{what} accepts connections")


def _k8s_api(master: str) -> tuple[str, int]:
    rest = master.removeprefix("k8s://")
    parts = urllib.parse.urlsplit(rest if "://" in rest else f"https://{rest}")
    return parts.hostname or "", parts.port or (80 if parts.scheme == "http" else 443)


def _split_credentials(url: str) -> tuple[str, str | None]:
    """The URL without user info, and that user info as a basic-auth token."""
    from airflow_provider_finegrained.launchers.links import public_url

    parts = urllib.parse.urlsplit(url)
    public = public_url(url) or url
    if parts.username is None:
        return public, None
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    return public, base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason if reason is not None else exc) or type(exc).__name__
