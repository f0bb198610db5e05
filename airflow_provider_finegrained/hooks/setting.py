"""What one connection setting declares: how the form shows it, how ``[finegrained]`` documents it, how it is coerced.

A :class:`Setting` is the metadata of one field of the settings model (``Annotated[int, integer(...)]``).
The connection form's JSON schema, the config options and the coercion of raw strings are all read
from it, so a setting is declared in exactly one place. Pure: no Airflow imports.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, Literal, Union, get_args, get_origin

from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

from airflow_provider_finegrained.hooks import coercion
from airflow_provider_finegrained.hooks.coercion import Coercer

Kind = Literal["integer", "number", "boolean", "string", "bytes", "choice", "object"]
"""How a value is written: JSON type of the form field, and the coercion family."""

# Must match parse_bytes: a byte count or a size with a binary unit, as Spark writes them.
BYTES_PATTERN: Final = r"^\s*(\d+(\.\d+)?|\.\d+)\s*([kKmMgGtTpP]?)([iI]?[bB])?\s*$"


@dataclass(frozen=True)
class Setting:
    """The declaration of one setting, as metadata of its model field."""

    label: str
    """The form field's label."""
    description: str
    """One or two sentences for the form and the config docs (no angle brackets: the form renders HTML)."""
    example: str
    """A valid value, shown as the form's placeholder and the config option's example."""
    kind: Kind
    coerce: Coercer = field(repr=False, compare=False)
    default_text: str | None = None
    """The effective default in words; None renders the field's default value."""
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    below: float | None = None
    """Exclusive maximum of a number."""
    sensitive: bool = False
    """Its value may hold secrets (the config option is marked sensitive: ``_CMD``/``_SECRET`` work)."""
    host_field: bool = False
    """Entered in the connection's host field rather than as an extra."""

    def parse(self, where: str, raw: object) -> Any:
        """The typed value of ``raw``; :class:`~.coercion.ConnectionSettingsError` naming ``where`` otherwise."""
        return self.coerce(where, raw)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # The coercer replaces pydantic's own validation, so messages and accepted strings are ours.
        nullable = _allows_none(source)

        def validate(raw: object, info: core_schema.ValidationInfo) -> Any:
            if raw is None and nullable:
                return None
            return self.parse(info.field_name or "value", raw)

        return core_schema.with_info_plain_validator_function(validate)


def _allows_none(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)


def integer(label: str, description: str, example: str, *, minimum: int, default_text: str | None = None) -> Setting:
    """A whole number ``>= minimum`` (``"8"`` from the CLI becomes 8)."""
    coerce = partial(coercion.integer, minimum=minimum)
    return Setting(label, description, example, "integer", coerce, default_text, minimum=minimum)


def number(
    label: str,
    description: str,
    example: str,
    *,
    minimum: float,
    below: float | None = None,
    default_text: str | None = None,
) -> Setting:
    """A finite number in ``[minimum, below)``."""
    coerce = partial(coercion.number, minimum=minimum, below=below)
    return Setting(label, description, example, "number", coerce, default_text, minimum=minimum, below=below)


def boolean(label: str, description: str, example: str, *, default_text: str | None = None) -> Setting:
    """true/false, also yes/no, on/off, 1/0."""
    return Setting(label, description, example, "boolean", coercion.boolean, default_text)


def byte_size(
    label: str, description: str, example: str, *, minimum: int = 0, why: str = "", default_text: str | None = None
) -> Setting:
    """Bytes, as a count or a size with Spark's binary units (``512m``, ``2g``, ``1.5GiB``)."""
    coerce = partial(coercion.byte_size, minimum=minimum, why=why)
    return Setting(label, description, example, "bytes", coerce, default_text)


def choice(
    label: str, description: str, example: str, *, choices: Sequence[str], default_text: str | None = None
) -> Setting:
    """One of ``choices``, case-insensitive."""
    options = tuple(choices)
    coerce = partial(coercion.choice, choices=options)
    return Setting(label, description, example, "choice", coerce, default_text, choices=options)


def string(
    label: str,
    description: str,
    example: str,
    *,
    check: Coercer = coercion.text,
    default_text: str | None = None,
    host_field: bool = False,
    sensitive: bool = False,
) -> Setting:
    """Text checked by ``check`` (a path, a URL, a connection id...)."""
    return Setting(
        label, description, example, "string", check, default_text, host_field=host_field, sensitive=sensitive
    )


def json_object(
    label: str, description: str, example: str, *, check: Coercer, sensitive: bool, default_text: str | None = None
) -> Setting:
    """A JSON object (or its text)."""
    return Setting(label, description, example, "object", check, default_text, sensitive=sensitive)
