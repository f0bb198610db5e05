"""Storage locations as strings: roots, the output layout, containment, and what Spark is given.

A location is either an absolute local path (``/data/fg``; a ``file:`` URL is normalised to one, since
the XCom contract carries plain paths for local storage) or a URL with a scheme (``s3://bucket/x``,
``hdfs://nn:8020/x``, ``gs://``, ``abfs://container@account.dfs.core.windows.net/x``, ``memory://x``).
Everything here is pure string work: no filesystem is touched, except that containment on a local
root resolves symlinks (a link inside the root must not lead out of it).

Layout under a root::

    <root>/<dag_id>/<run_id>/<stage_id>/try=<n>            a stage's output (see runtime.output)
    <root>/<dag_id>/<run_id>/_regions/<region>/try=<n>     a region run's job, callables, statuses, traces
    <root>/_capacity, _history, _python, _warm, ...           the provider's own folders (RESERVED_FOLDERS)

An ``output_path`` must stay in the user's part of the root: see :func:`output_path_problem`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import re
from urllib.parse import urlsplit

from airflow_provider_finegrained.storage.errors import StorageConfigError

LOCAL_SCHEMES = ("file", "local")
"""Schemes that name this machine's filesystem (``local://`` is fsspec's alias of ``file://``)."""
NETLOC_REQUIRED = frozenset({"s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "wasb", "wasbs", "az", "adl"})
"""Schemes whose URL must name a bucket or container (``s3://bucket/...``)."""
S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
REGIONS_FOLDER = "_regions"
RESERVED_FOLDERS = ("_capacity", "_fence", "_history", "_python", "_regions", "_warm")
"""The provider's own folders on a storage root (``_regions`` and ``_fence`` also inside a DAG's folders); each
owner defines its constant next to its code and tests/storage/test_output_containment.py checks they are all
here. Every name starting with ``_`` or ``.`` at the root is kept for the provider, not only these."""
RESERVED_PREFIXES = ("_", ".")
OUTPUT_PATH_ALLOWED = (
    "allowed: a folder below the storage root (not the root itself) whose first name neither starts with '_' "
    "or '.' (the provider's folders: {reserved}) nor is a DAG's folder (this DAG's {dag!r}, or one holding "
    "runs of another DAG), with no folder named try=<n>, e.g. 'exports/orders'; or leave output_path unset "
    "for the default location"
)
"""What an output_path may be; formatted with ``reserved`` and ``dag`` (the folder of the stage's DAG)."""

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_TRY_FOLDER = re.compile(r"try=\d+")
_TEMPLATE = re.compile(r"\{\{|\{%")
_MAX_COMPONENT = 200


def scheme_of(location: str) -> str:
    """The location's URL scheme in lower case; ``"file"`` for a local path."""
    match = _SCHEME.match(location)
    if match is None or match.group(1).lower() in LOCAL_SCHEMES:
        return "file"
    return match.group(1).lower()


def is_local(location: str) -> bool:
    """Whether ``location`` is on this machine's filesystem (a path, or a ``file:``/``local:`` URL)."""
    return scheme_of(location) == "file"


def _is_file_url(location: str) -> bool:
    return location.lower().startswith(("file:", "local:"))


def redact(location: str) -> str:
    """``location`` with the password of its user info (``s3://key:secret@bucket``) replaced by ``***``."""
    match = _SCHEME.match(location)
    if match is None:
        return location
    rest = location[match.end() :]
    authority, slash, path = rest.partition("/")
    user, at, host = authority.rpartition("@")
    if at and ":" in user:
        return f"{match.group(0)}{user.split(':', 1)[0]}:***@{host}{slash}{path}"
    return location


def normalize_root(root: str, what: str = "storage_root") -> str:
    """The canonical form of a storage root (or any absolute location); StorageConfigError if it is unusable.

    Local roots become absolute normalised paths (``file:///x/`` -> ``/x``); URLs keep their scheme (in
    lower case) and authority, get a normalised path without a trailing ``/``, and may carry no
    password, query or fragment.
    """
    if not isinstance(root, str) or not root.strip():
        raise StorageConfigError(f"{what} must be a non-empty path or URL, got {root!r}")
    if "\x00" in root:
        raise StorageConfigError(f"{what} {root!r} contains a NUL character")
    if _is_file_url(root):
        return _local_from_file_url(root, what)
    match = _SCHEME.match(root)
    if match is None:
        if not root.startswith("/"):
            raise StorageConfigError(
                f"{what} {root!r} must be an absolute path or a URL; allowed: /data/finegrained, file:///data, "
                "s3://bucket/prefix, gs://..., hdfs://..., abfs://..., memory://..."
            )
        return posixpath.normpath(root).replace("//", "/")
    shown = redact(root)
    try:
        parts = urlsplit(root)
        password = parts.password
    except ValueError as exc:
        raise StorageConfigError(f"{what} {shown!r} is not a valid URL: {exc}") from exc
    if password:
        raise StorageConfigError(
            f"{what} {shown!r} carries a password in the URL; give credentials through the storage "
            "connection (storage_conn_id) instead"
        )
    if parts.query or parts.fragment:
        raise StorageConfigError(f"{what} {shown!r} must not have a query or fragment ('?...', '#...')")
    scheme = parts.scheme.lower()
    if scheme in NETLOC_REQUIRED and not parts.netloc:
        raise StorageConfigError(f"{what} {shown!r} names no bucket or container; allowed: {scheme}://bucket/prefix")
    path = posixpath.normpath(parts.path) if parts.path else ""
    path = "" if path in ("/", ".") else path
    if path and not path.startswith("/"):
        path = "/" + path
    return f"{scheme}://{parts.netloc}{path}"


def _local_from_file_url(url: str, what: str) -> str:
    rest = url.split(":", 1)[1]
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host not in ("", "localhost"):
            raise StorageConfigError(f"{what} {url!r} names host {host!r}; a file: URL must be local (file:///path)")
        rest = slash + path
    if not rest.startswith("/"):
        raise StorageConfigError(f"{what} {url!r} must be an absolute path (file:///path)")
    return posixpath.normpath(rest).replace("//", "/")


def join(base: str, *parts: str) -> str:
    """``base`` with relative ``parts`` appended, ``/``-separated (no sanitising: see :func:`sanitize_component`)."""
    location = base
    for part in parts:
        if not part:
            continue
        if part.startswith("/") or _SCHEME.match(part):
            raise ValueError(f"cannot join absolute {part!r} under {base!r}")
        location = (location if location.endswith("/") else location + "/") + part.strip("/")
    return location


def parent(location: str) -> str:
    """The folder holding ``location`` (a bucket or authority is its own parent)."""
    match = _SCHEME.match(location)
    if match is None:
        return location.rstrip("/").rpartition("/")[0] or "/"
    authority, slash, path = location[match.end() :].rstrip("/").partition("/")
    head = path.rpartition("/")[0]
    if head:
        return f"{match.group(0)}{authority}/{head}"
    return f"{match.group(0)}{authority}" if authority or not slash else f"{match.group(0)}/"


def basename(location: str) -> str:
    """The last component of ``location``."""
    return location.rstrip("/").rpartition("/")[2]


def relative_to(base: str, location: str) -> str:
    """``location`` relative to the folder ``base``; ValueError if it is not under it."""
    prefix = base.rstrip("/") + "/"
    if not location.startswith(prefix):
        raise ValueError(f"{location!r} is not under {base!r}")
    return location[len(prefix) :]


def sanitize_component(value: str, what: str = "path component") -> str:
    """Return ``value`` made safe as one folder name; ValueError for traversal or absolute values.

    Characters other than letters, digits, ``.``, ``_`` and ``-`` become ``_`` (a run id's ``:`` and
    ``+`` are troublesome in Hadoop paths); a short hash of the original is then appended so that two
    values differing only in such characters still get different folders.
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    if value in (".", "..") or "/" in value or "\\" in value or "\x00" in value:
        raise ValueError(f"{what} {value!r} must not be '.', '..' or contain path separators")
    safe = _UNSAFE_CHARS.sub("_", value)
    if safe != value or len(safe) > _MAX_COMPONENT:
        digest = hashlib.sha256(value.encode()).hexdigest()[:8]
        safe = f"{safe[:_MAX_COMPONENT]}-{digest}"
    return safe


def plain_name(text: str) -> str:
    """``text`` (a master URL, say) as one folder name of a local machine's state: other characters become ``_``."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def _store(location: str) -> tuple[str, str, str]:
    """(scheme with s3a/s3n as s3, authority, path) of a normalised URL."""
    parts = urlsplit(location)
    scheme = "s3" if parts.scheme in S3_SCHEMES else parts.scheme
    return scheme, parts.netloc, parts.path or "/"


def same_store(location: str, other: str) -> bool:
    """Whether two locations are on one store (both local, or one scheme family and one bucket or host), so
    one set of credentials serves both."""
    if is_local(location) or is_local(other):
        return is_local(location) and is_local(other)
    return _store(location)[:2] == _store(other)[:2]


def _inside(root_path: str, path: str) -> bool:
    root_path = root_path.rstrip("/") or "/"
    return path == root_path or path.startswith(root_path if root_path.endswith("/") else root_path + "/")


def ensure_inside_root(root: str, path: str) -> str:
    """Return ``path`` in canonical form; ValueError if it is not inside ``root``.

    A relative ``path`` is taken relative to the root. On a local root symlinks are resolved first, so
    a link inside the root that points outside it is an escape; on URLs ``..`` components are resolved
    and the scheme (``s3``, ``s3a`` and ``s3n`` count as one) and bucket must match.
    """
    base = normalize_root(root)
    if not path.startswith("/") and not _SCHEME.match(path) and not _is_file_url(path):
        candidate = normalize_root(join(base, path), "path")
    else:
        candidate = normalize_root(path, "path")
    base_local, candidate_local = is_local(base), is_local(candidate)
    if base_local and candidate_local:
        # Local only: object stores have no symlinks, and resolving needs the local filesystem.
        real_root, real_path = os.path.realpath(base), os.path.realpath(candidate)
        if _inside(real_root, real_path):
            return real_path
    elif not base_local and not candidate_local:
        root_store, path_store = _store(base), _store(candidate)
        if root_store[:2] == path_store[:2] and _inside(root_store[2], path_store[2]):
            return candidate
    raise ValueError(f"path {redact(path)!r} escapes the storage root {redact(root)!r}")


def dag_folder_name(dag_id: str) -> str:
    """The name of a DAG's folder under the root; ValueError for a name the provider reserves (``_history``)."""
    name = sanitize_component(dag_id, "dag_id")
    if name in RESERVED_FOLDERS:
        raise ValueError(
            f"dag_id {dag_id!r} is a folder the provider reserves under the storage root "
            f"({', '.join(RESERVED_FOLDERS)}); rename the DAG"
        )
    return name


def stage_folder(root: str, dag_id: str, run_id: str, stage_id: str) -> str:
    """Return ``<root>/<dag_id>/<run_id>/<stage_id>`` with each component sanitized."""
    parts = (
        dag_folder_name(dag_id),
        sanitize_component(run_id, "run_id"),
        sanitize_component(stage_id, "stage_id"),
    )
    return ensure_inside_root(root, "/".join(parts))


def relative_output_path(path: str) -> str | None:
    """A relative ``output_path`` normalised (``""`` for the root, ``..`` first when it leaves it); None for
    an absolute path or URL (judged against the root, :func:`root_relative`) and for a template (once rendered)."""
    if path.startswith("/") or _SCHEME.match(path) or _is_file_url(path) or _TEMPLATE.search(path):
        return None
    normal = posixpath.normpath(path) if path else "."
    return "" if normal == "." else normal


def root_relative(root: str, location: str) -> str:
    """Where ``location`` (as :func:`ensure_inside_root` returned it) is under ``root``: ``""`` for the root."""
    base = normalize_root(root)
    if is_local(base):
        base_path, path = os.path.realpath(base), location
    else:
        base_path, path = _store(base)[2], _store(location)[2]
    base_path, path = base_path.rstrip("/"), path.rstrip("/")
    return "" if path == base_path else relative_to(base_path or "/", path)


def output_path_problem(relative: str, dag_id: str) -> str | None:
    """Why an output_path ``relative`` to the root (normalised) may not be used by a stage of ``dag_id``; None if
    it may. The rest of the rule needs the storage: another DAG's folder (execution/region_folder.py).

    Outputs stay out of what the provider and the default layout write: the root itself (a commit there
    would put its marker and attempts among the DAGs' folders), the provider's ``_``/``.`` names (a commit
    into ``_history`` breaks the history reader), this DAG's own folder, and any ``try=<n>`` folder (the
    default layout's exact locations, where a stage's own try would then be refused).
    """
    if relative == "":
        return "is the storage root itself"
    parts = relative.split("/")
    if parts[0] == "..":
        return "is outside the storage root"
    if parts[0].startswith(RESERVED_PREFIXES):
        return f"is inside {parts[0]!r}, a folder the provider reserves"
    with contextlib.suppress(ValueError):  # a DAG with a reserved name is refused elsewhere
        if parts[0] == dag_folder_name(dag_id):
            return f"is inside {parts[0]!r}, the folder of DAG {dag_id!r} (its default output layout)"
    for part in parts:
        if _TRY_FOLDER.fullmatch(part):
            return f"has a folder {part!r} named like a try folder of the default output layout"
    return None


def output_path_allowed(dag_id: str) -> str:
    """The allowed values of an output_path, for an error message."""
    with contextlib.suppress(ValueError):
        dag_id = dag_folder_name(dag_id)
    return OUTPUT_PATH_ALLOWED.format(reserved=", ".join(RESERVED_FOLDERS), dag=dag_id)


def _check_try(try_number: int) -> None:
    if isinstance(try_number, bool) or not isinstance(try_number, int) or try_number < 0:
        raise ValueError(f"try_number must be a non-negative int, got {try_number!r}")


def output_location(root: str, dag_id: str, run_id: str, stage_id: str, try_number: int) -> str:
    """Return the location where try ``try_number`` of a stage publishes its output."""
    _check_try(try_number)
    return join(stage_folder(root, dag_id, run_id, stage_id), f"try={try_number}")


def region_folder(root: str, dag_id: str, run_id: str, region: str, try_number: int) -> str:
    """Where one try of a region run keeps its job file, pickled callables, statuses and traces."""
    _check_try(try_number)
    return join(
        stage_folder(root, dag_id, run_id, REGIONS_FOLDER), sanitize_component(region, "region"), f"try={try_number}"
    )


def spark_uri(location: str) -> str:
    """What Spark and Hadoop must be given for ``location``.

    A local path becomes ``file:///abs`` (so a cluster whose default filesystem is HDFS does not
    resolve it there), ``s3://`` and ``s3n://`` become ``s3a://`` (Hadoop's S3 filesystem); other URLs
    are unchanged, and so is a relative path (a user's external input, left to Spark's working folder).
    """
    if is_local(location):
        path = normalize_root(location, "location") if _is_file_url(location) else location
        return "file://" + path if path.startswith("/") else path
    match = _SCHEME.match(location)
    if match is not None and match.group(1).lower() in ("s3", "s3n"):
        return "s3a://" + location[match.end() :]
    return location
