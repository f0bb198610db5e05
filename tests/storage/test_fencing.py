"""Fenced commits, the same tests on a local folder, memory:// and a real S3 API (moto on loopback).

Each reproduces a way a killed try's late writer broke the protocol before fencing (issue 17): the
retry cleaned the old try's folder while the old try still wrote, and the old try then published a
marker over part of its rows; or, with a fixed output_path, published first so the retry failed for good.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.runtime.fence import Fence, current_token
from airflow_provider_finegrained.runtime.output import (
    MARKER,
    FencedError,
    OutputAlreadyExistsError,
    OutputNotCommittedError,
    output_location,
    read_committed,
    stage_folder,
)
from airflow_provider_finegrained.runtime.output_cleanup import cleanup_uncommitted
from airflow_provider_finegrained.runtime.output_commit import begin_output, commit_output, write_with
from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.filesystem import exists, list_files, list_folder
from airflow_provider_finegrained.storage.locations import join
from tests.storage.conftest import Store
from tests.storage.test_commit_protocol import parts_writer, read_ids

RUN = "manual__2026-11-24T03:00:00+00:00"


def fence_of(store: Store, try_number: int) -> Fence:
    return Fence.for_stage(store.root, "dag", RUN, "stage", try_number)


def try_location(store: Store, try_number: int) -> str:
    return output_location(store.root, "dag", RUN, "stage", try_number)


def test_the_fence_only_goes_up_and_names_the_newest_try(store: Store) -> None:
    first, second, third = (fence_of(store, n) for n in (1, 2, 3))
    assert first.current(store.options) is None and first.superseded_by(store.options) is None
    first.raise_to_token(store.options)
    third.raise_to_token(store.options)
    second.raise_to_token(store.options)  # late and lower: recorded, but the fence stays at 3
    second.raise_to_token(store.options)  # idempotent
    assert current_token(first.folder, store.options) == 3
    assert first.superseded_by(store.options) == 3 and second.superseded_by(store.options) == 3
    assert third.superseded_by(store.options) is None
    assert first.folder == join(stage_folder(store.root, "dag", RUN, "stage"), "_fence")


def test_a_revoked_try_starts_no_write(store: Store) -> None:
    fence_of(store, 2).raise_to_token(store.options)
    called: list[str] = []
    with pytest.raises(FencedError, match=r"try 1 may not write .* try 2 of the stage has superseded it"):
        write_with(try_location(store, 1), called.append, storage_options=store.options, fence=fence_of(store, 1))
    assert called == []
    assert list_files(try_location(store, 1), store.options) == {}


@pytest.mark.security
def test_the_killed_tries_race_from_the_issue_publishes_nothing(store: Store) -> None:
    # Try 1 (an orphan of a killed task) has written half its files when try 2 takes over.
    old, new = fence_of(store, 1), fence_of(store, 2)
    old.raise_to_token(store.options)
    staging = begin_output(try_location(store, 1), storage_options=store.options, fence=old)
    parts_writer(store, [10])(staging)
    new.raise_to_token(store.options)  # revoke first ...
    cleanup_uncommitted(stage_folder(store.root, "dag", RUN, "stage"), storage_options=store.options)  # ... then clean
    parts_writer(store, [10], first_id=10)(staging)  # the orphan goes on writing into what was cleaned
    with pytest.raises(FencedError, match="try 1 may not publish"):
        commit_output(staging, try_location(store, 1), storage_options=store.options, fence=old)
    assert not exists(join(try_location(store, 1), MARKER), store.options)
    committed = write_with(try_location(store, 2), parts_writer(store, [20]), storage_options=store.options, fence=new)
    assert read_committed(try_location(store, 2), storage_options=store.options) == committed
    assert committed.rows == 20 and committed.fence == new


def test_a_marker_created_in_the_instant_after_revocation_is_removed_and_never_read(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worst timing: the old try's check passed, then the retry revoked it, then the marker is created.
    old, new = fence_of(store, 1), fence_of(store, 2)
    old.raise_to_token(store.options)
    staging = begin_output(try_location(store, 1), storage_options=store.options, fence=old)
    parts_writer(store, [4])(staging)
    create = filesystem.create_exclusive

    def revoked_just_before(location: str, data: bytes, options: Any = None) -> None:
        new.raise_to_token(store.options)
        create(location, data, options)

    monkeypatch.setattr(filesystem, "create_exclusive", revoked_just_before)
    with pytest.raises(FencedError, match="try 1 may not publish"):
        commit_output(staging, try_location(store, 1), storage_options=store.options, fence=old)
    monkeypatch.undo()
    assert not exists(join(try_location(store, 1), MARKER), store.options)


def test_readers_refuse_a_superseded_tries_marker_and_cleanup_removes_it(store: Store) -> None:
    old = fence_of(store, 1)
    old.raise_to_token(store.options)
    committed = write_with(try_location(store, 1), parts_writer(store, [3]), storage_options=store.options, fence=old)
    assert read_committed(try_location(store, 1), storage_options=store.options) == committed
    fence_of(store, 2).raise_to_token(store.options)  # a rerun of the stage (a retry or a clear)
    with pytest.raises(OutputNotCommittedError, match="written by try 1, which try 2 of the stage superseded"):
        read_committed(try_location(store, 1), storage_options=store.options)
    stage = stage_folder(store.root, "dag", RUN, "stage")
    assert cleanup_uncommitted(stage, storage_options=store.options) == [try_location(store, 1)]
    assert [name for name, _ in list_folder(stage, store.options)] == ["_fence"]


@pytest.mark.security
def test_a_fixed_output_path_goes_to_the_newest_try_not_the_first_to_finish(store: Store) -> None:
    fixed = join(store.root, "exports", "orders")
    old, new = fence_of(store, 1), fence_of(store, 2)
    old.raise_to_token(store.options)
    orphan = begin_output(fixed, storage_options=store.options, fence=old)
    parts_writer(store, [10])(orphan)
    new.raise_to_token(store.options)
    with pytest.raises(FencedError):  # before fencing, the orphan won and the retry failed for good
        commit_output(orphan, fixed, storage_options=store.options, fence=old)
    committed = write_with(fixed, parts_writer(store, [20], first_id=100), storage_options=store.options, fence=new)
    assert read_ids(store, read_committed(fixed, storage_options=store.options).uris) == list(range(100, 120))
    assert committed.fence == new


def test_a_rerun_replaces_a_superseded_marker_at_a_fixed_output_path(store: Store) -> None:
    fixed = join(store.root, "exports", "orders")
    first = fence_of(store, 1)
    first.raise_to_token(store.options)
    write_with(fixed, parts_writer(store, [2]), storage_options=store.options, fence=first)
    with pytest.raises(OutputAlreadyExistsError):  # the same try cannot write it twice
        write_with(fixed, parts_writer(store, [5]), storage_options=store.options, fence=first)
    second = fence_of(store, 2)
    second.raise_to_token(store.options)
    write_with(fixed, parts_writer(store, [5], first_id=50), storage_options=store.options, fence=second)
    again = read_committed(fixed, storage_options=store.options)
    assert again.rows == 5 and again.fence == second
    assert read_ids(store, again.uris) == list(range(50, 55))


def test_an_unfenced_output_is_read_as_before(store: Store) -> None:
    committed = write_with(try_location(store, 1), parts_writer(store, [2]), storage_options=store.options)
    fence_of(store, 2).raise_to_token(store.options)
    assert committed.fence is None
    assert read_committed(try_location(store, 1), storage_options=store.options).rows == 2


def test_a_moved_root_keeps_its_fences(tmp_path: Path) -> None:
    store = Store("local", str(tmp_path / "before"))
    fence_of(store, 1).raise_to_token()
    write_with(try_location(store, 1), parts_writer(store, [3]), fence=fence_of(store, 1))
    moved = Store("local", str(tmp_path / "after"))
    shutil.copytree(store.root, moved.root)
    assert read_committed(try_location(moved, 1)).rows == 3
    fence_of(moved, 2).raise_to_token()  # revoking in the moved copy is what counts for it
    with pytest.raises(OutputNotCommittedError, match="superseded"):
        read_committed(try_location(moved, 1))
    assert read_committed(try_location(store, 1)).rows == 3
