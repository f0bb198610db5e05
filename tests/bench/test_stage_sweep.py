"""The per-stage sweep's parts that need no Spark: its order of work and the sweep file it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.history.verdicts import swept
from bench.stage_sweep import rounds, sweep_doc


def test_rounds_warm_up_first_then_alternate_directions() -> None:
    order = rounds(["q1", "q5"], [1, 2], repeats=2)
    forward = [("q1", 1), ("q1", 2), ("q5", 1), ("q5", 2)]
    assert order == [forward[::-1], forward, forward[::-1]]  # round 0 (warm-up, not kept), then 2 kept


def test_the_sweep_file_judges_only_the_stages_it_swept(tmp_path: Path) -> None:
    times = {
        1: {"q5_join": [6.0, 6.1, 6.2, 6.3, 6.4]},
        2: {"q5_join": [5.0, 5.1, 5.2, 5.3, 5.4]},
        8: {"q5_join": [5.05, 5.15, 5.25, 5.35, 5.45]},
    }
    doc = sweep_doc(1.0, times, repeats=5, command="python -m bench stage-sweep")
    assert doc["1"]["best"] == {"q5_join": 2} and doc["1"]["blocking"] is True
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    verdicts = swept("1", path)
    assert list(verdicts) == ["q5_join"]  # the stages it did not sweep get no verdict
    # 8 interleaves with 2 (U = 15 of 25: p = 0.35); every sample at 1 is slower than every one at 2 (p = 1/252).
    assert verdicts["q5_join"]["near_best"] == [2, 8]
    assert verdicts["q5_join"]["median_s"][8] == pytest.approx(5.25)


def test_a_forward_pair_is_judged_on_its_summed_time(tmp_path: Path) -> None:
    # Alone, q5_join is fastest at 4 and its forward consumer at 1; one count serves both, so the pair's
    # summed time decides: 1 -> 3.0 + 0.2, 2 -> 2.6 + 0.3, 4 -> 2.5 + 0.9 (medians; one round's samples pair up).
    times = {
        1: {"q5_join": [3.0] * 5, "q5_local_supplier_volume": [0.2] * 5},
        2: {"q5_join": [2.6] * 5, "q5_local_supplier_volume": [0.3] * 5},
        4: {"q5_join": [2.5] * 5, "q5_local_supplier_volume": [0.9] * 5},
    }
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(sweep_doc(1.0, times, repeats=5, command="c")))
    verdicts = swept("1", path)
    for stage in ("q5_join", "q5_local_supplier_volume"):
        assert verdicts[stage]["best"] == 2 and verdicts[stage]["best_s"] == pytest.approx(2.9)
        assert verdicts[stage]["median_s"] == {1: pytest.approx(3.2), 2: pytest.approx(2.9), 4: pytest.approx(3.4)}
    assert verdicts["q5_join"]["near_best_rule"].endswith("its forward partner q5_local_supplier_volume")
