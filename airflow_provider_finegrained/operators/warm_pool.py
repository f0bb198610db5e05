"""Setup and teardown tasks around a DAG's stages: ``start >> stages >> stop``, stopped even when a stage fails.

start, stop = warm_pool_tasks()
start >> [stage_a, stage_b] >> stop
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook


class WarmPoolStartOperator(BaseOperator):
    """Start the connection's warm pool (or find it running); push its URL and folder.

    The pool runs in a process of its own, so it outlives this task; stop it with
    :class:`WarmPoolStopOperator` as the teardown, or let its idle timeout stop it.
    """

    template_fields: Sequence[str] = ("folder",)

    def __init__(
        self,
        *,
        finegrained_spark_conn_id: str = FineGrainedSparkHook.default_conn_name,
        folder: str | None = None,
        idle_timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.finegrained_spark_conn_id = finegrained_spark_conn_id
        self.folder = folder
        self.idle_timeout = idle_timeout

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow_provider_finegrained.warm import ensure_started

        settings = FineGrainedSparkHook(self.finegrained_spark_conn_id).get_settings()
        pool = ensure_started(settings, self.folder, idle_timeout_s=self.idle_timeout)
        self.log.info("Warm pool %s is running (folder %s, application %s)", pool.url, pool.folder, pool.application_id)
        return {"url": pool.url, "folder": pool.folder, "application_id": pool.application_id, "ui_url": pool.ui_url}


class WarmPoolStopOperator(BaseOperator):
    """Stop the connection's warm pool and wait until every process of it is gone."""

    template_fields: Sequence[str] = ("folder",)

    def __init__(
        self,
        *,
        finegrained_spark_conn_id: str = FineGrainedSparkHook.default_conn_name,
        folder: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.finegrained_spark_conn_id = finegrained_spark_conn_id
        self.folder = folder

    def execute(self, context: Any) -> bool:
        from airflow_provider_finegrained.warm import auto_folder, stop

        folder = self.folder or auto_folder(FineGrainedSparkHook(self.finegrained_spark_conn_id).get_settings())
        stopped = stop(folder)
        self.log.info("Warm pool in %s %s", folder, "stopped" if stopped else "was not running")
        return stopped


def warm_pool_tasks(
    *,
    finegrained_spark_conn_id: str = FineGrainedSparkHook.default_conn_name,
    folder: str | None = None,
    idle_timeout: float | None = None,
    task_id_prefix: str = "warm_pool",
) -> tuple[BaseOperator, BaseOperator]:
    """A setup task starting the pool and its teardown stopping it; call inside a DAG context."""
    start = WarmPoolStartOperator(
        task_id=f"{task_id_prefix}_start",
        finegrained_spark_conn_id=finegrained_spark_conn_id,
        folder=folder,
        idle_timeout=idle_timeout,
    )
    stop = WarmPoolStopOperator(
        task_id=f"{task_id_prefix}_stop", finegrained_spark_conn_id=finegrained_spark_conn_id, folder=folder
    )
    start.as_setup()  # type: ignore[no-untyped-call, unused-ignore]
    stop.as_teardown(setups=start)
    return start, stop
