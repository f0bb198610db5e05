"""The base of every settings config: frozen, strict about names, and masking its secrets by declaration.

A config is a pydantic model whose every field carries a :class:`~.field.Setting` as metadata. Which
fields hold secrets, and where in their value, is read from that metadata (``Setting.secret``): the log
masker's values (:meth:`SettingsModel.secret_values`), the redacted view for logs, XCom and the UI
(:meth:`SettingsModel.redacted`) and every repr follow the declarations, with no list of names kept
anywhere else. Pure: no Airflow or Spark imports.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from airflow_provider_finegrained.settings.coercion import ConnectionSettingsError
from airflow_provider_finegrained.settings.field import Setting


class SettingsModel(BaseModel):
    """Frozen and strict about names; a bad value raises :class:`ConnectionSettingsError` with every problem."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    CONCERN: ClassVar[str] = ""
    """The concern's name: the attribute of ``ConnectionSettings`` that hands it out."""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConnectionSettingsError(_problems(type(self), exc)) from None

    @classmethod
    def of(cls, source: SettingsModel) -> Self:
        """This concern of ``source`` (settings that compose it): a config holding only its own fields."""
        if type(source) is cls:
            return source
        # The values were validated when ``source`` was made; the cross-field rules hold for them.
        return cls.model_construct(**{name: getattr(source, name) for name in cls.model_fields})

    @classmethod
    def declaration(cls, name: str) -> Setting:
        """The declaration (label, description, kind, coercion, secrets...) of the field ``name``."""
        return setting_in(cls, name)

    def secret_values(self) -> list[str]:
        """Values to register with a log masker: the secrets of every field declared to hold some."""
        values: list[str] = []
        for name in type(self).model_fields:
            values.extend(self.declaration(name).secret_values(getattr(self, name)))
        return values

    def redacted(self) -> dict[str, Any]:
        """A JSON-safe dict of the fields, secrets replaced by ``***`` as declared (for logs, XCom, the UI)."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = self.declaration(name).redact(getattr(self, name))
            out[name] = dict(value) if isinstance(value, dict) else value
        return out

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # Every rendering pydantic offers (repr, str, rich, devtools) goes through here: show no secret.
        for name in type(self).model_fields:
            yield name, self.declaration(name).redact(getattr(self, name))


def _problems(model: type[BaseModel], error: ValidationError) -> list[str]:
    """One message per problem pydantic collected: ours as raised, its own (missing, unknown) reworded."""
    problems: list[str] = []
    for item in error.errors(include_url=False):
        cause = item.get("ctx", {}).get("error")
        name = ".".join(str(part) for part in item["loc"])
        if isinstance(cause, ConnectionSettingsError):
            problems.extend(cause.problems)
        elif item["type"] == "missing":
            problems.append(f"{name}: required; allowed: {setting_in(model, name).description}")
        elif item["type"] == "extra_forbidden":
            problems.append(f"{name}: unknown setting; known: {', '.join(model.model_fields)}")
        else:  # not expected: every field validates with our coercers
            problems.append(f"{name or model.__name__}: {item['msg']}")
    return problems


def setting_in(model: type[BaseModel], name: str) -> Setting:
    """The declaration (label, description, kind, coercion...) of the field ``name`` of ``model``."""
    for item in model.model_fields[name].metadata:
        if isinstance(item, Setting):
            return item
    raise LookupError(f"{name}: declared without a Setting")  # a field added without metadata: a code bug
