"""Airflow's operator-init convention for every operator of this provider: templated fields are
assigned unchanged in ``__init__`` and no logic in ``__init__`` reads them.

Templated fields are rendered after the constructor runs, so a constructor that transforms or
validates one acts on the un-rendered Jinja string (``list("{{ params.x }}")``) and the rendered value
never gets the treatment. Airflow enforces this in its own repository with the pre-commit script
``scripts/ci/prek/validate_operators_init.py``, which is not shipped in any distribution, so it
cannot be imported: this module applies the same rule with its own AST walk, with two differences,
both towards checking more:

- operator classes are found by importing every module of the package and taking each subclass of
  ``airflow.sdk.BaseOperator`` defined in it (Airflow's script goes by the base class's name ending in
  ``BaseOperator``, so e.g. a decorated operator escapes it);
- a template field that a parent class also declares, and that this ``__init__`` does not take as a
  parameter but forwards through ``super().__init__(**kwargs)``, counts as assigned: the parent is
  checked in its own right (Airflow's script leaves inheritance as a TODO and reports it missing).

Known violations are listed in :data:`KNOWN_VIOLATIONS` with their fix, as Airflow keeps its
exemption list: a new violation fails, and so does an entry whose violation is gone (remove it).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

import airflow_provider_finegrained


@dataclass(frozen=True, order=True)
class Finding:
    """``kind``: ``missing`` (never assigned), ``changed`` (assigned other than unchanged) or ``logic``
    (read by constructor logic); ``line`` is the line in the class's source, for the message."""

    operator: str
    kind: str
    field: str
    line: int = 0

    @property
    def key(self) -> tuple[str, str, str]:
        return self.operator, self.kind, self.field


# (operator, kind, field) -> the fix. Each is a violation of the rule in code this module does not own.
KNOWN_VIOLATIONS: dict[tuple[str, str, str], str] = {
    ("SparkStageOperator", "logic", "output_path"): (
        "by design: output_asset=True makes the asset (an outlet, fixed when the DAG is parsed) from the "
        "unrendered output_path, and refuses a templated one (operators/assets.py); nothing is rendered"
    ),
    ("SparkStageOperator", "missing", "external_inputs"): (
        "declare_stage() sets it from inputs; assign self.external_inputs in __init__ (or drop it from "
        "template_fields and render the external inputs explicitly in execute())"
    ),
    ("_SparkStageDecoratedOperator", "changed", "op_kwargs"): (
        "the decorator splits op_kwargs into stage inputs and constants at parse time (by design, as "
        "Airflow's DecoratedOperator does): keep op_kwargs out of this class's template_fields, or pass "
        "op_kwargs=op_kwargs and split in execute()"
    ),
    ("_SparkStageDecoratedOperator", "logic", "op_kwargs"): "as above: the split reads op_kwargs",
}


def operator_classes() -> list[type]:
    """Every operator class defined in the package, found by importing all its modules."""
    from airflow.sdk import BaseOperator

    package = airflow_provider_finegrained
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if info.name.endswith(".__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseOperator)
                and value.__module__.startswith(package.__name__ + ".")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[k] for k in sorted(found)]


def check_operator(cls: type) -> list[Finding]:
    """The findings of the rule for ``cls``'s own ``__init__`` and own ``template_fields``."""
    if "__init__" not in vars(cls) or "template_fields" not in vars(cls):
        return []
    inherited = {f for parent in cls.__mro__[1:] for f in getattr(parent, "template_fields", ())}
    return check_source(textwrap.dedent(inspect.getsource(cls)), list(vars(cls)["template_fields"]), inherited)


def check_source(source: str, fields: list[str], inherited: set[str] | frozenset[str] = frozenset()) -> list[Finding]:
    """The rule on the first class in ``source`` with the template ``fields`` given; ``inherited``: the
    fields its parents declare (and assign, which their own check sees to)."""
    node = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef))
    ctor = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    if ctor is None or not fields:
        return []
    return sorted({*_assignments(node.name, ctor, fields, inherited), *_logic(node.name, ctor, fields)})


def _self_field(target: ast.expr) -> str | None:
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return target.attr
    return None


