"""Which settings hold secrets comes from their declarations: masked in logs, XCom, the UI and every repr.

The rule inside a value is still Airflow's sensitive names plus Spark's redaction pattern
(``secrets.is_secret_key``); which fields are looked into, and how, is each field's ``secret`` metadata.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Annotated, Any

import pytest

from airflow_provider_finegrained import secrets
from airflow_provider_finegrained.hooks import (
    airflow_connection,
    finegrained_spark,
    storage_connection,
    storage_options,
)
from airflow_provider_finegrained.settings import ConnectionSettings, SettingsModel, settable_fields, setting_of
from airflow_provider_finegrained.settings.coercion import spark_conf
from airflow_provider_finegrained.settings.field import json_object, string

pytestmark = pytest.mark.security

HOME = "/srv/airflow"
SECRET = "hunter2-s3cr3t"


class Probe(SettingsModel):
    """Settings declared for this test only: one per kind of secret, and one that holds none."""

    pin: Annotated[str | None, string("PIN", "A whole secret.", "1234", values="text", secret="value")] = None
    endpoint: Annotated[str | None, string("Endpoint", "A URL.", "http://h", values="URL", secret="url")] = None
    conf: Annotated[
        dict[str, str] | None,
        json_object("Conf", "Properties.", "{}", values="JSON", check=spark_conf, secret="keys"),
    ] = None
    label: Annotated[str | None, string("Label", "No secret.", "x", values="text")] = None


def test_a_field_declared_secret_is_masked_everywhere() -> None:
    probe = Probe(
        pin=SECRET,
        endpoint=f"http://ada:{SECRET}@host:8080/x?token=t0k3n-s3cr3t&page=2",
        conf={"spark.ssl.keyPassword": SECRET, "spark.app.name": "shown"},
        label="hunter2-is-not-declared",
    )
    assert sorted(probe.secret_values()) == sorted([SECRET, SECRET, "t0k3n-s3cr3t", SECRET])
    shown = probe.redacted()
    assert shown["pin"] == "***"
    assert shown["endpoint"] == "http://ada:***@host:8080/x?token=***&page=2"
    assert shown["conf"] == {"spark.app.name": "shown", "spark.ssl.keyPassword": "***"}
    assert shown["label"] == "hunter2-is-not-declared"  # not declared secret: shown as it is
    for text in (repr(probe), str(probe)):
        assert SECRET not in text and "t0k3n" not in text and "hunter2-is-not-declared" in text


def test_a_boolean_word_under_a_secret_key_is_not_registered_with_the_masker() -> None:
    probe = Probe(conf={"spark.hadoop.fs.s3a.authorization.enabled": "false", "spark.authenticate.secret": "x1"})
    assert probe.secret_values() == ["x1"]  # masking "false" would blank that word in every log
    assert probe.redacted()["conf"]["spark.hadoop.fs.s3a.authorization.enabled"] == "***"


# A value with a secret in it, for each connection field declared to hold one.
SECRET_BEARING: dict[str, Any] = {
    "spark_conf": {"spark.hadoop.fs.s3a.secret.key": SECRET},
    "master_webui_url": f"http://ada:{SECRET}@ui:8080",
    "yarn_resourcemanager_url": f"http://ada:{SECRET}@rm:8088",
    "history_server_url": f"http://ada:{SECRET}@history:18080",
    "storage_root": f"s3://AKIDEXAMPLE:{SECRET}@bucket/fg",
    "warm_pool": f"sc://pool:15002/;token={SECRET}",
}


def declared_secret() -> list[str]:
    return [name for name in settable_fields() if setting_of(name).secret is not None]


def test_the_connection_fields_declared_secret_are_the_ones_that_can_carry_one() -> None:
    # master is declared too (a URL), though no master form Spark accepts carries user info.
    assert set(declared_secret()) == {*SECRET_BEARING, "master"}


@pytest.mark.parametrize("name", sorted(SECRET_BEARING))
def test_each_connection_field_declared_secret_is_masked(name: str) -> None:
    settings = ConnectionSettings.from_connection_fields(
        "spark://127.0.0.1:7077", {"total_cores": 4, name: SECRET_BEARING[name]}, airflow_home=HOME
    )
    assert SECRET in settings.secret_values()  # the hook registers them with Airflow's masker
    assert SECRET not in str(settings.redacted())
    assert SECRET not in repr(settings) and SECRET not in repr(getattr(settings, concern_view(name)))


def concern_view(name: str) -> str:
    from airflow_provider_finegrained.settings import concern_of

    return {
        "ClusterSettings": "cluster",
        "StorageSettings": "storage",
        "WarmPoolSettings": "warm",
    }[concern_of(name).__name__]


def test_only_keys_and_whole_secrets_make_a_sensitive_config_option() -> None:
    # Airflow masks a sensitive option's whole value in every log: a storage root or warm_pool=off would vanish.
    assert [name for name in settable_fields() if setting_of(name).sensitive] == ["spark_conf"]


# -- no hand-kept list ----------------------------------------------------------------------------------


PACKAGE = Path(__file__).resolve().parents[2] / "airflow_provider_finegrained"
MASKING_MODULES = sorted(
    [
        *(PACKAGE / "settings").glob("*.py"),
        Path(secrets.__file__),
        Path(finegrained_spark.__file__),
        Path(airflow_connection.__file__),
        Path(storage_connection.__file__),
        Path(storage_options.__file__),
    ]
)


MASKING = re.compile(r"(?i)secret|redact|mask|repr|sensitive|url")


def masking_code(tree: ast.AST) -> list[ast.AST]:
    """The functions and module constants that decide what is masked (by their names)."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and MASKING.search(node.name):
            found.append(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and MASKING.search(t.id) for t in targets):
                found.append(node)
    return found


