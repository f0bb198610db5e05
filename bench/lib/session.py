"""Spark sessions and submissions, and the settings a stage runs with under each policy.

A policy's settings come from one place each: Spark's own defaults (:data:`SPARK_DEFAULTS`), or the
provider's one decision path (``airflow_provider_finegrained.execution.decision``, as ``finegrained size``
and ``explain`` use it): :class:`ProviderSizing` decides the TPC-H DAG region by region as a run does,
:func:`decide_alone` one stage over given files. Nothing here restates what the provider decides.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Final

from bench.lib.pipeline import STAGE_INPUTS, example_module, parse_input

MIB: Final = 2**20

SPARK_DEFAULTS: Final[dict[str, str]] = {
    # Spark 4's own values, set explicitly so that nothing left in a shared session can leak between runs.
    "spark.sql.shuffle.partitions": "200",
    "spark.sql.files.maxPartitionBytes": str(128 * MIB),
    "spark.sql.files.openCostInBytes": str(4 * MIB),
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "true",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": str(64 * MIB),
    "spark.sql.adaptive.skewJoin.enabled": "true",
    "spark.sql.adaptive.skewJoin.skewedPartitionFactor": "5.0",
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": str(256 * MIB),
}
"""Every key a policy sets that has a default, at Spark's default: each stage starts from these."""

UNSET_BY_DEFAULT: Final = ("spark.sql.files.minPartitionNum", "spark.sql.adaptive.coalescePartitions.minPartitionNum")
"""Keys a policy may set that Spark leaves unset: unset again before a stage whose settings lack them."""

CONNECT_TOKEN_ENV: Final = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
"""Where a pyspark Connect client reads a server's token from (never on a command line)."""
CONNECT_CLIENT_ENV: Final = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE", CONNECT_TOKEN_ENV)
"""What pyspark sets in a process that opened a Spark Connect session: inherited by a spark-submit, they turn
its classic driver into a Connect client with no server."""


def apply_conf(spark: Any, conf: Mapping[str, str]) -> None:
    """Set ``conf`` in ``spark``'s session, after unsetting the keys Spark leaves unset that ``conf`` lacks."""
    for key in UNSET_BY_DEFAULT:
        if key not in conf:
            spark.conf.unset(key)
    for key, value in conf.items():
        spark.conf.set(key, value)