def _kept(value: ast.expr | None, field: str) -> ast.Name | None:
    """The parameter read if ``value`` keeps ``field`` unchanged: ``field``, ``field or default``,
    ``field if field [is not None] else default``; None otherwise."""
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or):
        value = value.values[0]
    elif isinstance(value, ast.IfExp) and _tests_only(value.test, field):
        value = value.body
    return value if isinstance(value, ast.Name) and value.id == field else None


def _tests_only(test: ast.expr, field: str) -> bool:
    return (isinstance(test, ast.Name) and test.id == field) or (
        _is_none_check(test) and isinstance(test, ast.Compare) and _name(test.left) == field
    )


def _name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _is_none_check(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.Is | ast.IsNot)
        and isinstance(node.comparators[0], ast.Constant)
        and node.comparators[0].value is None
    )


def _super_init(node: ast.AST) -> ast.Call | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "__init__"
        and isinstance(node.func.value, ast.Call)
        and _name(node.func.value.func) == "super"
    ):
        return node
    return None


def _pairs(statement: ast.stmt) -> Iterator[tuple[ast.expr, ast.expr | None]]:
    """(target, value) of an assignment, pairing tuples one to one."""
    if isinstance(statement, ast.AnnAssign):
        yield statement.target, statement.value
    elif isinstance(statement, ast.Assign):
        for target in statement.targets:
            if isinstance(target, ast.Tuple) and isinstance(statement.value, ast.Tuple):
                yield from zip(target.elts, statement.value.elts, strict=False)
            else:
                yield target, statement.value


def _nested(node: ast.AST) -> Iterator[ast.stmt]:
    """Statements inside ``node`` (not ``node``), without entering nested functions or classes."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(child, ast.stmt):
            yield child
        yield from _nested(child)


def _assignments(
    operator: str, ctor: ast.FunctionDef, fields: list[str], inherited: set[str] | frozenset[str]
) -> Iterator[Finding]:
    params = {a.arg for a in [*ctor.args.posonlyargs, *ctor.args.args, *ctor.args.kwonlyargs]}
    assigned: set[str] = set()
    forwards_kwargs = False

    def visit(statement: ast.stmt, top_level: bool) -> Iterator[Finding]:
        nonlocal forwards_kwargs
        for target, value in _pairs(statement):
            field = _self_field(target)
            if field in fields:
                if _kept(value, field) is None:
                    yield Finding(operator, "changed", field, statement.lineno)
                if top_level:  # a branch may not run: only a top-level assignment assigns for sure
                    assigned.add(field)  # changed or not: reported once, as changed
        call = _super_init(statement.value) if isinstance(statement, ast.Expr) else None
        if call is not None:
            for keyword in call.keywords:
                if keyword.arg is None:
                    forwards_kwargs = forwards_kwargs or top_level
                elif keyword.arg in fields:
                    if _kept(keyword.value, keyword.arg) is None:
                        yield Finding(operator, "changed", keyword.arg, statement.lineno)
                    if top_level:
                        assigned.add(keyword.arg)

    for statement in ctor.body:
        yield from visit(statement, top_level=True)
        for inner in _nested(statement):
            yield from visit(inner, top_level=False)
    for field in fields:
        passed_through = forwards_kwargs and field in inherited and field not in params
        if field not in assigned and not passed_through:
            yield Finding(operator, "missing", field, ctor.lineno)


def _logic(operator: str, ctor: ast.FunctionDef, fields: list[str]) -> Iterator[Finding]:
    """Reads of a field (parameter or ``self.field``) outside the assignments that keep it unchanged."""
    sanctioned: set[int] = set()
    for node in ast.walk(ctor):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            for target, value in _pairs(node):
                field = _self_field(target) or _name(target)
                if field in fields:
                    sanctioned |= {id(n) for n in _kept_reads(value, field)}
        elif (call := _super_init(node)) is not None:
            for keyword in call.keywords:
                if keyword.arg in fields:
                    sanctioned |= {id(n) for n in _kept_reads(keyword.value, keyword.arg)}
        elif isinstance(node, ast.Compare) and _is_none_check(node):
            sanctioned.add(id(node.left))  # whether it was given, not its value
    args = ctor.args
    bound = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    bound |= {n.id for n in ast.walk(ctor) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    # Defaults are evaluated where the class is defined: a name there is not the parameter.
    in_defaults = {id(n) for d in [*args.defaults, *args.kw_defaults] if d is not None for n in ast.walk(d)}
    for node in ast.walk(ctor):
        if id(node) in sanctioned or id(node) in in_defaults:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in fields and node.id in bound:
            yield Finding(operator, "logic", node.id, node.lineno)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and _self_field(node) in fields:
            yield Finding(operator, "logic", node.attr, node.lineno)


def _kept_reads(value: ast.expr | None, field: str) -> list[ast.Name]:
    """The reads of ``field`` that an unchanged assignment consists of (its test included)."""
    kept = _kept(value, field)
    if kept is None:
        return []
    reads = [kept]
    if isinstance(value, ast.IfExp):
        reads += [n for n in ast.walk(value.test) if isinstance(n, ast.Name) and n.id == field]
    return reads


GOOD = """
class Op(BaseOperator):
    def __init__(self, *, a, b=None, c=None, d=(), **kwargs):
        super().__init__(d=d, **kwargs)
        if b is None:
            pass
        self.a = a
        self.b = b or {}
        self.c = c if c is not None else "x"
