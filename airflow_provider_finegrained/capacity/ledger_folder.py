"""Where a capacity ledger keeps its reservation files: a local folder, or a folder on the storage root.

Both write a reservation whole, so a reader sees all of it or none (``capacity.ledger``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Protocol

from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.filesystem import StorageOptions
from airflow_provider_finegrained.storage.locations import join

__all__ = ["LedgerFolder", "LocalFolder", "StoredFolder"]


class LedgerFolder(Protocol):
    """Where a ledger's reservation files are: names, whole reads, whole writes, removals."""

    def names(self) -> list[str]: ...

    def read(self, name: str) -> str: ...

    def write(self, name: str, text: str) -> None: ...

    def remove(self, name: str) -> bool: ...


class LocalFolder:
    """A local folder: written to a temporary file, fsynced, renamed over the old one."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def names(self) -> list[str]:
        return sorted(path.name for path in self.folder.glob("*.json"))

    def read(self, name: str) -> str:
        return (self.folder / name).read_text(encoding="utf-8")

    def write(self, name: str, text: str) -> None:
        fd, temp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".part")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.folder / name)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def remove(self, name: str) -> bool:
        try:
            (self.folder / name).unlink()
        except FileNotFoundError:
            return False
        return True


class StoredFolder:
    """A folder on the storage root, through ``storage.filesystem`` (a put is whole on S3, a rename on HDFS)."""

    def __init__(self, location: str, storage_options: StorageOptions) -> None:
        self.location = location
        self.storage_options = storage_options

    def names(self) -> list[str]:
        # Hidden names are the lease and HDFS's temporary files of a write in progress.
        found = filesystem.list_files(self.location, self.storage_options)
        return sorted(n for n in found if n.endswith(".json") and "/" not in n and not n.startswith("."))

    def read(self, name: str) -> str:
        return filesystem.read_bytes(join(self.location, name), self.storage_options).decode("utf-8")

    def write(self, name: str, text: str) -> None:
        filesystem.write_bytes(join(self.location, name), text.encode("utf-8"), self.storage_options)

    def remove(self, name: str) -> bool:
        return filesystem.remove(join(self.location, name), self.storage_options)
