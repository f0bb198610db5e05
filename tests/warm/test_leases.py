"""Leases: a flocked, heartbeating file per region recording its Connect sessions (no Spark started)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_finegrained.warm import WarmPool, WarmPoolUnavailable
from airflow_provider_finegrained.warm.state import LEASES, expire_leases, hold_lease, live_leases

HOLDER = """
import sys, time
from airflow_provider_finegrained.warm import WarmPool
from airflow_provider_finegrained.warm.state import hold_lease
pool = WarmPool("sc://127.0.0.1:1", sys.argv[1], None, None, None, 0.0)
with hold_lease(sys.argv[1], pool) as lease:
    lease.record_session("11111111-1111-4111-8111-111111111111", "airflow")
    lease.record_session("22222222-2222-4222-8222-222222222222", None)
    print("held", flush=True)
    time.sleep(600)
"""


def pool(folder: Path) -> WarmPool:
    return WarmPool("sc://127.0.0.1:1", str(folder), None, None, None, 0.0)


def test_a_dead_holders_lease_is_expired_with_its_sessions_and_only_by_the_supervisor(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert live_leases(str(tmp_path)) == 1
        assert expire_leases(str(tmp_path)) == []  # alive and beating
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # Counting leases (ensure_started, status) leaves a dead holder's file for the supervisor to expire.
    assert live_leases(str(tmp_path)) == 0 and len(os.listdir(tmp_path / LEASES)) == 1
    (expired,) = expire_leases(str(tmp_path))
    assert expired.reason == "its holder died" and expired.pid == holder.pid
    assert expired.sessions == (
        ("11111111-1111-4111-8111-111111111111", "airflow"),
        ("22222222-2222-4222-8222-222222222222", None),
    )
    assert os.listdir(tmp_path / LEASES) == [] and expire_leases(str(tmp_path)) == []


def test_a_lease_without_heartbeat_is_expired_and_its_holder_told(tmp_path: Path) -> None:
    with hold_lease(str(tmp_path), pool(tmp_path)) as lease:
        lease.record_session("33333333-3333-4333-8333-333333333333", "u")
        assert lease.path is not None
        assert expire_leases(str(tmp_path), stale_s=5) == []
        old = time.time() - 60
        os.utime(lease.path, (old, old))  # as if the holder froze a minute ago
        (expired,) = expire_leases(str(tmp_path), stale_s=5)
        assert expired.reason.startswith("no heartbeat for") and expired.pid == os.getpid()
        assert expired.sessions == (("33333333-3333-4333-8333-333333333333", "u"),)
        assert lease.expired()
        with pytest.raises(WarmPoolUnavailable, match=r"lease on the warm pool sc://127\.0\.0\.1:1 expired"):
            lease.record_session("44444444-4444-4444-8444-444444444444", "u")


def test_a_held_lease_beats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_finegrained.warm import state

    monkeypatch.setattr(state, "HEARTBEAT_S", 0.1)
    with hold_lease(str(tmp_path), pool(tmp_path)) as lease:
        assert lease.path is not None
        old = time.time() - 60
        os.utime(lease.path, (old, old))
        time.sleep(0.5)
        assert time.time() - os.stat(lease.path).st_mtime < 5
        assert expire_leases(str(tmp_path), stale_s=5) == []
    # A lease that ends cleanly is gone: never taken for a dead holder's.
    assert os.listdir(tmp_path / LEASES) == [] and expire_leases(str(tmp_path)) == []
