"""The provider-info entries: the connection form and the [finegrained] section, checked against Airflow's schemas."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import airflow
import jsonschema
import pytest

from airflow_provider_finegrained.planning import parse_bytes
from airflow_provider_finegrained.settings import ConnectionSettings, settable_fields, setting_of
from airflow_provider_finegrained.settings.form import (
    FIELDS,
    OPERATOR_OPTIONS,
    config_section,
    connection_types,
)

AIRFLOW_DIR = Path(airflow.__file__).parent
EXTRA_FIELDS = [name for name in settable_fields() if name != "master"]  # the master URL is the host field


@pytest.fixture(scope="module")
def entry() -> dict[str, Any]:
    entries = connection_types()
    assert len(entries) == 1
    return entries[0]


def test_connection_type_and_hook(entry: dict[str, Any]) -> None:
    assert entry["connection-type"] == "finegrained_spark"
    assert entry["hook-class-name"] == "airflow_provider_finegrained.hooks.finegrained_spark.FineGrainedSparkHook"
    assert entry["hook-name"] == "Fine-grained Spark"


def test_entry_validates_against_airflows_provider_schema(entry: dict[str, Any]) -> None:
    schema = json.loads((AIRFLOW_DIR / "provider.yaml.schema.json").read_text())
    jsonschema.validate(entry, schema["properties"]["connection-types"]["items"])


def test_field_behaviour_validates_as_airflow_converts_it(entry: dict[str, Any]) -> None:
    # ProvidersManager turns the kebab-case keys into these before validating.
    behaviour = entry["ui-field-behaviour"]
    converted = {
        "hidden_fields": behaviour["hidden-fields"],
        "relabeling": behaviour["relabeling"],
        "placeholders": behaviour["placeholders"],
    }
    schema = json.loads((AIRFLOW_DIR / "customized_form_field_behaviours.schema.json").read_text())
    jsonschema.validate(converted, schema)


def test_every_settable_extra_has_label_description_and_placeholder(entry: dict[str, Any]) -> None:
    fields = entry["conn-fields"]
    placeholders = entry["ui-field-behaviour"]["placeholders"]
    assert sorted(fields) == sorted(EXTRA_FIELDS)
    for name in EXTRA_FIELDS:
        assert fields[name]["label"].strip(), name
        assert fields[name]["description"].strip().endswith("."), name
        assert "Default: " in fields[name]["description"], name
        assert placeholders[name].strip(), name
        assert "null" in fields[name]["schema"]["type"], f"{name} must be optional in the form"
        # A schema default would be saved into the extra and silently override [finegrained].
        assert "default" not in fields[name]["schema"], name


def test_standard_fields(entry: dict[str, Any]) -> None:
    behaviour = entry["ui-field-behaviour"]
    assert set(behaviour["hidden-fields"]) == {"login", "port", "schema", "extra"}
    assert behaviour["relabeling"]["host"] == "Spark master URL"
    assert behaviour["placeholders"]["host"] == "local[*] or spark://127.0.0.1:7077"
    assert "password" not in behaviour["hidden-fields"]  # it carries spark.authenticate.secret


@pytest.mark.parametrize("spec", [f for f in FIELDS if f.name != "master"], ids=lambda f: f.name)
def test_every_placeholder_is_a_valid_value(spec: Any) -> None:
    # What the form suggests must pass the coercion it will meet.
    value: Any = json.loads(spec.placeholder) if spec.kind == "object" else spec.placeholder
    settings = ConnectionSettings.from_connection_fields(
        "spark://127.0.0.1:7077", {"total_cores": 64, spec.name: value}, airflow_home="/srv/airflow"
    )
    assert getattr(settings, spec.name) is not None


@pytest.mark.parametrize(("spec"), [f for f in FIELDS if f.kind == "bytes"], ids=lambda f: f.name)
def test_byte_size_pattern_accepts_what_parse_bytes_accepts(spec: Any) -> None:
    pattern = re.compile(connection_types()[0]["conn-fields"][spec.name]["schema"]["pattern"])
    for good in ("2g", "512m", "1.5GiB", "2147483648", " 4 G ", "64MB"):
        parse_bytes(good)
        assert pattern.search(good), good
    for bad in ("lots", "-1g", "2 gigs", "1e9"):
        with pytest.raises(ValueError):
            parse_bytes(bad)
        assert not pattern.search(bad), bad


def test_choice_fields_are_enums(entry: dict[str, Any]) -> None:
    fields = entry["conn-fields"]
    assert fields["deploy_mode"]["schema"]["enum"] == ["client", "cluster"]
    assert fields["normalize"]["schema"]["enum"] == ["none", "power_of_two"]
    assert fields["adaptive_query_execution"]["schema"]["type"] == ["boolean", "null"]
    assert fields["spark_conf"]["schema"]["type"] == ["object", "null"]
    assert fields["max_parallelism"]["schema"] == {"type": ["integer", "null"], "minimum": 1}


def test_config_section_validates_against_airflows_provider_info_schema() -> None:
    schema = json.loads((AIRFLOW_DIR / "provider_info.schema.json").read_text())
    config_schema = {**schema["properties"]["config"], "definitions": schema["definitions"]}
    section = config_section()
    jsonschema.validate(section, config_schema)
    options = section["finegrained"]["options"]
    assert sorted(options) == sorted([*settable_fields(), *OPERATOR_OPTIONS])
    assert options["default_deferrable"]["type"] == "boolean"
    for name, option in options.items():
        # Unset by default, so that only what an administrator sets reaches the connection defaults.
        assert option["default"] is None, name
        assert option["description"] and option["example"] and option["version_added"] == "0.1.0", name
    assert options["max_parallelism"]["type"] == "integer"
    assert options["max_broadcast_ratio"]["type"] == "float"
    assert options["adaptive_query_execution"]["type"] == "boolean"
    assert options["executor_memory"]["type"] == "string"
    assert options["spark_conf"]["sensitive"] is True


def test_config_examples_are_valid_defaults() -> None:
    options = config_section()["finegrained"]["options"]
    defaults = {name: option["example"] for name, option in options.items() if name not in OPERATOR_OPTIONS}
    # Examples are strings as airflow.cfg holds them; local master and min/max examples must agree.
    defaults.update(master="spark://127.0.0.1:7077", total_cores="64", min_slots="4", max_slots="32")
    defaults.pop("deploy_mode")
    settings = ConnectionSettings.from_connection_fields(None, {}, defaults=defaults, airflow_home="/srv/airflow")
    assert settings.max_parallelism == 128 and settings.executor_memory == 4 * 2**30


def test_no_field_text_holds_angle_brackets() -> None:
    # The connection form renders descriptions as HTML: "<master host>" swallowed every later field.
    for f in FIELDS:
        for text in (f.label, f.description, f.placeholder, f.default):
            assert "<" not in text and ">" not in text, (f.name, text)


def test_form_and_config_come_from_the_settings_declarations(entry: dict[str, Any]) -> None:
    # One declaration per setting: the form's label/description/example and the config option are its metadata.
    options = config_section()["finegrained"]["options"]
    for name in EXTRA_FIELDS:
        spec = setting_of(name)
        field = entry["conn-fields"][name]
        assert field["label"] == spec.label, name
        assert field["description"].startswith(spec.description), name
        assert entry["ui-field-behaviour"]["placeholders"][name] == spec.example, name
        assert options[name]["description"] == field["description"], name
        assert options[name]["example"] == spec.example, name
        assert options[name].get("sensitive", False) is spec.sensitive, name
    assert [f.name for f in FIELDS] == list(settable_fields())
    assert [f.name for f in FIELDS if f.host_field] == ["master"]


def test_storage_conn_id_is_in_the_form_and_the_config(entry: dict[str, Any]) -> None:
    field = entry["conn-fields"]["storage_conn_id"]
    assert field["label"] == "Storage connection id"
    assert "ObjectStoragePath(conn_id=...)" in field["description"]
    assert field["description"].endswith("Default: none.")
    assert field["schema"] == {"type": ["string", "null"], "examples": ["aws_default"]}
    assert config_section()["finegrained"]["options"]["storage_conn_id"]["type"] == "string"


def test_only_spark_conf_is_a_sensitive_option() -> None:
    # Airflow masks a sensitive option's whole value everywhere: warm_pool=off or a storage root would vanish
    # from every log (and 'off' is too short to mask: the CLI printed a warning into JSON output).
    options = config_section()["finegrained"]["options"]
    assert [name for name, option in options.items() if option.get("sensitive")] == ["spark_conf"]


@pytest.mark.parametrize(
    ("name", "default"),
    [
        ("max_parallelism", "128"),
        ("avg_bytes_per_task", "64m"),
        ("driver_memory", "2g"),
        ("max_broadcast_ratio", "0.5"),
        ("capacity_wait_timeout", "3600"),
        ("adaptive_query_execution", "true"),
        ("normalize", "none"),
        ("history_server_url", "none"),
        ("executor_memory", "2g (M MiB for local-cluster[N,C,M])"),
    ],
)
def test_defaults_in_words_come_from_the_model(name: str, default: str) -> None:
    assert next(f for f in FIELDS if f.name == name).default == default
