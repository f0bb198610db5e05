"""What one connection setting declares: how the form shows it, how ``[finegrained]`` documents it, how it is
coerced, and whether (and how) its value holds secrets.

A :class:`Setting` is the metadata of one field of a settings model (``Annotated[int, integer(...)]``).
The connection form's JSON schema, the config options, the reference table of docs/connection.md, the
coercion of raw strings and the masking of secrets are all read from it, so a setting is declared in
exactly one place. Pure: no Airflow imports.
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, Literal, Union, get_args, get_origin

from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

from airflow_provider_finegrained.planning import format_bytes
from airflow_provider_finegrained.secrets import REDACTED, is_secret_key, redact_url, url_secrets
from airflow_provider_finegrained.settings import coercion
from airflow_provider_finegrained.settings.coercion import Coercer

Kind = Literal["integer", "number", "boolean", "string", "bytes", "choice", "object"]
"""How a value is written: JSON type of the form field, and the coercion family."""

Secret = Literal["value", "url", "keys"]
"""Where a setting's secrets are: its whole ``value``; inside a ``url`` (user-info password, secret parameters
such as ``;token=``); or the values of the secret ``keys`` of a mapping (Airflow's and Spark's rule,
:func:`~airflow_provider_finegrained.secrets.is_secret_key`)."""

_PLAIN_WORD: Final = re.compile(r"(?i)true|false|yes|no|on|off|none|null")

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
    secret: Secret | None = None
    """Where its value holds secrets (None: nowhere); they are masked in logs, XCom, the UI and reprs."""
    host_field: bool = False
    """Entered in the connection's host field rather than as an extra."""
    values: str = ""
    """The allowed values in words, for the reference table (empty: from the kind, choices and bounds)."""

    @property
    def sensitive(self) -> bool:
        """Whether the ``[finegrained]`` option is marked sensitive (``_CMD``/``_SECRET`` work, Airflow masks its
        whole value in every log): a whole secret or a mapping with secret keys. Not a URL: Airflow would then
        blank a storage root or ``warm_pool=off`` everywhere; the secrets inside a URL are masked one by one."""
        return self.secret in ("value", "keys")

    @property
    def allowed(self) -> str:
        """The allowed values in words (``integer >= 1``, ``'client' or 'cluster'``, ``byte size >= 450m``)."""
        if self.values:
            return self.values
        if self.kind == "choice":
            quoted = [f"'{c}'" for c in self.choices]
            return " or ".join(quoted) if len(quoted) == 2 else ", ".join(quoted)
        if self.kind == "integer":
            return f"integer >= {self.minimum:g}"
        if self.kind == "number":
            bound = f">= {self.minimum:g}" if self.below is None else f"in [{self.minimum:g}, {self.below:g})"
            return f"number {bound}"
        if self.kind == "bytes":
            if not self.minimum:
                return "byte size"
            return "byte size > 0" if self.minimum == 1 else f"byte size >= {_size(int(self.minimum))}"
        return self.kind

    def secret_values(self, value: object) -> list[str]:
        """The secrets in ``value`` (to register with a log masker). Never a boolean word: Airflow's sensitive names
        match broadly (``...authorization.enabled``, ``...proxy.ssl``), and masking ``false`` would blank that word
        in every log."""
        if self.secret == "value" and isinstance(value, str) and value:
            return [value]
        if self.secret == "url" and isinstance(value, str):
            return url_secrets(value)
        if self.secret == "keys" and isinstance(value, Mapping):
            found = (str(value[k]) for k in sorted(value) if is_secret_key(k) and value[k])
            return [v for v in found if _PLAIN_WORD.fullmatch(v.strip()) is None]
        return []

    def redact(self, value: Any) -> Any:
        """``value`` with its secrets replaced by ``***`` (a mapping becomes a sorted dict)."""
        if value is None or self.secret is None:
            return value
        if self.secret == "value":
            return REDACTED
        if self.secret == "url":
            return redact_url(value) if isinstance(value, str) else value
        return {k: REDACTED if is_secret_key(k) else v for k, v in sorted(value.items())}

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


def _size(count: int) -> str:
    """A byte count as Spark writes a size (``450m``) when it is a whole number of MiB."""
    return f"{count // 2**20}m" if count % 2**20 == 0 else format_bytes(count)


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
    return Setting(label, description, example, "bytes", coerce, default_text, minimum=minimum or None)


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
    values: str,
    check: Coercer = coercion.text,
    default_text: str | None = None,
    host_field: bool = False,
    secret: Secret | None = None,
) -> Setting:
    """Text checked by ``check`` (a path, a URL, a connection id...); ``values`` says what it allows."""
    return Setting(
        label, description, example, "string", check, default_text, host_field=host_field, secret=secret, values=values
    )


def json_object(
    label: str,
    description: str,
    example: str,
    *,
    values: str,
    check: Coercer,
    secret: Secret | None,
    default_text: str | None = None,
) -> Setting:
    """A JSON object (or its text); ``secret`` says whether some of its keys hold secrets."""
    return Setting(label, description, example, "object", check, default_text, secret=secret, values=values)
