"""Secret Spark settings reach spark-submit through a private properties file, never its argv.

Anything on a command line is readable by every local user (``ps``, ``/proc/PID/cmdline``). spark-submit
reads ``--properties-file`` once, while it parses its arguments at start-up (the launcher that builds the
JVM's command line and then ``SparkSubmitArguments`` in that JVM), and keeps the settings in memory; the
file is needed only until then, so removing it when the launch ends is safe.

``--properties-file`` alone makes Spark 4 skip ``conf/spark-defaults.conf``; ``--load-spark-defaults``
(Spark 4.0+) loads it too, under the file's settings, so an installation's defaults still apply.
Precedence: ``--conf`` over ``--properties-file`` over ``spark-defaults.conf``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping

from airflow_provider_finegrained.secrets import is_secret_key

PROPERTIES_FILE_FLAG = "--properties-file"
LOAD_SPARK_DEFAULTS_FLAG = "--load-spark-defaults"
FILE_NAME = "secret.properties"
FOLDER_PREFIX = "finegrained-conf-"
# The folder's name holds the pid of the process that made it: one killed with SIGKILL (no finally ran)
# left it behind, and the next use in the same place removes it.
_FOLDER_RE = re.compile(rf"{FOLDER_PREFIX}(\d+)-")

# java.util.Properties: these have a meaning anywhere in a key or value, so they are always escaped.
_ESCAPES = {
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\f": "\\f",
    "=": "\\=",
    ":": "\\:",
    "#": "\\#",
    "!": "\\!",
}


def split_secret_conf(conf: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``(public, secret)``: ``conf`` split by :func:`airflow_provider_finegrained.secrets.is_secret_key`."""
    public = {key: value for key, value in conf.items() if not is_secret_key(key)}
    secret = {key: value for key, value in conf.items() if is_secret_key(key)}
    return public, secret


def _trimmed(char: str) -> bool:
    """Whether Spark's ``Utils.trimExceptCRLF`` strips ``char`` from the ends of a value it reads."""
    return char <= " " and char not in "\r\n"


def _escape(text: str, *, is_key: bool) -> str:
    out = []
    for index, char in enumerate(text):
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char == " " and (is_key or index == 0):
            # A space ends a key; a value's leading spaces are skipped by the reader.
            out.append("\\ ")
        elif " " <= char <= "~":
            out.append(char)
        else:
            # \uXXXX reads the same whatever charset the reader assumes (Spark reads UTF-8, Java's
            # Properties.load(InputStream) Latin-1); characters past the BMP become surrogate pairs.
            encoded = char.encode("utf-16-be")
            out.extend(f"\\u{encoded[i] << 8 | encoded[i + 1]:04x}" for i in range(0, len(encoded), 2))
    return "".join(out)


def properties_text(settings: Mapping[str, str]) -> str:
    """``settings`` in Java properties syntax, one ``key=value`` line each, sorted by key.

    Raises ValueError for a value with leading or trailing whitespace: Spark trims the values it reads
    from a properties file (characters up to the space, except CR and LF), so such a secret would arrive changed. The
    error names the key, never the value.
    """
    lines = []
    for key in sorted(settings):
        value = settings[key]
        if not key or key != key.strip():
            raise ValueError(f"invalid Spark conf key {key!r}: must be non-empty with no surrounding spaces")
        if value and (_trimmed(value[0]) or _trimmed(value[-1])):
            raise ValueError(
                f"Spark setting {key!r}: a secret value with leading or trailing whitespace cannot go through "
                "a properties file (Spark trims it there); remove the whitespace"
            )
        lines.append(f"{_escape(key, is_key=True)}={_escape(value, is_key=False)}\n")
    return "".join(lines)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, and not ours to judge
    return True


def remove_abandoned_folders(directory: str | None = None) -> list[str]:
    """Remove the secret folders under ``directory`` (default: the temp folder) whose maker has died.

    Only this user's folders are touched. Returns the folders removed.
    """
    parent = directory or tempfile.gettempdir()
    removed = []
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            match = _FOLDER_RE.match(entry.name)
            if not match or int(match.group(1)) == os.getpid() or _alive(int(match.group(1))):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid():
                    shutil.rmtree(entry.path)
                    removed.append(entry.path)
    return removed


@contextlib.contextmanager
def secret_properties_file(secret: Mapping[str, str], directory: str | None = None) -> Iterator[str | None]:
    """Write ``secret`` to a properties file only this user can read; yield its path; remove it on leaving.

    The file is created 0600 (never wider, not even for an instant) in a fresh 0700 folder under
    ``directory`` (default: the system temp folder). Yields None, and writes nothing, when ``secret`` is
    empty. Keep the block open until spark-submit has read the file (its start-up; see the module note).
    A process killed inside the block leaves the folder; the next call in the same place removes it
    (:func:`remove_abandoned_folders`).
    """
    if not secret:
        yield None
        return
    text = properties_text(secret)
    remove_abandoned_folders(directory)
    folder = tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-", dir=directory)  # mkdtemp makes it 0700
    try:
        path = os.path.join(folder, FILE_NAME)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(text)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def properties_file_args(path: str | None) -> list[str]:
    """spark-submit's arguments that load ``path`` (and still ``spark-defaults.conf``); [] for None."""
    if path is None:
        return []
    return [PROPERTIES_FILE_FLAG, path, LOAD_SPARK_DEFAULTS_FLAG]
