"""docs/connection.md's table of connection fields is what the declarations generate."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_finegrained.settings import settable_fields, setting_of
from airflow_provider_finegrained.settings.docs import BEGIN, COMMAND, DOC, END, main, reference_table, rewritten


def committed_table(text: str) -> str:
    return text.partition(BEGIN)[2].partition(END)[0].strip("\n")


def test_the_committed_table_is_the_declarations() -> None:
    assert committed_table(DOC.read_text(encoding="utf-8")) == reference_table(), (
        f"docs/connection.md's table of connection fields differs from the settings' declarations; "
        f"regenerate it with `{COMMAND}`"
    )


def test_the_table_has_a_row_per_extra_with_its_declared_allowed_values() -> None:
    rows = reference_table().splitlines()[2:]
    extras = [name for name in settable_fields() if not setting_of(name).host_field]
    assert [row.split(" | ")[2].strip("`") for row in rows] == extras
    deploy = next(row for row in rows if "`deploy_mode`" in row)
    assert "'client' or 'cluster'" in deploy


def test_the_command_rewrites_the_table_and_check_fails_when_it_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "connection.md"
    doc.write_text(f"# Title\n\n{BEGIN}\n| an old | table |\n{END}\n\nAfter.\n", encoding="utf-8")
    assert main(["--check", "--doc", str(doc)]) == 1
    assert COMMAND in capsys.readouterr().err  # the message says how to regenerate it
    assert main(["--doc", str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# Title\n\n") and text.endswith(f"{END}\n\nAfter.\n")
    assert committed_table(text) == reference_table()
    assert main(["--check", "--doc", str(doc)]) == 0
    assert rewritten(text) == text


def test_a_doc_without_the_markers_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "connection.md"
    doc.write_text("# No table here\n", encoding="utf-8")
    assert main(["--doc", str(doc)]) == 1
    assert "markers" in capsys.readouterr().err
    assert doc.read_text(encoding="utf-8") == "# No table here\n"
