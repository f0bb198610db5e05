"""Fencing tokens: only the newest try of a stage may publish its output.

Each try of a stage holds a token: its try number. Before a try cleans the stage's folder it *raises*
the stage's fence to its token, which revokes every older try: a killed try's Spark driver that wakes
up late (an orphan, a cluster-mode driver that outlived its task) can then neither publish nor make a
valid marker, whatever the timing.

The fence is a folder of empty objects, one per token (``<stage folder>/_fence/try=<n>``), and its
current token is the highest present. Raising is a create, never an update, so it needs no
compare-and-swap on any store and the fence only goes up. The commit checks the fence right before it
creates the marker and again after; the marker records its token, and readers accept a marker only
while its token is the fence's current one (the storage side checks the token: Kleppmann's fencing).
Pure storage calls, no Spark: runs in the operator and in the driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.filesystem import StorageOptions
from airflow_provider_finegrained.storage.locations import join, parent, relative_to, stage_folder

__all__ = ["FENCE_FOLDER", "Fence", "current_token", "rebased_fence"]

FENCE_FOLDER = "_fence"
_TOKEN = re.compile(r"try=(\d+)")


@dataclass(frozen=True)
class Fence:
    """The fencing token one try of a stage holds, and where the stage's fence lives."""

    folder: str
    token: int

    @classmethod
    def for_stage(cls, root: str, dag_id: str, run_id: str, stage: str, try_number: int) -> Fence:
        """The fence of a stage's outputs (default layout and ``output_path`` alike) for one try."""
        return cls(join(stage_folder(root, dag_id, run_id, stage), FENCE_FOLDER), int(try_number))

    def raise_to_token(self, storage_options: StorageOptions = None) -> None:
        """Revoke every older try: record this try's token (idempotent; never lowers the fence)."""
        location = join(self.folder, f"try={self.token}")
        if not filesystem.exists(location, storage_options):
            filesystem.write_bytes(location, b"", storage_options)

    def current(self, storage_options: StorageOptions = None) -> int | None:
        """The stage's current token: the highest raised; None when no try has raised the fence."""
        return current_token(self.folder, storage_options)

    def superseded_by(self, storage_options: StorageOptions = None) -> int | None:
        """The newer try that revoked this one; None while this try may publish."""
        current = self.current(storage_options)
        return current if current is not None and current > self.token else None

    def to_dict(self) -> dict[str, Any]:
        return {"folder": self.folder, "token": self.token}

    @classmethod
    def from_dict(cls, data: Any) -> Fence | None:
        """Inverse of :meth:`to_dict`; None for a marker written without a fence."""
        if not isinstance(data, dict) or "folder" not in data or "token" not in data:
            return None
        return cls(str(data["folder"]), int(data["token"]))


def current_token(folder: str, storage_options: StorageOptions = None) -> int | None:
    """The highest ``try=<n>`` token in a fence folder; None when there is none."""
    tokens = [
        int(match.group(1))
        for name, is_folder in filesystem.list_folder(folder, storage_options)
        if not is_folder and (match := _TOKEN.fullmatch(name))
    ]
    return max(tokens) if tokens else None


def rebased_fence(fence: Fence, recorded_path: str, location: str) -> Fence:
    """The fence of an output read at ``location`` that its marker recorded at ``recorded_path``.

    A storage root can move (copied to another bucket, mounted elsewhere); a fence beside the output
    moves with it, so it is found relative to the output's parent, as it was when committed.
    """
    if recorded_path == location:
        return fence
    try:
        inside = relative_to(parent(recorded_path), fence.folder)
    except ValueError:
        return fence
    return Fence(join(parent(location), inside), fence.token)
