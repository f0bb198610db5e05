"""The provider's commands as the ``airflow finegrained`` group of Airflow's CLI.

Airflow 3.3 reads the ``cli`` list of the provider info ("module.function" returning
``list[CLICommand]``). Each command here is the same argparse definition and handler as in
``python -m airflow_provider_finegrained``: Airflow creates the sub-parser (name and help), and the
command's own ``add_parser`` fills it in, so both entry points accept the same arguments.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from airflow.cli.cli_config import ActionCommand, Arg, CLICommand, GroupCommand

from airflow_provider_finegrained.cli.main import COMMANDS, run

GROUP = "finegrained"
GROUP_HELP = "Plan, size and report stage DAGs; run a local Spark or Hadoop cluster or the warm pool"


class _IntoParser:
    """Stands in for ``add_subparsers()``: hands a command's ``add_parser`` the parser Airflow made."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self._parser = parser

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return self._parser


class _NameAndHelp:
    """Stands in for ``add_subparsers()`` to read a command's name and help without building it."""

    def __init__(self) -> None:
        self.name = ""
        self.help = ""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        self.name, self.help = name, str(kwargs.get("help", ""))
        return argparse.ArgumentParser(add_help=False)


class _CommandArguments(Arg):
    """Every argument of one command at once (positional for Airflow's sorting, which keeps their order)."""

    def __init__(self, add_parser: Callable[[Any], None]) -> None:
        super().__init__(flags=("arguments",))  # type: ignore[no-untyped-call]
        self._add_parser = add_parser

    def add_to_parser(self, parser: argparse.ArgumentParser) -> None:
        self._add_parser(_IntoParser(parser))


def _run(args: argparse.Namespace) -> None:
    # Airflow's main ignores what ``func`` returns: the exit code has to leave as SystemExit.
    code = run(args)
    if code:
        raise SystemExit(code)


def _action(add_parser: Callable[[Any], None]) -> ActionCommand:
    about = _NameAndHelp()
    add_parser(about)
    return ActionCommand(name=about.name, help=about.help, func=_run, args=(_CommandArguments(add_parser),))


def get_cli_commands() -> list[CLICommand]:
    """The ``airflow finegrained`` group: plan, size, report, explain, cluster, hadoop, warm and class-archive."""
    return [GroupCommand(name=GROUP, help=GROUP_HELP, subcommands=[_action(add) for add in COMMANDS])]
