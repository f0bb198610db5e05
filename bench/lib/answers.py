"""Reading each variant's Q1, Q3 and Q5 answers and checking that every variant computed the same ones."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench.lib.pipeline import ANSWERS

Rows = list[dict[str, Any]]


def read_rows(path: str | Path) -> Rows:
    """The rows of a parquet file or folder of parts, as dicts."""
    import pyarrow.parquet as pq

    return list(pq.read_table(str(path)).to_pylist())


def answers_in(out: Path) -> dict[str, Rows]:
    """Q1, Q3 and Q5 as a run wrote them: each answer stage's output under ``out``."""
    return {query: read_rows(out / stage) for query, (stage, _) in ANSWERS.items()}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def _sort_key(row: Mapping[str, Any], columns: Sequence[str]) -> tuple[str, ...]:
    return tuple(repr(row[c]) for c in columns)


def differences(got: Rows, want: Rows, keys: Sequence[str], *, rtol: float = 1e-9, atol: float = 1e-6) -> list[str]:
    """What differs between two answers, compared as sorted rows (by ``keys``, then every column).

    Key columns and non-numbers must be equal; numbers (Decimal, int, float) are compared as floats
    within ``rtol``/``atol``. An empty list means the same answer.
    """
    problems: list[str] = []
    got_cols = sorted(got[0]) if got else []
    want_cols = sorted(want[0]) if want else []
    if got_cols != want_cols:
        return [f"columns differ: {got_cols} != {want_cols}"]
    if len(got) != len(want):
        return [f"{len(got)} rows, expected {len(want)}"]
    order = [*keys, *(c for c in want_cols if c not in keys)]
    got_sorted = sorted(got, key=lambda r: _sort_key(r, order))
    want_sorted = sorted(want, key=lambda r: _sort_key(r, order))
    for i, (g, w) in enumerate(zip(got_sorted, want_sorted, strict=True)):
        for col in want_cols:
            a, b = g[col], w[col]
            if col not in keys and _is_number(a) and _is_number(b):
                if not math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=atol):
                    problems.append(f"row {i} {col}: {a} != {b}")
            elif a != b:
                problems.append(f"row {i} {col}: {a!r} != {b!r}")
    return problems


def compare_answers(baseline: Mapping[str, Rows], other: Mapping[str, Rows]) -> dict[str, list[str]]:
    """Per query (q1, q3, q5), what differs between ``other`` and ``baseline``; empty lists mean identical."""
    out: dict[str, list[str]] = {}
    for query, (_, keys) in ANSWERS.items():
        if query not in other or query not in baseline:
            out[query] = ["answer missing"]
        else:
            out[query] = differences(other[query], baseline[query], keys)
    return out
