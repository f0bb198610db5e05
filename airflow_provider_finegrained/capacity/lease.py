"""A lease lock on any storage the provider writes to (HDFS, S3, a local folder): one lock object at a time.

``flock`` exists only on a local filesystem. On shared storage the lock is an object created with the
storage's exclusive create (``storage.filesystem.create_exclusive``: HDFS's rename without overwrite, S3's
conditional put): exactly one creator wins. Its JSON body names the holder (host, pid), a token unique to
this acquisition, and an expiry. The holder removes it when done, but only while it still holds the token
it wrote; a holder that died leaves it behind, and a waiter breaks it once it has expired.

A lease is meant for a short hold (one capacity decision: a listing, a few reads, one write); it is far
longer than any such hold, so it only ever expires when its holder died. Expiry is judged by the waiter's
clock against the time the holder wrote: hosts' clocks must agree to well within the lease (NTP).

The remaining race: breaking an expired lock is a read, a compare and a remove, not one atomic step (S3
has no delete-if-unchanged, WebHDFS no delete-if-same-file). Two waiters that find the same expired lock
at the same moment can both break it: if one has removed it and created its own lock between the
other's second read and its remove, the other removes that new lock and both hold the lock at once, for
one decision each. That needs a holder to have died while holding the lock and two waiters breaking it
within milliseconds of each other; the harm is the one the lock exists to prevent (both count the same
free capacity), once.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from airflow_provider_finegrained.storage.filesystem import StorageOptions, create_exclusive, read_bytes, remove
from airflow_provider_finegrained.storage.locations import redact

DEFAULT_LEASE_S = 60.0
_FIRST_WAIT_S = 0.05
_LONGEST_WAIT_S = 0.5


@dataclass(frozen=True)
class Lease:
    """The body of a lock object: who holds it, the token of this acquisition, until when."""

    host: str
    pid: int
    token: str
    acquired_at: float
    expires_at: float

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> Lease:
        """Parse :meth:`to_bytes`'s output; ValueError for anything else."""
        try:
            fields = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"a lease is a JSON object: {exc}") from None
        types: dict[str, tuple[type, ...]] = {
            "host": (str,),
            "pid": (int,),
            "token": (str,),
            "acquired_at": (int, float),
            "expires_at": (int, float),
        }
        if not isinstance(fields, dict) or set(fields) != set(types):
            raise ValueError(f"a lease has the fields {sorted(types)}")
        for name, allowed in types.items():
            if isinstance(fields[name], bool) or not isinstance(fields[name], allowed):
                raise ValueError(f"lease field {name!r} has the wrong type: {fields[name]!r}")
        return cls(**fields)

    def describe(self) -> str:
        until = time.strftime("%H:%M:%S", time.localtime(self.expires_at))
        return f"held by pid {self.pid} on {self.host} until {until}"


class LeaseLock:
    """The lock object at ``location`` (a file or object URL, or a local path), with fsspec ``storage_options``."""

    def __init__(self, location: str, storage_options: StorageOptions = None, lease_s: float = DEFAULT_LEASE_S) -> None:
        if not lease_s > 0:
            raise ValueError(f"lease_s must be > 0 (seconds a lock is held at most), got {lease_s}")
        self.location = location
        self.storage_options = storage_options
        self.lease_s = lease_s

    @contextlib.contextmanager
    def held(self, timeout_s: float | None = None) -> Iterator[Lease]:
        """Hold the lock; ``timeout_s`` None waits as long as it takes, else TimeoutError naming the location."""
        lease = self.acquire(timeout_s)
        try:
            yield lease
        finally:
            self.release(lease)

    def acquire(self, timeout_s: float | None = None) -> Lease:
        """Create the lock object, waiting (polling with backoff) while a live lease holds it; break an expired one."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        wait = _FIRST_WAIT_S
        unreadable: tuple[bytes, float] | None = None  # content we could not parse, and since when we see it
        while True:
            now = time.time()
            mine = Lease(socket.gethostname(), os.getpid(), uuid.uuid4().hex, now, now + self.lease_s)
            try:
                create_exclusive(self.location, mine.to_bytes(), self.storage_options)
                return mine
            except FileExistsError:
                pass
            try:
                seen = read_bytes(self.location, self.storage_options)
            except FileNotFoundError:
                continue  # released between our create and our read: try again at once
            holder: Lease | None
            try:
                holder = Lease.from_bytes(seen)
            except ValueError:
                # Not a lease we can read (a partial write where create is O_EXCL only, another format): it has no
                # expiry to trust, so it counts as expired once it has stayed the same for a whole lease.
                holder = None
                if unreadable is None or unreadable[0] != seen:
                    unreadable = (seen, time.monotonic())
                if time.monotonic() - unreadable[1] >= self.lease_s:
                    self._break(seen)
                    continue
            else:
                unreadable = None
                if holder.expires_at <= time.time():
                    self._break(seen)
                    continue
            if deadline is not None and time.monotonic() >= deadline:
                by = holder.describe() if holder is not None else "its content unreadable"
                raise TimeoutError(
                    f"could not lock the capacity ledger {redact(self.location)} within {timeout_s:g} s ({by})"
                )
            pause = wait * random.uniform(0.5, 1.0)  # jitter: waiters on several hosts do not poll in step
            if deadline is not None:
                pause = min(pause, max(0.0, deadline - time.monotonic()))
            time.sleep(pause)
            wait = min(wait * 2, _LONGEST_WAIT_S)

    def release(self, lease: Lease) -> bool:
        """Remove the lock object if it still holds ``lease``'s token; False when it is gone or another's."""
        try:
            current = Lease.from_bytes(read_bytes(self.location, self.storage_options))
        except (FileNotFoundError, ValueError):
            return False
        if current.token != lease.token:
            return False  # ours expired and was broken: the lock is someone else's now
        return remove(self.location, self.storage_options)

    def _break(self, seen: bytes) -> None:
        """Remove an expired lock object, unless it changed since it was read (see the module's remaining race)."""
        try:
            again = read_bytes(self.location, self.storage_options)
        except FileNotFoundError:
            return
        if again == seen:
            remove(self.location, self.storage_options)