def local_session(name: str, conf: Mapping[str, str], master: str = "local[2]") -> Any:
    """A classic SparkSession on this machine (``master``), its UI's console progress off, with ``conf``."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(name).config("spark.ui.showConsoleProgress", "false")
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def remote_session(url: str) -> Any:
    """A new Spark Connect session of the server at ``url`` (a warm pool's ``client_url``)."""
    from pyspark.sql import SparkSession

    return SparkSession.builder.remote(url).create()


# ---------------------------------------------------------------- a plain spark-submit (the baselines)


def spark_home() -> Path:
    """The Spark installation a plain spark-submit runs from: ``SPARK_HOME``, else the installed pyspark."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    spec = find_spec("pyspark")  # without importing it (a second)
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed and SPARK_HOME is not set")
    return Path(spec.origin).parent


def spark_submit(
    application: str | Path,
    args: Sequence[str] = (),
    *,
    master: str,
    conf: Mapping[str, str] = {},
    name: str | None = None,
    driver_memory: str | None = None,
) -> list[str]:
    """The exact command of a plain spark-submit in client mode, as an Airflow task of a team without the
    provider runs one (``--conf`` in key order)."""
    command = [str(spark_home() / "bin" / "spark-submit"), "--master", master, "--deploy-mode", "client"]
    command += ["--name", name] if name else []
    command += ["--driver-memory", driver_memory] if driver_memory else []
    for key, value in sorted(conf.items()):
        command += ["--conf", f"{key}={value}"]
    return [*command, str(application), *args]


def spark_submit_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a plain spark-submit: ``base`` (default ``os.environ``) without a Connect client's
    variables, Spark's home, this interpreter for the driver and the workers, and Spark on loopback."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in CONNECT_CLIENT_ENV}
    env["SPARK_HOME"] = str(spark_home())
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


# ---------------------------------------------------------------- the provider's decision


def file_sizes(path: Path) -> list[int]:
    """Sizes of a parquet file or of the data files of a folder written by Spark."""
    if path.is_file():
        return [path.stat().st_size]
    return sorted(p.stat().st_size for p in path.rglob("*.parquet") if p.is_file())


@dataclass
class ProviderSizing:
    """Each stage's session settings and writer options as the provider decides them, region by region as the
    run goes: the example DAG read into a plan (``read_dag``), each region decided by ``decide_region`` from
    the tables (measured as a run measures them) and the outputs upstream stages wrote in this run."""

    tables: Path
    out: Path
    settings: Any
    """The connection's settings (``airflow_provider_finegrained.settings.ConnectionSettings``)."""
    aqe: bool = True
    decided: dict[str, dict[str, Any]] = field(default_factory=dict)
    decisions: dict[str, Any] = field(default_factory=dict)
    """Stage -> its ``StageDecision``, as each region is decided."""

    def __post_init__(self) -> None:
        from airflow_provider_finegrained.dags import read_dag

        self.plan = read_dag(example_module("tpch_pipeline").dag)

    def conf_for(self, stage: str) -> dict[str, str]:
        """``stage``'s session settings; its region is decided when its first stage runs (as the leader does)."""
        if stage not in self.decisions:
            self._decide(self.plan.stages[stage].region)
        return dict(self.decisions[stage].session_conf)

    def write_options_for(self, stage: str) -> dict[str, str]:
        """The writer options of ``stage``'s output (decided with its region)."""
        self.conf_for(stage)
        return dict(self.decisions[stage].write_options)

    def stage_inputs(self, region: str) -> dict[str, Any]:
        """What each member of ``region`` reads: the tables' files measured, the upstream outputs written."""
        from airflow_provider_finegrained.execution import measure_external
        from airflow_provider_finegrained.execution.decision import StageInputs

        inputs: dict[str, Any] = {}
        for member in self.plan.regions[region]:
            upstream: dict[str, Any] = {}
            external: dict[str, Any] = {}
            for param, ref in STAGE_INPUTS[member].items():
                kind, name = parse_input(ref)
                if kind == "table":
                    external[param] = measure_external(str(self.tables / f"{name}.parquet"), "parquet")
                elif name not in self.plan.regions[region]:
                    path = self.out / name
                    upstream[param] = {"stage": name, "path": str(path), "format": "parquet"}
                    upstream[param]["partition_bytes"] = file_sizes(path)
            # The committed outputs as a trace records them (``decided_from["inputs"]``).
            committed = StageInputs.from_record({"upstream": upstream}).upstream
            inputs[member] = StageInputs(upstream=committed, external=external)
        return inputs

    def _decide(self, region: str) -> None:
        from airflow_provider_finegrained.execution.decision import (
            DecisionSettings,
            decide_region,
            forward_group_peers,
        )

        config = self.settings.parallelism_config()
        # A forward group already decided by a region that ran keeps its value (as the runner does).
        peers = forward_group_peers(self.plan, region)
        ran_with = {p: int(self.decided[p]["parallelism"]) for p in peers if p in self.decided}
        decision = decide_region(
            self.plan,
            region,
            self.stage_inputs(region),
            lambda _: config,
            self.settings.cluster_profile(),
            ran_with=ran_with,
            settings=DecisionSettings(adaptive_query_execution=self.aqe),
        )
        for member, stage in decision.stages.items():
            self.decisions[member] = stage
            self.decided[member] = {
                "parallelism": stage.sizing.parallelism,
                "rule": stage.trace.rule,
                "notes": list(stage.sizing.notes),
                "consumed_bytes": sum(stage.trace.consumed_bytes.values()),
            }


def decide_alone(stage: str, file_bytes: Mapping[str, Sequence[int]], config: Any, profile: Any) -> Any:
    """The ``StageDecision`` of one stage that scans files of ``file_bytes`` (input name -> each file's bytes),
    decided as a run decides it: a region of that one stage, AQE on (as ``finegrained size`` does).

    Their row groups are unread: the provider's producers' are assumed, as for committed upstream outputs."""
    from airflow_provider_finegrained.execution.decision import ExternalSizes, StageInputs, decide_region
    from airflow_provider_finegrained.planning import StageSpec, plan_stages

    plan = plan_stages([StageSpec.build(stage)])
    inputs = {stage: StageInputs(external={n: ExternalSizes("", "parquet", list(b)) for n, b in file_bytes.items()})}
    return decide_region(plan, plan.stages[stage].region, inputs, lambda _: config, profile).stages[stage]
