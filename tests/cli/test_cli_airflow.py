"""The provider's commands as ``airflow finegrained ...``: the same arguments and handlers as
``python -m airflow_provider_finegrained``, discovered by Airflow from the provider info's ``cli`` list."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_finegrained.cli.airflow_commands import GROUP, get_cli_commands
from airflow_provider_finegrained.cli.main import build_parser
from airflow_provider_finegrained.get_provider_info import get_provider_info
from tests.conftest import REPO

EXAMPLE = REPO / "dags_examples" / "tpch_plan.py"
COMMANDS = ["class-archive", "cluster", "explain", "hadoop", "plan", "report", "size", "warm"]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _options(parser: argparse.ArgumentParser) -> list[tuple[tuple[str, ...], str, object]]:
    """Each argument's flags, destination and default, and the same of nested sub-commands."""
    found: list[tuple[tuple[str, ...], str, object]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in sorted(action.choices.items()):
                found += [((name, *flags), dest, default) for flags, dest, default in _options(sub)]
        elif not isinstance(action, argparse._HelpAction):
            found.append((tuple(action.option_strings), action.dest, action.default))
    return sorted(found, key=repr)


def _airflow_parser() -> argparse.ArgumentParser:
    from airflow.cli.cli_config import DefaultHelpParser
    from airflow.cli.cli_parser import _add_command

    parser = DefaultHelpParser(prog="airflow")
    commands = parser.add_subparsers(dest="subcommand")
    for command in get_cli_commands():
        _add_command(commands, command)
    return parser


def test_airflow_group_has_every_command_with_the_same_arguments() -> None:
    [group] = get_cli_commands()
    assert group.name == GROUP == "finegrained"
    assert sorted(c.name for c in group.subcommands) == COMMANDS
    ours = _subparsers(build_parser())
    theirs = _subparsers(_subparsers(_airflow_parser())[GROUP])
    assert sorted(theirs) == COMMANDS
    for name in COMMANDS:
        assert _options(theirs[name]) == _options(ours[name]), name
        assert theirs[name].get_default("handler") is ours[name].get_default("handler"), name


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["size", "--input-bytes", "300m", "--cores", "2", "--json"], 0),
        (["size", "--input-bytes", "lots"], 2),  # a bad value: the same exit code as python -m
    ],
)
def test_airflow_command_runs_the_handler_and_keeps_its_exit_code(
    argv: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _airflow_parser().parse_args([GROUP, *argv])
    if code:
        with pytest.raises(SystemExit) as exit_info:
            args.func(args)
        assert exit_info.value.code == code
        assert "error:" in capsys.readouterr().err
    else:
        args.func(args)
        assert json.loads(capsys.readouterr().out)["decision"]["parallelism"] == 5


def test_provider_info_lists_the_cli_function() -> None:
    assert get_provider_info()["cli"] == ["airflow_provider_finegrained.cli.airflow_commands.get_cli_commands"]


def _airflow(*args: str) -> subprocess.CompletedProcess[str]:
    airflow = str(Path(sys.executable).parent / "airflow")
    return subprocess.run([airflow, *args], capture_output=True, text=True, env=os.environ.copy(), timeout=300)


@pytest.mark.slow
@pytest.mark.airflow
def test_airflow_cli_help_and_plan() -> None:
    """The real ``airflow`` executable finds the group through provider discovery and runs ``plan``
    (no database needed). Exit codes of a failing command: the in-process test above."""
    result = _airflow(GROUP, "--help")
    assert result.returncode == 0, result.stderr[-2000:]
    for name in COMMANDS:
        assert name in result.stdout
    assert "print the parse-time plan of the stage DAGs" in result.stdout

    result = _airflow(GROUP, "plan", str(EXAMPLE), "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    plan = json.loads(result.stdout)["tpch_plan"]
    assert plan["regions"][0]["stages"] == ["scan_lineitem", "filter_shipped"]
    assert plan["stages"]["scan_nation_region"]["fixed_parallelism"] == 1
