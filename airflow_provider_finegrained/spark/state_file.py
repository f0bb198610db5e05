"""The state file a loopback cluster leaves in its work directory (``cluster.json``, ``hadoop.json``), so that
another process can find and stop what was started."""

from __future__ import annotations

import json
import os
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


def write_state(path: str, state: dict[str, Any]) -> None:
    """Write ``state`` as JSON at ``path``; readers never see a half-written file."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=2)
    os.replace(temporary, path)


def read_state(cls: type[T], path: str, missing: FileNotFoundError) -> T:
    """The dataclass ``cls`` recorded at ``path`` (lists become tuples; unknown keys are ignored); ``missing``
    is raised when there is no file, ValueError when it does not hold a ``cls``."""
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except FileNotFoundError:
        raise missing from None
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in state.items() if k in names}
    try:
        return cls(**values)
    except TypeError as exc:
        raise ValueError(f"{path} is not a {cls.__name__} state file: {exc}") from exc
