"""Links under ``[api] base_url`` with a path: the tabs' hrefs and the path the pages link from."""

from __future__ import annotations

from urllib.parse import urljoin

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from airflow_provider_finegrained.ui.app import URL_PREFIX, mounted_at
from airflow_provider_finegrained.ui.plugin import HISTORY_TAB, RUN_TAB, TASK_TAB


@pytest.mark.parametrize(
    ("tab", "expected"),
    [
        (RUN_TAB, "/airflow/finegrained/dags/{DAG_ID}/runs/{RUN_ID}"),
        (TASK_TAB, "/airflow/finegrained/dags/{DAG_ID}/runs/{RUN_ID}?task_id={TASK_ID}"),
        (HISTORY_TAB, "/airflow/finegrained/dags/{DAG_ID}/history"),
    ],
)
@pytest.mark.parametrize("base_href", ["/", "/airflow/"])
def test_tab_href_resolves_under_the_ui_base(tab: dict[str, str], expected: str, base_href: str) -> None:
    # The UI's index.html has <base href="PATH OF base_url/">; the iframe resolves the href against it.
    assert urljoin(f"http://host{base_href}", tab["href"]) == "http://host" + expected.removeprefix(
        "/airflow" if base_href == "/" else ""
    )


def _served(root_path: str) -> TestClient:
    """A plugin-like app mounted at URL_PREFIX in a parent app built as the api-server builds its own."""
    plugin = FastAPI()

    @plugin.get("/where")
    def where(request: Request) -> str:
        return mounted_at(request)

    parent = FastAPI(root_path=root_path)
    parent.mount(URL_PREFIX, plugin)
    return TestClient(parent)


@pytest.mark.parametrize(
    ("root_path", "requested", "expected"),
    [
        ("", "/finegrained/where", "/finegrained"),
        ("/airflow", "/airflow/finegrained/where", "/airflow/finegrained"),
    ],
)
def test_pages_link_from_the_path_the_browser_sees(root_path: str, requested: str, expected: str) -> None:
    response = _served(root_path).get(requested)
    assert response.status_code == 200
    assert response.json() == expected