def listed_settings(path: Path) -> list[tuple[int, list[str]]]:
    """Literal tuples, lists, sets and dict keys naming two settings or more, in the code that masks: a
    hand-kept list of secret fields."""
    names = set(settable_fields())
    found = []
    for code in masking_code(ast.parse(path.read_text())):
        for node in ast.walk(code):
            items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
            if isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict) and items:
                listed = [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]
                if len(listed) >= 2:
                    found.append((node.lineno, listed))
    return found


@pytest.mark.parametrize("path", MASKING_MODULES, ids=lambda p: p.name)
def test_no_module_keeps_a_list_of_settings(path: Path) -> None:
    assert listed_settings(path) == [], f"{path.name}: name the property in the fields' declarations instead"


def test_the_list_finder_finds_a_list(tmp_path: Path) -> None:
    # What secrets.py held before the declarations said it (settings.py's _URL_FIELDS).
    sample = tmp_path / "old.py"
    sample.write_text('_URL_FIELDS = ("master", "storage_root", "warm_pool")\n')
    assert listed_settings(sample) == [(1, ["master", "storage_root", "warm_pool"])]
    sample.write_text('def secret_values(s):\n    return [getattr(s, n) for n in ("master", "warm_pool")]\n')
    assert listed_settings(sample) == [(2, ["master", "warm_pool"])]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param({"key": "AKID", "secret": SECRET, "token": "t0k"}, [SECRET, "t0k"], id="s3"),
        pytest.param(
            {"token": {"private_key": SECRET, "private_key_id": "k1", "client_email": "a@b"}},
            [SECRET, "k1"],
            id="gcs-keyfile",
        ),
        pytest.param({"token": "/keys/sa.json", "project": "p"}, ["/keys/sa.json"], id="gcs-key-path"),
        pytest.param({"client_kwargs": {"endpoint_url": "http://minio:9000", "region_name": "x"}}, [], id="no-secret"),
    ],
)
def test_storage_credentials_are_found_by_the_secret_rule(options: dict[str, Any], expected: list[str]) -> None:
    assert storage_options.secret_option_values(options) == expected
