"""A region's warm pool: the one its connection names (started, found or checked), leased while the region runs.

Starting a pool is :mod:`warm.start`'s, stopping it and its status :mod:`warm.control`'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from airflow_provider_finegrained.warm.auth import split_token
from airflow_provider_finegrained.warm.control import running_state
from airflow_provider_finegrained.warm.external import CONN_PREFIX, external_from_connection
from airflow_provider_finegrained.warm.health import check_health
from airflow_provider_finegrained.warm.start import (
    DEFAULT_HEALTH_TIMEOUT_S,
    DEFAULT_START_TIMEOUT_S,
    connection_storage_options,
    ensure_started,
)
from airflow_provider_finegrained.warm.state import Lease, WarmPool, WarmPoolUnavailable, hold_lease, start_lock


def pool_for(settings: Any, storage_options: Mapping[str, Any] | None = None) -> WarmPool | None:
    """The pool a connection names: None for ``off``, the started pool for ``auto``, a checked external server.

    An external server is ``sc://host:port`` (a ``;token=`` in it is taken out of the URL the pool shows)
    or ``conn:<conn_id>``, an Airflow connection whose host and port name the server and whose password
    is its token; it reaches the storage root with its own settings, the task with `storage_options`.
    `storage_options` default to the connection's (:func:`connection_storage_options`).
    """
    mode = settings.warm_pool
    if mode == "off":
        return None
    if mode == "auto":
        return ensure_started(settings, storage_options=storage_options)
    if mode.startswith(CONN_PREFIX):
        url, token = external_from_connection(mode.removeprefix(CONN_PREFIX))
    else:
        url, token = split_token(mode)
    check_health(url, DEFAULT_HEALTH_TIMEOUT_S, token=token)
    options = connection_storage_options(settings) if storage_options is None else dict(storage_options)
    return WarmPool(
        url=url,
        folder=None,
        shape=None,
        application_id=None,
        ui_url=None,
        started_at=0.0,
        token=token,
        storage_options=options,
    )


@contextlib.contextmanager
def in_use(pool: WarmPool, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> Iterator[Lease]:
    """Hold a lease on `pool` while a region runs in it: the idle timer does not stop a leased pool.

    Record each Connect session the region opens with ``lease.record_session``: if this process dies,
    the pool's supervisor interrupts and releases them. Raises WarmPoolUnavailable if the pool has
    stopped since it was found (call ensure_started again). An external server (no folder) is not the
    provider's to stop, so nothing is held.
    """
    if pool.folder is None:
        yield Lease(pool)
        return
    with contextlib.ExitStack() as stack:
        # Under the start lock, which the idle stop also takes: the pool cannot stop between check and lease.
        with start_lock(pool.folder, timeout_s) as held:
            state = running_state(pool.folder)
            if not held or state is None or state.get("url") != pool.url:
                raise WarmPoolUnavailable(
                    f"the warm pool {pool.url} in {pool.folder} is no longer running (idle timeout or stop); "
                    "start it again with ensure_started"
                )
            lease = stack.enter_context(hold_lease(pool.folder, pool))
        yield lease
