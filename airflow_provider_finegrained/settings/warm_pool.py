"""Whether regions run in a long-lived Spark Connect server (the warm pool) instead of one application each.

Pure: no Airflow or Spark imports.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Final

from airflow_provider_finegrained.settings import coercion
from airflow_provider_finegrained.settings.field import number, string
from airflow_provider_finegrained.settings.model import SettingsModel

EMBEDDED_WARM_POOL: Final = "auto"
"""``warm_pool`` of the embedded default (no connection defined)."""


class WarmPoolSettings(SettingsModel):
    """Whether regions run in a long-lived Spark Connect server instead of one application each."""

    CONCERN: ClassVar[str] = "warm"

    warm_pool: Annotated[
        str,
        string(
            "Warm pool",
            "How regions reach Spark: 'off' starts one application per region with spark-submit; 'auto' runs "
            "them in a long-lived Spark Connect server the provider starts on first use and stops after the idle "
            "timeout, locked with a token of its own; an sc://host:port URL names an existing Spark Connect server "
            "(a ;token=... in it is masked like every secret); conn:CONN_ID names one through an Airflow connection "
            "(host, port, the token as password). A region whose executors do not fit the pool's executor shape "
            "runs as its own application (docs/warm.md).",
            "auto",
            values="'off', 'auto', conn:CONN_ID or an sc://host:port URL",
            check=coercion.warm_pool,
            secret="url",
            default_text="off (the embedded default, with no connection defined: auto)",
        ),
    ] = "off"
    warm_idle_timeout: Annotated[
        float,
        number(
            "Warm pool idle timeout (s)",
            "A pool the provider started stops after this many seconds with no region running; 0 keeps it until "
            "stopped with 'finegrained warm stop'.",
            "600",
            minimum=0,
        ),
    ] = 600.0
