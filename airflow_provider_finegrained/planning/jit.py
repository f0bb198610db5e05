"""Which just-in-time compilers a region's JVMs run: C1 alone, or C1 then C2 (the JVM's default, tiered).

A region's application lives from seconds to hours. C2 compiles the hot code into the fastest machine
code, but its compiler threads take CPU from the tasks for the JVM's first tens of seconds; C1 alone
compiles quickly into slower code. So C1 alone wins where a JVM has little work (its whole life is the
warm-up) and loses on long CPU-bound work. The work a JVM gets is estimated, before it starts, as the
bytes the region's stages read per task slot; at or below :data:`C1_MAX_BYTES_PER_SLOT` the region's JVMs
run C1 alone. The limit comes from ``python -m bench cold-start --variants jit-c1,jit-tiered`` at SF 0.01, 1
and 10 (``--jit-table``; docs/benchmarks/cold-start.md). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from airflow_provider_finegrained.planning.units import format_bytes

Compiler = Literal["c1", "tiered"]
JIT_CHOICES: Final = ("auto", "c1", "tiered")

C1_MAX_BYTES_PER_SLOT: Final = 400 * 2**20
"""Read per task slot at or below which C1 alone is chosen. Measured on the loopback cluster (2 workers x 1 core,
2026-11-28): no region reading up to 389 MiB per slot was slower with C1 alone (0.44x to 0.80x of tiered's
seconds, the JVMs' start included), and the first that read more, 445 MiB (Q1's aggregation at SF 10), took
2.04x. Two joins read more still and were faster with C1 (their scans skip most of what they are given), so
bytes are a coarse measure of work: the limit sits in the measured gap, not beyond it."""


@dataclass(frozen=True)
class JitDecision:
    """The compilers of a region's JVMs, and why."""

    compiler: Compiler
    reason: str

    @property
    def java_options(self) -> tuple[str, ...]:
        """The JVM flags that make it so (none for tiered: the JVM's default)."""
        return ("-XX:TieredStopAtLevel=1",) if self.compiler == "c1" else ()


def decide_jit(setting: str, read_bytes: int, slots: int, limit: int = C1_MAX_BYTES_PER_SLOT) -> JitDecision:
    """The JIT of a region that reads ``read_bytes`` in all on ``slots`` task slots.

    ``setting`` is the connection's ``jit``: ``c1`` or ``tiered`` as given, ``auto`` by the bytes per slot.
    Raises ValueError for another setting, negative bytes, or fewer than one slot.
    """
    if setting not in JIT_CHOICES:
        raise ValueError(f"jit: {setting!r} is not one of {', '.join(JIT_CHOICES)}")
    if read_bytes < 0 or slots < 1:
        raise ValueError(f"jit: needs bytes >= 0 and at least one slot, got {read_bytes} bytes on {slots} slots")
    if setting != "auto":
        return JitDecision(setting, f"jit={setting} set on the connection")  # type: ignore[arg-type]
    per_slot = read_bytes // slots
    side = "<=" if per_slot <= limit else ">"
    compiler: Compiler = "c1" if per_slot <= limit else "tiered"
    return JitDecision(
        compiler,
        f"{format_bytes(per_slot)} read per slot ({format_bytes(read_bytes)} on {slots}) {side} {format_bytes(limit)}",
    )
