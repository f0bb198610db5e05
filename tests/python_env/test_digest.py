"""What identifies an environment's content: real dist-info folders in a temporary site-packages."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest

from airflow_provider_finegrained.python_env.digest import digest_of, editable_sources, environment_digest

PYTHON = "/usr/bin/python3.11"


def install(site: Path, name: str, version: str, record: str = "", editable_module: str | None = None) -> None:
    """A distribution as an installer leaves it: METADATA, RECORD and, for an editable one, direct_url.json."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text(record or f"{name}/__init__.py,sha256=abc,1\n")
    if editable_module:
        (info / "direct_url.json").write_text(json.dumps({"url": "file:///src", "dir_info": {"editable": True}}))
        (info / "top_level.txt").write_text(editable_module + "\n")


def digest(site: Path, python: str = PYTHON) -> str:
    return digest_of(metadata.distributions(path=[str(site)]), python)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site-packages"
    install(site, "alpha", "1.0")
    install(site, "beta", "2.0")
    return site


def test_the_same_content_has_the_same_digest_wherever_it_lies(site: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    install(other, "beta", "2.0")  # installed in another order
    install(other, "alpha", "1.0")
    assert digest(site) == digest(other)
    assert len(digest(site)) == 16


def another_version(site: Path) -> None:
    meta = site / "alpha-1.0.dist-info" / "METADATA"
    meta.write_text(meta.read_text().replace("Version: 1.0", "Version: 1.1"))


def other_files(site: Path) -> None:
    (site / "beta-2.0.dist-info" / "RECORD").write_text("beta/__init__.py,sha256=xyz,1\n")


def one_more(site: Path) -> None:
    install(site, "gamma", "0.1")


@pytest.mark.parametrize("change", [another_version, other_files, one_more])
def test_a_changed_distribution_changes_the_digest(site: Path, change: Callable[[Path], None]) -> None:
    before = digest(site)
    change(site)
    assert digest(site) != before


def test_another_interpreter_changes_the_digest(site: Path) -> None:
    assert digest(site, "/opt/python3.11/bin/python3.11") != digest(site)


def test_an_editable_install_is_identified_by_its_source_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "src"
    package = source / "edited_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 1\n")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    monkeypatch.syspath_prepend(str(source))
    site = tmp_path / "site-packages"
    install(site, "edited-pkg", "0.1", editable_module="edited_pkg")
    dist = next(iter(metadata.distributions(path=[str(site)])))
    assert editable_sources(dist) == [package]

    before = digest(site)
    (package / "__pycache__" / "x.pyc").write_bytes(b"compiled again")  # not packed: no change
    assert digest(site) == before
    (package / "__init__.py").write_text("VALUE = 2\n")  # its RECORD is the same, its source is not
    assert digest(site) != before


def test_this_environment_has_a_digest() -> None:
    assert environment_digest() == environment_digest() and len(environment_digest()) == 16
