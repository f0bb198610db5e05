"""The loopback clusters' state files: written whole, read back as their dataclass, clear when missing or wrong."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_provider_finegrained.spark.state_file import read_state, write_state


@dataclass(frozen=True)
class Recorded:
    work_dir: str
    pids: tuple[int, ...]


def test_a_state_round_trips_with_lists_as_tuples_and_extra_keys_ignored(tmp_path: Path) -> None:
    path = str(tmp_path / "cluster.json")
    write_state(path, {"work_dir": "/w", "pids": [1, 2], "ports": {"master": 7077}})
    assert read_state(Recorded, path, FileNotFoundError("none")) == Recorded("/w", (1, 2))
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.json"]  # no temporary file left behind


def test_a_missing_state_raises_the_callers_error_and_a_wrong_one_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    with pytest.raises(FileNotFoundError, match="start one first"):
        read_state(Recorded, str(path), FileNotFoundError("start one first"))
    path.write_text(json.dumps({"work_dir": "/w"}))
    with pytest.raises(ValueError, match=r"cluster\.json is not a Recorded state file"):
        read_state(Recorded, str(path), FileNotFoundError("none"))