"""


@pytest.mark.parametrize(
    ("source", "fields", "expected"),
    [
        (GOOD, ["a", "b", "c", "d"], []),
        # Only passed on through **kwargs to a parent that declares it: the parent's business.
        (GOOD, ["inherited"], []),
        # Passed on, but no parent declares it: nobody assigns it.
        (GOOD, ["a", "nobody"], [("missing", "nobody")]),
        (
            "class Op(BaseOperator):\n    def __init__(self, a, **kwargs):\n        super().__init__(**kwargs)\n"
            "        self.a = list(a)\n",
            ["a"],
            [("changed", "a"), ("logic", "a")],
        ),
        (
            "class Op(BaseOperator):\n    def __init__(self, a, **kwargs):\n        super().__init__(**kwargs)\n",
            ["a"],
            [("missing", "a")],
        ),
        (
            "class Op(BaseOperator):\n    def __init__(self, a, **kwargs):\n        super().__init__(**kwargs)\n"
            "        if kwargs:\n            self.a = a\n",
            ["a"],
            [("missing", "a")],  # assigned in a branch only
        ),
        (
            "class Op(BaseOperator):\n    def __init__(self, a, **kwargs):\n        super().__init__(**kwargs)\n"
            "        self.a = a\n        if not a.startswith('s3://'):\n            raise ValueError(a)\n",
            ["a"],
            [("logic", "a")],  # validation of the un-rendered value
        ),
        (
            "class Op(BaseOperator):\n    def __init__(self, a, **kwargs):\n"
            "        super().__init__(a=a.strip(), **kwargs)\n",
            ["a"],
            [("changed", "a"), ("logic", "a")],
        ),
        (
            "class Op(BaseOperator):\n    def __init__(self, a, **kwargs):\n        super().__init__(**kwargs)\n"
            "        self.a = a\n        self.n = len(self.a)\n",
            ["a"],
            [("logic", "a")],
        ),
    ],
)
def test_rule(source: str, fields: list[str], expected: list[tuple[str, str]]) -> None:
    assert sorted({(f.kind, f.field) for f in check_source(source, fields, {"inherited"})}) == expected


def test_finds_the_provider_operators() -> None:
    names = {cls.__qualname__ for cls in operator_classes()}
    assert {"SparkStageOperator", "WarmPoolStartOperator", "WarmPoolStopOperator"} <= names
    assert "_SparkStageDecoratedOperator" in names  # a decorated operator is checked too


def test_every_operator_assigns_templated_fields_unchanged() -> None:
    findings = [f for cls in operator_classes() for f in check_operator(cls)]
    new = [f for f in findings if f.key not in KNOWN_VIOLATIONS]
    assert not new, "templated fields changed, missing or read by logic in __init__ (see module doc): " + "; ".join(
        f"{f.operator} line {f.line}: {f.kind} {f.field}" for f in new
    )
    stale = sorted(set(KNOWN_VIOLATIONS) - {f.key for f in findings})
    assert not stale, f"fixed, remove from KNOWN_VIOLATIONS: {stale}"
