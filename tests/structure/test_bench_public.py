"""bench/ uses only the provider's public names: the names a package's ``__init__`` lists in ``__all__``, and the
documented entry points (the modules DAG authors import). ``lint-imports`` checks the modules (pyproject.toml's
``bench-public`` contract); this test keeps that contract's list equal to the tree's and checks the names."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator, Mapping, Set
from pathlib import Path
from typing import Any

import pytest

import airflow_provider_finegrained
from tests.conftest import REPO

PACKAGE = Path(airflow_provider_finegrained.__file__).parent
NAME = PACKAGE.name
CONTRACT = "bench-public"

ENTRY_POINTS = (
    "dags.declaration",
    "decorators.spark_stage",
    "operators.declared_stage",
    "operators.spark_stage",
    "operators.warm_pool",
    "runtime.api",
)
"""The documented entry points that are modules, not packages with ``__all__`` (docs/operators.md, docs/warm.md):
any name of theirs that does not start with ``_`` is public."""


def declared_all(init: Path) -> list[str] | None:
    """The names an ``__init__.py`` lists in ``__all__``; None when it has none."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [str(name) for name in ast.literal_eval(node.value)]
    return None


def public_modules(package: Path = PACKAGE) -> dict[str, frozenset[str] | None]:
    """Each public module of the provider and its public names (None: every name not starting with ``_``)."""
    public: dict[str, frozenset[str] | None] = {package.name: frozenset({"__version__"})}
    for init in sorted(package.rglob("__init__.py")):
        names = declared_all(init)
        if names is not None:
            public[".".join(init.parent.relative_to(package.parent).parts)] = frozenset(names)
    for entry in ENTRY_POINTS:
        public[f"{package.name}.{entry}"] = None
    return public


def contract() -> dict[str, Any]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    found: dict[str, Any] = next(c for c in config["contracts"] if c.get("id") == CONTRACT)
    return found


def being_removed() -> set[tuple[str, str]]:
    """The contract's exceptions that are not public modules: (importer, imported), each being removed."""
    public = public_modules()
    pairs = [line.split(" -> ") for line in contract()["ignore_imports"]]
    return {(importer, imported) for importer, imported in pairs if imported not in public}


def is_module(dotted: str, package: Path = PACKAGE) -> bool:
    path = package.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports(root: Path) -> Iterator[tuple[str, int, str, str | None]]:
    """(importer, line, provider module, name or None) for every import of the provider under ``root`` (bench/)."""
    for path in sorted(root.rglob("*.py")):
        importer = ".".join(path.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                yield from ((importer, node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == NAME)
            elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == NAME:
                yield from ((importer, node.lineno, str(node.module), a.name) for a in node.names)


def violations(
    root: Path, public: Mapping[str, frozenset[str] | None], allowed: Set[tuple[str, str]] = frozenset()
) -> list[str]:
    """Every import under ``root`` of a provider module or name that is not public (``allowed``: exceptions)."""
    found = []
    for importer, line, module, name in imports(root):
        if name is not None and is_module(f"{module}.{name}"):
            module, name = f"{module}.{name}", None  # `from package import module`
        if (importer, module) in allowed:
            continue
        if module not in public:
            found.append(f"{importer}:{line} imports the private module {module}")
            continue
        names = public[module]
        if name is not None and name != "*" and (name.startswith("_") if names is None else name not in names):
            found.append(f"{importer}:{line} imports {name} from {module}, not one of its public names")
    return found


def test_the_contract_lets_bench_import_exactly_the_public_modules() -> None:
    public = public_modules()
    public_lines = {line for line in contract()["ignore_imports"] if line.split(" -> ")[1] in public}
    assert public_lines == {f"bench.** -> {module}" for module in public}
    assert contract()["source_modules"] == ["bench"] and contract()["forbidden_modules"] == [NAME]


def test_bench_imports_only_public_names() -> None:
    assert violations(REPO / "bench", public_modules(), being_removed()) == []


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("from airflow_provider_finegrained.planning import plan_stages", None),
        ("from airflow_provider_finegrained import warm", None),
        ("from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator", None),
        ("from airflow_provider_finegrained.warm.state import pool_processes", "private module"),
        ("import airflow_provider_finegrained.spark.submit", "private module"),
        ("from airflow_provider_finegrained import contract", "private module"),
        ("from airflow_provider_finegrained.planning import scan_packing", "private module"),
        ("from airflow_provider_finegrained.planning import decide_adaptive", "not one of its public names"),
        ("from airflow_provider_finegrained.dags.declaration import _stage_id", "not one of its public names"),
    ],
)
def test_a_planted_import_of_a_private_name_is_found(tmp_path: Path, line: str, found: str | None) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "planted.py").write_text(f"{line}  # planted by tests/structure/test_bench_public.py\n")
    result = violations(tmp_path / "bench", public_modules())
    assert (found is None and result == []) or (len(result) == 1 and found is not None and found in result[0])
