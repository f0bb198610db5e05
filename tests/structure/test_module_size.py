"""Modules small enough to read at one sitting: none of the package over 400 lines, no function over 80."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import airflow_provider_finegrained

PACKAGE = Path(airflow_provider_finegrained.__file__).parent
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def long_modules(package: Path, limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    found = {}
    for path in sorted(package.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > limit:
            found[str(path.relative_to(package.parent))] = lines
    return found


def long_functions(package: Path, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    found = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    found[f"{path.relative_to(package.parent)}::{node.name}"] = lines
    return found


def test_no_module_is_over_400_lines() -> None:
    assert long_modules(PACKAGE) == {}


def test_no_function_is_over_80_lines() -> None:
    assert long_functions(PACKAGE) == {}


@pytest.mark.parametrize(("lines", "too_long"), [(400, False), (401, True)])
def test_the_checks_see_what_is_too_long(tmp_path: Path, lines: int, too_long: bool) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(lines - 1))
    (package / "mod.py").write_text(f"def f() -> None:\n{body}\n")
    assert bool(long_modules(package)) is too_long
    assert long_functions(package, limit=lines - 1) == {"pkg/mod.py::f": lines}
    assert long_functions(package, limit=lines) == {}
