"""What a spawned process runs against a shared ledger (a module of its own: a spawned child imports its target's
module, and the test module would bring tests/conftest.py's set-up along)."""

from __future__ import annotations

import os
import socket
import time
from multiprocessing.synchronize import Barrier
from typing import Any

from airflow_provider_finegrained.capacity import ReservationLedger
from airflow_provider_finegrained.capacity.lease import Lease
from airflow_provider_finegrained.capacity.ledger import LEASE_FILE
from airflow_provider_finegrained.storage.filesystem import exists, read_bytes, read_json, write_json
from airflow_provider_finegrained.storage.locations import join

ROUNDS = 3


def append_under_the_lock(location: str, options: dict[str, Any], name: str, log: str, start: Barrier) -> None:
    """Read the shared log, append one line, write it back: a lost update shows when two do it at once."""
    ledger = ReservationLedger(location, storage_options=options)
    lease = join(location, LEASE_FILE)
    exists(location, options)  # the storage client is set up (seconds for s3fs) before the processes contend
    start.wait()
    for round_ in range(ROUNDS):
        with ledger.locked(timeout_s=120):
            holder = Lease.from_bytes(read_bytes(lease, options))
            assert (holder.host, holder.pid) == (socket.gethostname(), os.getpid())
            try:
                lines = list(read_json(log, options))
            except FileNotFoundError:
                lines = []
            time.sleep(0.2)  # widen the read-modify-write window, as a slow store would
            write_json(log, [*lines, f"{name}:{round_}"], options)
