"""``hdfs://`` on the Python side, over the NameNode's WebHDFS REST API (no libhdfs, no JVM in Python).

Spark reaches ``hdfs://nn:8020/x`` through Hadoop's own client; the Airflow task and the Python of the
Spark driver reach the same files through WebHDFS (fsspec's ``webhdfs`` filesystem), at the NameNode's
web address: the ``webhdfs_url`` storage option, else ``dfs.namenode.http-address`` in the Hadoop
configuration folder (``HADOOP_CONF_DIR``) when its ``fs.defaultFS`` is this NameNode, else port 9870 of
the NameNode's host (Hadoop 3's default). The user is ``HADOOP_USER_NAME`` or the login name, as Hadoop's
client takes it without Kerberos.

Writes are whole-file and atomic where the provider needs it: content goes to a hidden temporary file
in the same folder in one ``CREATE``, then a ``RENAME`` publishes it. A rename without overwrite is
atomic at the NameNode and refuses an existing destination, so an exclusive create has exactly one
winner, and a reader never sees a half-written marker.
"""

from __future__ import annotations

import getpass
import os
import urllib.parse
import uuid
import xml.etree.ElementTree as ElementTree
from typing import Any

from fsspec.implementations.webhdfs import WebHDFS

from airflow_provider_finegrained.storage.errors import StorageConfigError

DEFAULT_HTTP_PORT = 9870
HDFS_SCHEMES = frozenset({"hdfs"})


def hadoop_conf(conf_dir: str) -> dict[str, str]:
    """The properties of ``core-site.xml`` and ``hdfs-site.xml`` in ``conf_dir`` (later files win)."""
    found: dict[str, str] = {}
    for name in ("core-site.xml", "hdfs-site.xml"):
        path = os.path.join(conf_dir, name)
        if not os.path.isfile(path):
            continue
        try:
            root = ElementTree.parse(path).getroot()
        except ElementTree.ParseError as exc:
            raise StorageConfigError(f"Hadoop configuration {path} is not valid XML: {exc}") from None
        for prop in root.iter("property"):
            key, value = prop.findtext("name"), prop.findtext("value")
            if key and value is not None:
                found[key.strip()] = value.strip()
    return found


def _authority(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc.lower()


def webhdfs_url(location: str, conf_dir: str | None = None) -> str:
    """The NameNode's web address for an ``hdfs://`` location: from ``conf_dir``, else port 9870 of its host.

    ``conf_dir`` defaults to ``HADOOP_CONF_DIR``. Its ``dfs.namenode.http-address`` counts only when its
    ``fs.defaultFS`` names the location's NameNode (or the location names none: ``hdfs:///x``).
    """
    parts = urllib.parse.urlsplit(location)
    conf_dir = conf_dir or os.environ.get("HADOOP_CONF_DIR")
    conf = hadoop_conf(conf_dir) if conf_dir else {}
    default_fs = conf.get("fs.defaultFS", "")
    same = not parts.netloc or (default_fs.startswith("hdfs://") and _authority(default_fs) == parts.netloc.lower())
    address = conf.get("dfs.namenode.http-address") if same else None
    if address:
        host, _, port = address.rpartition(":")
        if host in ("", "0.0.0.0"):  # the NameNode binds every interface: reach it by the location's host
            host = urllib.parse.urlsplit(default_fs if not parts.netloc else location).hostname or "127.0.0.1"
        return f"http://{host}:{port}"
    if not parts.hostname:
        raise StorageConfigError(
            f"storage at {location} names no NameNode and no Hadoop configuration gives one; allowed: "
            "hdfs://namenode:port/path, or set hadoop_conf_dir (HADOOP_CONF_DIR) to a folder whose core-site.xml "
            "sets fs.defaultFS"
        )
    return f"http://{parts.hostname}:{DEFAULT_HTTP_PORT}"


def hdfs_user() -> str:
    """Who the provider acts as on HDFS: ``HADOOP_USER_NAME``, else the login name (simple authentication)."""
    return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


class WebHdfsFileSystem(WebHDFS):  # type: ignore[misc]
    """fsspec's WebHDFS with whole-file writes: one ``CREATE`` of a temporary file, then an atomic ``RENAME``."""

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        """Write ``value`` at ``path``; ``mode="create"`` raises FileExistsError when ``path`` exists."""
        path = self._strip_protocol(path)
        folder, _, name = path.rpartition("/")
        temporary = f"{folder}/.{name}.tmp-{uuid.uuid4().hex}"
        self._create(temporary, bytes(value))
        try:
            if mode == "create":
                if not self._call("RENAME", "put", temporary, destination=path).json().get("boolean"):
                    # The source exists (just written), so the NameNode refuses only for a missing folder or an
                    # existing name; that name may be gone again by now (a lock released), so do not look at it.
                    if not self.exists(folder):
                        raise OSError(f"HDFS refused to rename to {path}: its folder {folder} does not exist")
                    raise FileExistsError(path)
            else:
                self._call("RENAME", "put", temporary, destination=path, renameoptions="OVERWRITE")
        except BaseException:
            self.rm(temporary)
            raise
        self.invalidate_cache(folder)

    def _create(self, path: str, data: bytes) -> None:
        # The NameNode answers CREATE with the DataNode that takes the content; one PUT there writes it whole
        # (fsspec's own writer creates an empty file first and appends, visible half-done in between).
        answer = self._call("CREATE", "put", path, redirect=False, overwrite="false")
        stored = self.session.put(
            self._apply_proxy(answer.headers["Location"]),
            data=data,
            headers={"content-type": "application/octet-stream"},
        )
        stored.raise_for_status()


def hdfs_filesystem(location: str, options: dict[str, Any]) -> tuple[WebHdfsFileSystem, str]:
    """The WebHDFS filesystem for an ``hdfs://`` location and the path inside it.

    ``options``: ``webhdfs_url`` (the NameNode's ``http(s)://host:port``), ``user``, and the rest of
    fsspec's WebHDFS arguments (``kerberos``, ``token``, ``session_verify``...).
    """
    options = dict(options)
    url = urllib.parse.urlsplit(options.pop("webhdfs_url", None) or webhdfs_url(location))
    if url.scheme not in ("http", "https") or not url.hostname:
        raise StorageConfigError(f"storage option webhdfs_url {url.geturl()!r}: allowed: http(s)://namenode:port")
    if not (options.get("kerberos") or options.get("token")):
        options.setdefault("user", hdfs_user())
    fs = WebHdfsFileSystem(
        host=url.hostname,
        port=url.port or DEFAULT_HTTP_PORT,
        use_https=url.scheme == "https",
        **options,
    )
    return fs, urllib.parse.urlsplit(location).path.rstrip("/") or "/"
