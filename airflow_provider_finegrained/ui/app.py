"""The plugin's FastAPI app: HTML pages and a JSON API, each answering only users who may read the DAG.

Mounted under :data:`URL_PREFIX` by the api-server. Plugin apps get no auth of their own, so every
route depends on Airflow's ``requires_access_dag`` (the auth manager's ``is_authorized_dag`` for the
``dag_id`` in the path): no token -> 401, a user who may not read the DAG -> 403.

Links in the pages start from the request's ASGI ``root_path``: the api-server sets it to the path of
``[api] base_url`` and the mount adds :data:`URL_PREFIX`, so they hold with and without a base URL path.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.types import Receive, Scope, Send

from airflow_provider_finegrained.ui.model import history_view, run_view
from airflow_provider_finegrained.ui.pages import history_page, run_page

URL_PREFIX = "/finegrained"
DEFAULT_HISTORY_RUNS = 50
MAX_HISTORY_RUNS = 500

Limit = Annotated[int, Query(ge=1, le=MAX_HISTORY_RUNS, description="how many of the latest runs")]


def create_app() -> FastAPI:
    """Build the app; imports Airflow's API security (which loads the ORM) only when first served."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag

    from airflow_provider_finegrained.ui.store import RunNotFound, load_history, load_run

    can_read = [Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.RUN))]
    app = FastAPI(title="airflow-provider-finegrained UI", docs_url=None, redoc_url=None, openapi_url=None)

    def _run(dag_id: str, run_id: str) -> Any:
        try:
            return run_view(dag_id, load_run(dag_id, run_id))
        except RunNotFound as e:
            raise HTTPException(status_code=404, detail=str(e)) from None

    @app.get("/api/dags/{dag_id}/runs/{run_id:path}", dependencies=can_read)
    def run_json(dag_id: str, run_id: str) -> JSONResponse:
        """The run's plan and, per stage, what it consumed, decided and ran with."""
        return JSONResponse(_run(dag_id, run_id).to_json())

    @app.get("/api/dags/{dag_id}/history", dependencies=can_read)
    def history_json(dag_id: str, limit: Limit = DEFAULT_HISTORY_RUNS) -> JSONResponse:
        """Per stage, input bytes, decided parallelism and duration over the latest runs."""
        return JSONResponse(history_view(dag_id, load_history(dag_id, limit)).to_json())

    @app.get("/dags/{dag_id}/runs/{run_id:path}", dependencies=can_read, response_class=HTMLResponse)
    def run_html(request: Request, dag_id: str, run_id: str, task_id: str | None = None) -> HTMLResponse:
        return HTMLResponse(run_page(_run(dag_id, run_id), mounted_at(request), task_id=task_id))

    @app.get("/dags/{dag_id}/history", dependencies=can_read, response_class=HTMLResponse)
    def history_html(request: Request, dag_id: str, limit: Limit = DEFAULT_HISTORY_RUNS) -> HTMLResponse:
        view = history_view(dag_id, load_history(dag_id, limit))
        return HTMLResponse(history_page(view, mounted_at(request)))

    return app


def mounted_at(request: Request) -> str:
    """The path this app answers under, as the browser sees it: ``/airflow/finegrained`` when
    ``[api] base_url`` is ``http://host/airflow``, ``/finegrained`` without a path in it."""
    return str(request.scope.get("root_path", "")).rstrip("/")


class LazyApp:
    """An ASGI app that builds :func:`create_app` on its first request.

    Plugins are loaded by every Airflow process (workers too); only the api-server serves this app,
    so the others never import Airflow's API layer because of it.
    """

    def __init__(self) -> None:
        self._app: FastAPI | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            self._app = create_app()
        await self._app(scope, receive, send)
