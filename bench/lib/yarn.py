"""The loopback YARN as the experiments read it: the connection ``hadoop start`` prints and YARN's own account
of what its applications reserved (``/ws/v1/cluster/apps``: ``vcoreSeconds``, ``memorySeconds``)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from typing import Any, Final

from bench.lib.provider import CommandFailed

FINAL_STATES: Final = frozenset({"FINISHED", "FAILED", "KILLED"})
"""A YARN application in one of these has its final ``vcoreSeconds`` and ``memorySeconds``."""


def printed_connection(out: str) -> tuple[str, dict[str, Any]]:
    """The host and extras of the ``airflow connections add`` line a ``cluster``/``hadoop start`` printed."""
    for line in out.splitlines():
        if line.startswith("airflow connections add"):
            words = shlex.split(line)
            host, extra = words[words.index("--conn-host") + 1], words[words.index("--conn-extra") + 1]
            return host, json.loads(extra)
    raise CommandFailed(f"no connection line in the output: {out[-1000:]}")


def apps_of(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The applications of a ``/ws/v1/cluster/apps`` answer (``{"apps": null}`` when there are none)."""
    return list((answer.get("apps") or {}).get("app") or [])


def yarn_usage(apps: Iterable[Mapping[str, Any]], started: float, ended: float) -> dict[str, Any]:
    """What the applications started inside [started, ended] reserved, in YARN's own account: core-seconds
    (``vcoreSeconds``) and MiB-seconds (``memorySeconds``) of every container, per application and summed."""
    mine = sorted(
        (a for a in apps if started <= int(a.get("startedTime", 0)) / 1000 <= ended), key=lambda a: a["startedTime"]
    )
    return {
        "reserved_core_s": float(sum(int(a.get("vcoreSeconds", 0)) for a in mine)),
        "reserved_mb_s": float(sum(int(a.get("memorySeconds", 0)) for a in mine)),
        "applications": len(mine),
        "unfinished": [a["id"] for a in mine if a.get("state") not in FINAL_STATES],
        "not_succeeded": [
            a["id"] for a in mine if a.get("state") in FINAL_STATES and a.get("finalStatus") != "SUCCEEDED"
        ],
        "apps": [
            {
                "id": a["id"],
                "name": a.get("name", ""),
                "queue": a.get("queue", ""),
                "start": int(a["startedTime"]) / 1000,
                "end": int(a.get("finishedTime") or 0) / 1000 or None,
                "vcore_s": int(a.get("vcoreSeconds", 0)),
                "memory_mb_s": int(a.get("memorySeconds", 0)),
                "final_status": a.get("finalStatus"),
            }
            for a in mine
        ],
    }
