"""The follower mark: the try that submitted an application leaves it running once a later try follows it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from airflow_provider_finegrained.execution.reattach import FOLLOWER_FILE, follower_of
from tests.launchers.test_remote import HANDLE


def test_only_a_later_try_marked_in_the_region_folder_follows_the_application(tmp_path: Path) -> None:
    handle = dataclasses.replace(HANDLE, region_folder=str(tmp_path), try_number=2)
    assert follower_of(handle, {}) is None  # no mark
    (tmp_path / FOLLOWER_FILE).write_text("2")
    assert follower_of(handle, {}) is None  # the submitting try itself
    (tmp_path / FOLLOWER_FILE).write_text("3")
    assert follower_of(handle, {}) == 3
    (tmp_path / FOLLOWER_FILE).write_text("not a try")
    assert follower_of(handle, {}) is None  # unreadable: kill as before
    assert follower_of(None, {}) is None
    assert follower_of(dataclasses.replace(handle, region_folder=""), {}) is None
