"""Registers the UI with Airflow (``airflow.plugins`` entry point): the app and the tabs that link to it."""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_finegrained.ui.app import URL_PREFIX, LazyApp

# No leading slash: the UI sets the iframe's src to the href as is, and resolves a relative one against its
# <base href>, which is the path of [api] base_url ("/airflow/" under a prefix, "/" without one).
_VIEW_PREFIX = URL_PREFIX.lstrip("/")
RUN_TAB = {
    "name": "Fine-grained plan",
    "href": _VIEW_PREFIX + "/dags/{DAG_ID}/runs/{RUN_ID}",
    "destination": "dag_run",
    "url_route": "finegrained-run",
}
TASK_TAB = {
    "name": "Fine-grained plan",
    "href": _VIEW_PREFIX + "/dags/{DAG_ID}/runs/{RUN_ID}?task_id={TASK_ID}",
    "destination": "task_instance",
    "url_route": "finegrained-task",
}
HISTORY_TAB = {
    "name": "Fine-grained sizing",
    "href": _VIEW_PREFIX + "/dags/{DAG_ID}/history",
    "destination": "dag",
    "url_route": "finegrained-history",
}


class FineGrainedPlugin(AirflowPlugin):
    """The run page (tab of DAG runs and task instances) and the sizing history (tab of DAGs)."""

    name = "finegrained"
    fastapi_apps: list[Any] = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": "finegrained"}]  # noqa: RUF012
    external_views: list[Any] = [RUN_TAB, TASK_TAB, HISTORY_TAB]  # noqa: RUF012
