"""THE Spark master-URL parser: accepts exactly what Spark itself accepts (SparkMasterRegex et al.).

Spark's rules, as its code applies them:

- ``local``, ``local[N]``, ``local[*]``, ``local[N,F]``, ``local[*,F]`` (spaces allowed around the comma),
  N and F at least 1 (``SparkContext.createTaskScheduler``);
- ``local-cluster[N, C, M]`` with spaces allowed around every number;
- ``spark://host:port[,host:port...]``: each part a URI with a host and a port, nothing else
  (``Utils.extractHostPortFromSparkUrl``);
- ``yarn``;
- ``k8s://https://host[:port][/path]``, ``k8s://http://...`` and ``k8s://host[:port]``, which Spark
  resolves to ``https://host[:port]`` (``KubernetesUtils.parseMasterUrl``).

Pure: no Airflow or Spark imports.
"""

from __future__ import annotations

import re
from typing import Final, Literal, NamedTuple

MasterKind = Literal["local", "local-cluster", "standalone", "yarn", "k8s"]

MASTER_FORMS: Final = (
    "local, local[N], local[*], local[N,F], local-cluster[N,C,M], spark://host:port[,host:port], "
    "yarn, k8s://https://host:port"
)
"""The accepted forms, as error messages list them."""


class MasterURLError(ValueError):
    """A master URL that Spark would refuse; the message names the value and the accepted forms."""


class MasterInfo(NamedTuple):
    """A parsed master URL: its kind and what it says about the cluster's size and address."""

    kind: MasterKind
    threads: int | None = None
    """Local threads (N of local[N]); None for local[*]."""
    workers: int = 0
    worker_cores: int = 0
    worker_memory_mib: int = 0
    hosts: tuple[tuple[str, int], ...] = ()
    """Standalone masters as (host, port)."""
    url: str = ""
    """The master URL as given."""
    k8s_api_url: str | None = None
    """The Kubernetes API server URL Spark talks to (``https://`` added when the URL names no scheme)."""
    max_failures: int | None = None
    """F of local[N,F]: task attempts before a local job fails."""

    @property
    def is_local(self) -> bool:
        """Executors run on this machine, started by the submitting process (no cluster deploy mode)."""
        return self.kind in ("local", "local-cluster")

    @property
    def is_loopback(self) -> bool:
        """Drivers and executors run on this machine: a local master, or standalone masters on a loopback address."""
        if self.is_local:
            return True
        return self.kind == "standalone" and bool(self.hosts) and all(host in LOOPBACK_HOSTS for host, _ in self.hosts)


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})

# Spark's SparkMasterRegex, anchored by fullmatch.
_LOCAL_N = re.compile(r"local\[(?P<threads>[0-9]+|\*)\]")
_LOCAL_N_FAILURES = re.compile(r"local\[(?P<threads>[0-9]+|\*)\s*,\s*(?P<failures>[0-9]+)\]")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(?P<n>[0-9]+)\s*,\s*(?P<c>[0-9]+)\s*,\s*(?P<m>[0-9]+)\s*\]")
_HOST = r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?)"
_HOST_PORT = re.compile(rf"(?P<host>{_HOST}):(?P<port>[0-9]{{1,5}})")
_K8S_HTTP = re.compile(rf"(?:https?)://{_HOST}(?::[0-9]{{1,5}})?(?:/\S*)?", re.IGNORECASE)
_K8S_BARE = re.compile(rf"{_HOST}(?::[0-9]{{1,5}})?(?:/\S*)?")


def _bad(url: str, reason: str = "") -> MasterURLError:
    return MasterURLError(f"master: {url!r} is not a Spark master URL{reason}; allowed: {MASTER_FORMS}")


def parse_master(url: str) -> MasterInfo:
    """Parse a Spark master URL; :class:`MasterURLError` (a ValueError) for anything Spark refuses."""
    if url == "local":
        return MasterInfo("local", threads=1, url=url)
    match = _LOCAL_N.fullmatch(url) or _LOCAL_N_FAILURES.fullmatch(url)
    if match:
        threads = match.group("threads")
        failures = match.groupdict().get("failures")
        if threads != "*" and int(threads) < 1:
            raise _bad(url, " (N must be at least 1)")
        if failures is not None and int(failures) < 1:
            raise _bad(url, " (F must be at least 1)")
        return MasterInfo(
            "local",
            threads=None if threads == "*" else int(threads),
            url=url,
            max_failures=None if failures is None else int(failures),
        )
    if match := _LOCAL_CLUSTER.fullmatch(url):
        n, c, m = (int(match.group(g)) for g in ("n", "c", "m"))
        if min(n, c, m) < 1:
            raise _bad(url, " (N, C and M must be at least 1)")
        return MasterInfo("local-cluster", workers=n, worker_cores=c, worker_memory_mib=m, url=url)
    if url.startswith("spark://"):
        hosts = []
        for part in url[len("spark://") :].split(","):
            found = _HOST_PORT.fullmatch(part)
            if found is None or not 1 <= int(found.group("port")) <= 65535:
                raise _bad(url, " (each master needs host:port, nothing more)")
            hosts.append((found.group("host"), int(found.group("port"))))
        return MasterInfo("standalone", hosts=tuple(hosts), url=url)
    if url == "yarn":
        return MasterInfo("yarn", url=url)
    if url.startswith("k8s://"):
        api = url[len("k8s://") :]
        if "://" in api:
            if not _K8S_HTTP.fullmatch(api):
                raise _bad(url, " (the API server needs https:// or http://, then host[:port])")
            return MasterInfo("k8s", url=url, k8s_api_url=api)
        if not _K8S_BARE.fullmatch(api):
            raise _bad(url, " (the API server needs host[:port])")
        return MasterInfo("k8s", url=url, k8s_api_url=f"https://{api}")  # Spark's default scheme
    raise _bad(url)


def is_local_master(url: str) -> bool:
    """True for masters whose executors run on this machine (``local...``, ``local-cluster[...]``)."""
    return parse_master(url).is_local
