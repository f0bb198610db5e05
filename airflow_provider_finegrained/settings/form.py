"""Provider-info entries of the ``finegrained_spark`` connection: its form fields and ``[finegrained]`` options.

Generated from the settings model: each field's :class:`~.setting.Setting` gives its label, description,
example, kind, choices, minimum and secrets, so nothing here names a setting. Declarative, as Airflow
3.2+ expects (``conn-fields`` as JSON schema, ``ui-field-behaviour``), so the UI builds the form without
importing the hook. No Airflow imports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from airflow_provider_finegrained.settings.build import field_default, settable_fields, setting_of
from airflow_provider_finegrained.settings.field import BYTES_PATTERN, Kind, Setting
from airflow_provider_finegrained.settings.resources import GiB, MiB

CONN_TYPE: Final = "finegrained_spark"
HOOK_CLASS: Final = "airflow_provider_finegrained.hooks.finegrained_spark.FineGrainedSparkHook"
HOOK_NAME: Final = "Fine-grained Spark"
CONFIG_SECTION: Final = "finegrained"
VERSION_ADDED: Final = "0.1.0"
_BYTES_PATTERN: Final = BYTES_PATTERN


@dataclass(frozen=True)
class FormField:
    """One setting as the UI shows it and as ``[finegrained]`` documents it (a view of its :class:`Setting`)."""

    name: str
    label: str
    description: str
    placeholder: str
    kind: Kind
    """integer, number, boolean, string, bytes, choice or object."""
    default: str
    """The effective default, in words (the form leaves it empty so ``[finegrained]`` still applies)."""
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    below: float | None = None
    sensitive: bool = False
    host_field: bool = False


def _default_text(name: str, spec: Setting) -> str:
    if spec.default_text is not None:
        return spec.default_text
    value = field_default(name)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if spec.kind == "bytes" and isinstance(value, int):
        for unit, size in (("g", GiB), ("m", MiB)):
            if value % size == 0:
                return f"{value // size}{unit}"
        return str(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _form_field(name: str) -> FormField:
    spec = setting_of(name)
    return FormField(
        name=name,
        label=spec.label,
        description=spec.description,
        placeholder=spec.example,
        kind=spec.kind,
        default=_default_text(name, spec),
        choices=spec.choices,
        minimum=spec.minimum,
        below=spec.below,
        sensitive=spec.sensitive,
        host_field=spec.host_field,
    )


FIELDS: Final[tuple[FormField, ...]] = tuple(_form_field(name) for name in settable_fields())
"""Every setting, in declaration order (grouped by concern)."""


def _schema(spec: FormField) -> dict[str, Any]:
    # No "default" in the schema: the form would store it into the extra and override [finegrained].
    json_type = {"bytes": "string", "choice": "string"}.get(spec.kind, spec.kind)
    schema: dict[str, Any] = {"type": [json_type, "null"]}
    if spec.choices:
        schema["enum"] = list(spec.choices)
    if spec.minimum is not None and spec.kind in ("integer", "number"):
        schema["minimum"] = spec.minimum
    if spec.below is not None:
        schema["exclusiveMaximum"] = spec.below
    if spec.kind == "bytes":
        schema["pattern"] = BYTES_PATTERN
    if json_type == "string" and not spec.choices:
        # The React form shows `examples` as suggestions; it has no placeholder for extra fields.
        schema["examples"] = [spec.placeholder]
    return schema


def connection_types() -> list[dict[str, Any]]:
    """The provider info's ``connection-types`` entry for ``finegrained_spark``."""
    extras = [f for f in FIELDS if not f.host_field]
    (host,) = (f for f in FIELDS if f.host_field)  # the master URL is the host field
    return [
        {
            "connection-type": CONN_TYPE,
            "hook-class-name": HOOK_CLASS,
            "hook-name": HOOK_NAME,
            "conn-fields": {
                f.name: {
                    "label": f.label,
                    "description": f"{f.description} Default: {f.default}.",
                    "schema": _schema(f),
                }
                for f in extras
            },
            "ui-field-behaviour": {
                "hidden-fields": ["login", "port", "schema", "extra"],
                "relabeling": {"host": host.label, "password": "Spark authentication secret"},
                "placeholders": {
                    "host": host.placeholder,
                    "password": "spark.authenticate.secret (standalone); leave empty if unused",
                    **{f.name: f.placeholder for f in extras},
                },
            },
        }
    ]


def config_section() -> dict[str, Any]:
    """The provider info's ``config`` entry: the ``[finegrained]`` section of installation-wide defaults."""
    config_types = {"integer": "integer", "number": "float", "boolean": "boolean"}
    return {
        CONFIG_SECTION: {
            "description": (
                "Installation-wide defaults of finegrained_spark connections (and of the embedded default "
                "when no connection is defined). A connection's own values override them; operator "
                "arguments override both. Options default to unset: the Default named in each description applies."
            ),
            "options": {
                f.name: {
                    "description": f"{f.description} Default: {f.default}.",
                    "version_added": VERSION_ADDED,
                    "type": config_types.get(f.kind, "string"),
                    "example": f.placeholder,
                    "default": None,
                    **({"sensitive": True} if f.sensitive else {}),
                }
                for f in FIELDS
            }
            | OPERATOR_OPTIONS,
        }
    }


OPERATOR_OPTIONS: dict[str, dict[str, Any]] = {
    "default_deferrable": {
        "description": (
            "Default of the stage operators' deferrable argument: in cluster deploy mode a region's leader "
            "defers while its application runs (no worker slot held). Unset: [operators] default_deferrable."
        ),
        "version_added": VERSION_ADDED,
        "type": "boolean",
        "example": "True",
        "default": None,
    }
}
"""Options of the ``[finegrained]`` section that are operator defaults, not connection fields."""
