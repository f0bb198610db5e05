"""The JIT decision (``planning.jit``): a table worked by hand from its rule, C1 alone at or below 400 MiB
read per task slot (the limit ``bench cold-start`` measured), the setting otherwise."""

from __future__ import annotations

import pytest

from airflow_provider_finegrained.planning.jit import C1_MAX_BYTES_PER_SLOT, decide_jit

MiB = 2**20


@pytest.mark.parametrize(
    ("setting", "read", "slots", "compiler", "reason"),
    [
        ("auto", 0, 1, "c1", "0 B read per slot (0 B on 1) <= 400.0 MiB"),
        ("auto", 400 * MiB, 1, "c1", "400.0 MiB read per slot (400.0 MiB on 1) <= 400.0 MiB"),
        ("auto", 400 * MiB + 1, 1, "tiered", "400.0 MiB read per slot (400.0 MiB on 1) > 400.0 MiB"),
        # 4,000 MiB on 10 slots is exactly the limit per slot; on 9 it is over.
        ("auto", 4000 * MiB, 10, "c1", "400.0 MiB read per slot (3.9 GiB on 10) <= 400.0 MiB"),
        ("auto", 4000 * MiB, 9, "tiered", "444.4 MiB read per slot (3.9 GiB on 9) > 400.0 MiB"),
        # The measured points either side of it: 389 MiB per slot ran faster with C1, 445 MiB slower.
        ("auto", 778 * MiB, 2, "c1", "389.0 MiB read per slot (778.0 MiB on 2) <= 400.0 MiB"),
        ("auto", 890 * MiB, 2, "tiered", "445.0 MiB read per slot (890.0 MiB on 2) > 400.0 MiB"),
        # One huge input on one slot: tiered, whatever else the region reads.
        ("auto", 10 * 1024**3, 1, "tiered", "10.0 GiB read per slot (10.0 GiB on 1) > 400.0 MiB"),
        ("c1", 10 * 1024**3, 1, "c1", "jit=c1 set on the connection"),
        ("tiered", 0, 4, "tiered", "jit=tiered set on the connection"),
    ],
)
def test_the_jit_of_a_region(setting: str, read: int, slots: int, compiler: str, reason: str) -> None:
    decision = decide_jit(setting, read, slots)
    assert (decision.compiler, decision.reason) == (compiler, reason)
    assert decision.java_options == (("-XX:TieredStopAtLevel=1",) if compiler == "c1" else ())


def test_the_limit_is_a_parameter() -> None:
    assert decide_jit("auto", 10 * MiB, 1, limit=8 * MiB).compiler == "tiered"
    assert decide_jit("auto", C1_MAX_BYTES_PER_SLOT, 1).compiler == "c1"


@pytest.mark.parametrize(
    ("setting", "read", "slots", "message"),
    [
        ("C2", 0, 1, "jit: 'C2' is not one of auto, c1, tiered"),
        ("auto", -1, 1, "jit: needs bytes >= 0 and at least one slot, got -1 bytes on 1 slots"),
        ("auto", 0, 0, "jit: needs bytes >= 0 and at least one slot, got 0 bytes on 0 slots"),
    ],
)
def test_bad_input_is_named(setting: str, read: int, slots: int, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        decide_jit(setting, read, slots)
    assert str(info.value) == message
