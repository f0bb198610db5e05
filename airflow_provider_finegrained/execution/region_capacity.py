"""Reserve a region's capacity before its application starts (FLIP-138), or say a warm pool needs none."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_finegrained.capacity import CapacityUnavailable
from airflow_provider_finegrained.execution.capacity_gate import (
    CapacityImpossible,
    CapacityWait,
    Grant,
    acquire,
    capacity_source,
    region_request,
)
from airflow_provider_finegrained.execution.region_outcome import AwaitCapacity, Failed
from airflow_provider_finegrained.execution.region_trace import CapacityRecord
from airflow_provider_finegrained.execution.warm_choice import Carrier
from airflow_provider_finegrained.launchers.base import Launcher, LogLike
from airflow_provider_finegrained.launchers.standalone.capacity import webui_text
from airflow_provider_finegrained.planning import RegionSizing
from airflow_provider_finegrained.planning.capacity import minimum_slots

if TYPE_CHECKING:
    from airflow_provider_finegrained.settings import ConnectionSettings

__all__ = ["reserve_capacity", "warm_capacity"]


def warm_capacity(carrier: Carrier) -> CapacityRecord:
    """A warm region's capacity record: the pool's executors are already running, nothing to declare."""
    url = carrier.pool.url if carrier.pool is not None else ""
    return CapacityRecord(
        {"outcome": "warm_pool", "message": f"runs in the warm pool's running executors ({url})", "source": url}
    )


def reserve_capacity(
    settings: ConnectionSettings,
    storage_options: dict[str, Any],
    launcher: Launcher,
    application_conf: Mapping[str, str],
    sizing: RegionSizing,
    minimums: Mapping[str, int],
    region: str,
    members: Sequence[str],
    key: str,
    app_name: str,
    log: LogLike,
) -> Grant | AwaitCapacity | Failed:
    """Reserve the region's executors; else wait for capacity, or fail (for good when no worker could ever
    hold an executor), naming the region's stages."""
    least = minimum_slots(minimums, settings.min_slots, sizing.slots)
    master = launcher.master_container(application_conf)
    request = region_request(sizing, least, count_overhead=launcher.count_overhead, master=master)
    stages = ", ".join(members)
    try:
        queue = settings.admission == "cluster_queue"
        source = capacity_source(settings, storage_options=storage_options)
        grant = acquire(source, request, key, app_name, cluster_queue=queue)
    except CapacityImpossible as exc:
        return Failed(CapacityImpossible(f"region {region} (stages {stages}): {exc}"), final=True)
    except CapacityWait as exc:
        return AwaitCapacity(CapacityWait(f"region {region} (stages {stages}): {exc}", exc.request))
    except CapacityUnavailable as exc:
        # The stages are what the user wrote; a standalone master's URL may be one they never set (port 8080).
        quoted = ", ".join(repr(member) for member in members)
        named = f"stage {quoted}" if len(members) == 1 else f"stages {quoted}"
        where = f" from {webui_text(settings)}" if settings.master_kind == "standalone" else ""
        return Failed(
            CapacityUnavailable(
                f"{named} (region {region}): cannot read the free capacity of {settings.master}{where}: "
                f"{exc}; the task fails and Airflow retries it if it has retries left"
            )
        )
    log.info("Capacity for region %s: %s", region, grant.decision.message)
    return grant
