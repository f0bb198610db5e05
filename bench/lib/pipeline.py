"""The TPC-H example pipeline as data, its tables, and the runner of its stages in one SparkSession.

The table mirrors ``dags_examples/tpch_pipeline.py`` so that every runner (a plain spark-submit of
:mod:`bench.lib.stage_app`, a Spark Connect session of the warm pool, one stage alone) runs the DAG's own
stage functions (``dags_examples/tpch_queries.py``) on the same inputs; ``tests/bench`` checks the two agree.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parents[2]
EXAMPLES: Final = REPO / "dags_examples"
STAGE_APP: Final = Path(__file__).resolve().parent / "stage_app.py"
"""The application a plain spark-submit runs some of the stages with (:mod:`bench.lib.stage_app`)."""

# stage -> {parameter: "table:<name>" or "stage:<name>"}, in the order the stages run (topological).
STAGE_INPUTS: Final[dict[str, dict[str, str]]] = {
    "lineitem_projected": {"lineitem": "table:lineitem"},
    "q1_pricing_summary": {"lineitem": "stage:lineitem_projected"},
    "customer_orders": {"customer": "table:customer", "orders": "table:orders"},
    "q3_join": {"customer_orders": "stage:customer_orders", "lineitem": "stage:lineitem_projected"},
    "q3_shipping_priority": {"joined": "stage:q3_join"},
    "nation_region": {"nation": "table:nation", "region": "table:region"},
    "q5_join": {
        "lineitem": "stage:lineitem_projected",
        "orders": "table:orders",
        "customer": "table:customer",
        "supplier": "table:supplier",
        "nation_region": "stage:nation_region",
    },
    "q5_local_supplier_volume": {"joined": "stage:q5_join"},
}
STAGES: Final[tuple[str, ...]] = tuple(STAGE_INPUTS)

PIPELINED: Final[frozenset[tuple[str, str]]] = frozenset(
    {("q3_join", "q3_shipping_priority"), ("q5_join", "q5_local_supplier_volume")}
)
"""(producer, consumer) edges the DAG declares pipelined: one region, data handed over in memory."""

ANSWERS: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "q1": ("q1_pricing_summary", ("l_returnflag", "l_linestatus")),
    "q3": ("q3_shipping_priority", ("l_orderkey", "o_orderdate", "o_shippriority")),
    "q5": ("q5_local_supplier_volume", ("n_name",)),
}
"""Query -> (the stage whose output is its answer, the key columns compared exactly)."""

DAG_ID: Final = "tpch_pipeline"


def parse_input(ref: str) -> tuple[str, str]:
    """``"table:orders"`` -> ``("table", "orders")``; ``"stage:q3_join"`` -> ``("stage", "q3_join")``."""
    kind, _, name = ref.partition(":")
    if kind not in ("table", "stage") or not name:
        raise ValueError(f"bad input reference {ref!r}: expected table:<name> or stage:<name>")
    return kind, name


def fused_producers(stages: Iterable[str]) -> set[str]:
    """Producers whose pipelined consumer runs in the same application: not written, handed over lazily."""
    chosen = set(stages)
    return {p for p, c in PIPELINED if p in chosen and c in chosen}


def scale_key(scale: float) -> str:
    """``0.01`` -> ``"0.01"``, ``1.0`` -> ``"1"``: how scales name keys in tables and files."""
    return f"{scale:g}"


def example_module(name: str) -> ModuleType:
    """A module of ``dags_examples`` (``tpch_queries``, ``tpch_data``, ``tpch_pipeline``), imported once."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(name)


def tables_for(scale: float, data: Path) -> Path:
    """The folder of tpchgen-cli parquet tables at ``scale`` under ``data``, generated if missing."""
    out = data / f"tpch-sf{scale_key(scale)}"
    example_module("tpch_data").generate(scale, out)
    return out


def stage_inputs(spark: Any, stage: str, tables: Path, upstream: Path, held: dict[str, Any]) -> dict[str, Any]:
    """``stage``'s DataFrames: tables from ``tables``, an upstream handed over in ``held`` (taken out of it), else
    the parquet its upstream wrote under ``upstream``."""
    kwargs: dict[str, Any] = {}
    for param, ref in STAGE_INPUTS[stage].items():
        kind, name = parse_input(ref)
        if kind == "table":
            kwargs[param] = spark.read.parquet(str(tables / f"{name}.parquet"))
        elif name in held:
            kwargs[param] = held.pop(name)
        else:
            kwargs[param] = spark.read.parquet(str(upstream / name))
    return kwargs


@dataclass(frozen=True)
class StageRun:
    """One stage's run: when it started and ended (UTC, ISO) and its seconds."""

    started_at: str
    ended_at: str
    seconds: float


def run_stages(
    spark: Any,
    stages: Iterable[str],
    tables: Path,
    out: Path,
    *,
    fused: Collection[str] = (),
    around: Callable[[str], AbstractContextManager[Any]] | None = None,
    write_options: Callable[[str], Mapping[str, str]] | None = None,
    upstream: Path | None = None,
) -> dict[str, StageRun]:
    """Run ``stages`` in order in ``spark``, each from the tables and the outputs of its upstream stages.

    A stage's output is written as parquet to ``out/<stage>`` (with ``write_options(stage)``), or, for a
    producer in ``fused``, handed over in memory to its consumer (as in a pipelined region). ``around(stage)``
    is entered around each stage (its settings, its job group or tag); its time counts in the stage's.
    ``upstream``: where outputs of upstream stages not in ``stages`` are read (default ``out``).
    """
    queries = example_module("tpch_queries")
    held: dict[str, Any] = {}
    runs: dict[str, StageRun] = {}
    for stage in stages:
        started, clock = datetime.now(UTC), time.perf_counter()
        with around(stage) if around else contextlib.nullcontext():
            result = queries.STAGES[stage](spark, **stage_inputs(spark, stage, tables, upstream or out, held))
            if stage in fused:
                held[stage] = result  # computed inside its consumer's query, as in a pipelined region
            else:
                options = dict(write_options(stage)) if write_options else {}
                result.write.mode("overwrite").options(**options).parquet(str(out / stage))
        runs[stage] = StageRun(started.isoformat(), datetime.now(UTC).isoformat(), time.perf_counter() - clock)
    return runs
