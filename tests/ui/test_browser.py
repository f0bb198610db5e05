"""The plugin in a real api-server and a real browser: auth of its API, the tabs, pages and the form.

Runs the UI test DAG three times with growing input (real Spark), starts ``airflow api-server`` once
for the module and drives headless Chromium. Screenshots go to ``FINEGRAINED_SCREENSHOTS`` (docs/img
refreshes the docs) or a temporary folder.
"""

from __future__ import annotations

import json
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.settings.form import FIELDS
from tests.ui.conftest import BASE_PATH, Server, chromium
from tests.ui.dag_text import DAG_ID

pytestmark = pytest.mark.slow
STAGES = ["numbers", "squares"]


def _wait(driver: Any, condition: Any, timeout: float = 60) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def _by(kind: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


@pytest.mark.security
def test_api_answers_only_users_who_may_read_the_dag(sized_runs: list[str], api_server: Server) -> None:
    run_path = f"/finegrained/api/dags/{DAG_ID}/runs/{quote(sized_runs[-1], safe='')}"
    history_path = f"/finegrained/api/dags/{DAG_ID}/history"
    for path in (run_path, history_path):
        assert api_server.get(path)[0] == 401
        assert api_server.get(path, "not-a-jwt")[0] == 403
    outsider = api_server.token("outsider")
    # The outsider is a real viewer (Airflow's own API answers them) but may not read this DAG.
    assert api_server.get("/api/v2/dags", outsider)[0] == 200
    assert api_server.get(run_path, outsider) == (403, {"detail": "Forbidden"})
    assert api_server.get(history_path, outsider)[0] == 403
    admin = api_server.token("admin")
    assert api_server.get(f"/finegrained/api/dags/{DAG_ID}/runs/no-such-run", admin)[0] == 404

    status, body = api_server.get(run_path, admin)
    assert status == 200
    _, results = stage_results(DAG_ID, sized_runs[-1])
    assert [s["stage"] for s in body["stages"]] == STAGES
    for stage in body["stages"]:
        trace = results[stage["stage"]]["trace"]
        assert stage["decided_parallelism"] == trace["decided_parallelism"]
        assert stage["input_bytes"] == sum(trace["consumed_bytes"].values())
        assert stage["output_bytes"] == results[stage["stage"]]["output"]["total_bytes"]
    assert body["plan"] == results["squares"]["plan"]
    assert "spark_conf" not in str(body)

    status, history = api_server.get(history_path + "?limit=2", admin)
    assert status == 200 and history["runs"] == sized_runs[-2:]


def test_run_tab_in_the_dag_run_view(
    browser: Any, api_server: Server, sized_runs: list[str], screenshots: Path
) -> None:
    from selenium.webdriver.support import expected_conditions as ec

    run_id = sized_runs[-1]
    browser.get(f"{api_server.base}/dags/{DAG_ID}/runs/{quote(run_id, safe='')}")
    tab = _wait(browser, ec.element_to_be_clickable((_by("XPATH"), "//*[normalize-space(text())='Fine-grained plan']")))
    tab.click()
    frame = _wait(browser, ec.presence_of_element_located((_by("TAG_NAME"), "iframe")))
    assert frame.get_attribute("src").startswith(f"{api_server.base}/finegrained/dags/{DAG_ID}/runs/")
    assert browser.current_url.endswith("/plugin/finegrained-run")
    browser.switch_to.frame(frame)
    _wait(browser, ec.presence_of_element_located((_by("CSS_SELECTOR"), "table.stages")))
    assert browser.find_element(_by("TAG_NAME"), "h1").text == f"Fine-grained plan of {DAG_ID}"
    browser.switch_to.default_content()
    browser.save_screenshot(str(screenshots / "ui-run-tab.png"))

    # The page itself: the graph and a row per stage with what XCom says.
    browser.get(f"{api_server.base}/finegrained/dags/{DAG_ID}/runs/{quote(run_id, safe='')}")
    _, results = stage_results(DAG_ID, run_id)
    nodes = browser.find_elements(_by("CSS_SELECTOR"), "svg.plan-graph g.stage")
    assert sorted(n.get_attribute("data-stage") for n in nodes) == STAGES
    regions = [r.text for r in browser.find_elements(_by("CSS_SELECTOR"), "svg.plan-graph g.region text")]
    assert regions == [
        f"{results[s]['trace']['region']} · slot sharing group {results[s]['trace']['slot_sharing_group']}"
        for s in STAGES
    ]
    edge = browser.find_element(_by("CSS_SELECTOR"), "svg.plan-graph g.exchange")
    assert (edge.get_attribute("data-producer"), edge.get_attribute("data-consumer")) == ("numbers", "squares")
    assert edge.text == "blocking · all_to_all"
    rows = browser.find_elements(_by("CSS_SELECTOR"), "table.stages tbody tr")
    assert [r.get_attribute("data-stage") for r in rows] == STAGES
    for row in rows:
        trace = results[row.get_attribute("data-stage")]["trace"]
        decided = row.find_element(_by("CSS_SELECTOR"), "td.decided")
        assert decided.text.splitlines() == [str(trace["decided_parallelism"]), trace["rule"]]
        capacity = row.find_element(_by("CSS_SELECTOR"), ".capacity")
        assert capacity.text == trace["capacity"]["outcome"]
        assert capacity.get_attribute("title") == trace["capacity"]["message"]
        assert trace["application_id"] in row.text
    browser.save_screenshot(str(screenshots / "ui-run.png"))


def test_run_tab_in_the_task_instance_view(sized_runs: list[str], browser: Any, api_server: Server) -> None:
    from selenium.webdriver.support import expected_conditions as ec

    browser.get(f"{api_server.base}/dags/{DAG_ID}/runs/{quote(sized_runs[-1], safe='')}/tasks/squares")
    tab = _wait(browser, ec.element_to_be_clickable((_by("XPATH"), "//*[normalize-space(text())='Fine-grained plan']")))
    tab.click()
    frame = _wait(browser, ec.presence_of_element_located((_by("TAG_NAME"), "iframe")))
    assert frame.get_attribute("src").endswith("?task_id=squares")
    browser.switch_to.frame(frame)
    row = _wait(browser, ec.presence_of_element_located((_by("CSS_SELECTOR"), "tr[data-stage='squares']")))
    assert "fef9c3" in (row.get_attribute("style") or "") or "254, 249, 195" in (row.get_attribute("style") or "")
    browser.switch_to.default_content()


def test_history_page_has_a_point_per_run(
    sized_runs: list[str], browser: Any, api_server: Server, screenshots: Path
) -> None:
    browser.get(f"{api_server.base}/finegrained/dags/{DAG_ID}/history")
    sections = browser.find_elements(_by("CSS_SELECTOR"), "div.stage-plots")
    assert [s.get_attribute("data-stage") for s in sections] == STAGES
    squares = sections[1]
    plots = squares.find_elements(_by("CSS_SELECTOR"), "svg.plot")
    assert len(plots) == 2
    for plot in plots:
        tips = [c.get_attribute("textContent") for c in plot.find_elements(_by("CSS_SELECTOR"), "circle.point")]
        assert sorted(t.rsplit(": ", 1)[0] for t in tips) == sorted(sized_runs)
    # Decided parallelism follows the input: never smaller for a larger input, larger at the end.
    decided = [stage_results(DAG_ID, r)[1]["squares"]["trace"]["decided_parallelism"] for r in sized_runs]
    assert decided == sorted(decided) and decided[-1] > decided[0]
    tips = [c.get_attribute("textContent") for c in plots[0].find_elements(_by("CSS_SELECTOR"), "circle.point")]
    assert [t.rsplit("P=", 1)[1] for t in tips] == [str(p) for p in decided]
    labels = {t.text for t in squares.find_elements(_by("CSS_SELECTOR"), "svg.plot text")}
    assert {"input bytes (log scale)", "decided parallelism (tasks)", "duration (seconds)"} <= labels
    browser.save_screenshot(str(screenshots / "ui-history.png"))


def test_connection_form_shows_every_field(browser: Any, api_server: Server, screenshots: Path) -> None:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec

    browser.get(f"{api_server.base}/connections")
    add = _wait(browser, ec.element_to_be_clickable((_by("XPATH"), "//button[normalize-space(.)='Add Connection']")))
    add.click()
    kind = _wait(browser, ec.element_to_be_clickable((_by("CSS_SELECTOR"), "input[role='combobox']")))
    kind.send_keys("Fine-grained Spark")
    _wait(
        browser, ec.presence_of_element_located((_by("XPATH"), "//*[@role='option' and contains(., 'Fine-grained')]"))
    )
    kind.send_keys(Keys.ENTER)
    _wait(browser, ec.presence_of_element_located((_by("NAME"), "element_storage_root")))
    browser.find_element(_by("NAME"), "connection_id").send_keys("finegrained_spark_docs")
    host = browser.find_element(_by("NAME"), "host")
    assert host.get_attribute("placeholder") == next(f.placeholder for f in FIELDS if f.name == "master")
    browser.save_screenshot(str(screenshots / "ui-connection-form.png"))
    extra = browser.find_element(_by("XPATH"), "//button[contains(normalize-space(.), 'Extra Fields')]")
    browser.execute_script("arguments[0].scrollIntoView()", extra)
    extra.click()
    # The extra fields render bit by bit after the click (labels before descriptions): wait until every
    # field's label and the start of its description are on the page.
    extras = [f for f in FIELDS if f.name not in ("master", "spark_auth_secret")]
    expected = {f.name: (f.label, f.description.split(". ")[0].split(" (")[0][:40]) for f in extras}

    def missing() -> list[str]:
        text = browser.find_element(_by("TAG_NAME"), "body").text
        return [name for name, snippets in expected.items() if not all(s in text for s in snippets)]

    with suppress(TimeoutException):
        _wait(browser, lambda _driver: not missing())
    assert not missing(), f"fields without their label or description: {missing()}"
    suggested = []
    for field in extras:
        # The JSON editor of an object field carries the id, the other inputs the name.
        selector = f"[name='element_{field.name}'], #element_{field.name}"
        assert browser.find_elements(_by("CSS_SELECTOR"), selector), field.name
        # Airflow 3.3's form has no per-field placeholder for extras: a string field's examples become
        # suggestions under its generic "Start typing to see options"; other kinds show none at all.
        if field.kind in ("string", "bytes"):
            options = [
                o.get_attribute("value")
                for o in browser.find_elements(_by("CSS_SELECTOR"), f"datalist#list_{field.name} option")
            ]
            assert field.placeholder in options, (field.name, options)
            suggested.append(field.name)
    assert suggested
    browser.save_screenshot(str(screenshots / "ui-connection-form-extra.png"))


def test_tabs_and_links_under_a_base_url_path(sized_runs: list[str], prefixed_api_server: Server) -> None:
    """With ``[api] base_url = http://host:port/airflow`` every tab and link stays under ``/airflow``."""
    from contextlib import contextmanager

    from selenium.webdriver.support import expected_conditions as ec

    server = prefixed_api_server
    assert server.base.endswith(BASE_PATH)
    mounted = f"{server.base}/finegrained"
    run_id = quote(sized_runs[-1], safe="")
    assert server.get(f"/finegrained/api/dags/{DAG_ID}/history", server.token("admin"))[0] == 200
    with contextmanager(chromium)(server) as driver:
        # The DAG run's tab: its iframe opens the run page under the prefix.
        driver.get(f"{server.base}/dags/{DAG_ID}/runs/{run_id}")
        tab = _wait(
            driver, ec.element_to_be_clickable((_by("XPATH"), "//*[normalize-space(text())='Fine-grained plan']"))
        )
        tab.click()
        frame = _wait(driver, ec.presence_of_element_located((_by("TAG_NAME"), "iframe")))
        assert frame.get_attribute("src") == f"{mounted}/dags/{DAG_ID}/runs/{run_id}"
        driver.switch_to.frame(frame)
        _wait(driver, ec.presence_of_element_located((_by("CSS_SELECTOR"), "table.stages")))
        json_link = driver.find_element(_by("LINK_TEXT"), "JSON")
        assert json_link.get_attribute("href") == f"{mounted}/api/dags/{DAG_ID}/runs/{run_id}"
        # Follow the page's link to the history: it loads, under the prefix.
        driver.find_element(_by("LINK_TEXT"), "sizing over past runs").click()
        sections = _wait(driver, ec.presence_of_all_elements_located((_by("CSS_SELECTOR"), "div.stage-plots")))
        assert [s.get_attribute("data-stage") for s in sections] == STAGES
        assert driver.execute_script("return location.href") == f"{mounted}/dags/{DAG_ID}/history"
        # And from there the JSON of the history (the browser sends the login cookie).
        driver.find_element(_by("LINK_TEXT"), "JSON").click()
        body = _wait(driver, ec.presence_of_element_located((_by("TAG_NAME"), "pre")))
        assert json.loads(body.text)["runs"][-len(sized_runs) :] == sized_runs
        assert driver.execute_script("return location.href") == f"{mounted}/api/dags/{DAG_ID}/history"
        driver.switch_to.default_content()

        # The DAG's tab: the history page, under the prefix.
        driver.get(f"{server.base}/dags/{DAG_ID}")
        tab = _wait(
            driver, ec.element_to_be_clickable((_by("XPATH"), "//*[normalize-space(text())='Fine-grained sizing']"))
        )
        tab.click()
        frame = _wait(driver, ec.presence_of_element_located((_by("TAG_NAME"), "iframe")))
        assert frame.get_attribute("src") == f"{mounted}/dags/{DAG_ID}/history"
        driver.switch_to.frame(frame)
        sections = _wait(driver, ec.presence_of_all_elements_located((_by("CSS_SELECTOR"), "div.stage-plots")))
        assert [s.get_attribute("data-stage") for s in sections] == STAGES
