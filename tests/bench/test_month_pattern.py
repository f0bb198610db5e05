"""The month's recorded pattern: the seed gives the committed file; weekday/weekend, trend, one 10x spike."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import itertools
import statistics

import pytest

from bench.month import pattern


def test_the_committed_pattern_is_what_the_seed_gives() -> None:
    assert pattern.PATTERN_FILE.read_text() == pattern.render(pattern.generate(pattern.SEED))
    assert pattern.load() == pattern.generate(pattern.SEED)


def test_another_seed_gives_another_month() -> None:
    assert pattern.generate(1) != pattern.generate(pattern.SEED)


def test_thirty_consecutive_days_from_a_monday() -> None:
    days = pattern.load()
    assert len(days) == 30 and days[0].weekday == "Mon"
    dates = [dt.date.fromisoformat(d.date) for d in days]
    assert all(b - a == dt.timedelta(days=1) for a, b in itertools.pairwise(dates))


def test_exactly_one_spike_of_ten_times_its_day_near_sf_1() -> None:
    days = pattern.load()
    spikes = [d for d in days if d.spike]
    assert len(spikes) == 1
    spike = spikes[0]
    assert spike.scale == pytest.approx(10 * spike.expected, abs=0.01)
    assert 0.8 <= spike.scale <= 1.5
    others = [d.scale for d in days if not d.spike]
    # No other day comes near: the largest regular day is well under half the spike.
    assert max(others) < spike.scale / 2
    assert sum(d.scale >= 5 * statistics.median(others) for d in days) == 1


def test_regular_days_fit_this_machine() -> None:
    others = [d.scale for d in pattern.load() if not d.spike]
    assert min(others) >= 0.05 and max(others) <= 0.5


def test_weekends_are_lighter_than_weekdays() -> None:
    days = [d for d in pattern.load() if not d.spike]
    weekend = statistics.mean(d.scale for d in days if d.weekday in ("Sat", "Sun"))
    weekday = statistics.mean(d.scale for d in days if d.weekday not in ("Sat", "Sun"))
    assert weekday > 1.5 * weekend


def test_the_month_grows() -> None:
    days = [d for d in pattern.load() if not d.spike]
    first = statistics.mean(d.scale for d in days if d.index < 14)
    last = statistics.mean(d.scale for d in days if d.index >= 16)
    assert last > 1.3 * first
    # The same weekday a week later is never expected smaller (the trend under the noise).
    expected = {d.index: d.expected for d in pattern.load()}
    assert all(expected[i + 7] > expected[i] for i in range(23) if i + 7 != pattern.last_weekday(pattern.START))


def test_the_pattern_command_checks_the_file() -> None:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert pattern.main(["--check"]) == 0
    assert "what the seed gives" in out.getvalue()
