"""The entry-point cache: a hit skips the scan, and any change to what the scan reads is seen."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from torchspec import entry_points as eps


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of this test's own and a folder on sys.path to install distributions in."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TORCHSPEC_NO_CACHE", raising=False)
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def install(site: Path, dist: str, lines: str) -> Path:
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[torchspec.schedulers]\n{lines}")
    return info / "entry_points.txt"


def names(group: str = "torchspec.schedulers") -> dict[str, str]:
    return {ep.name: ep.value for ep in eps.entry_points(group)}


def test_a_hit_reads_the_cache_without_scanning(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = names()
    assert "local" in first and (site.parent / "cache" / "torchspec" / "entry-points.json").is_file()

    def no_scan() -> None:
        raise AssertionError("scanned although nothing changed")

    monkeypatch.setattr(eps, "_scan", no_scan)
    assert names() == first


def test_other_files_in_a_path_folder_do_not_scan_again(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = names()
    (site / "job.yaml").write_text("name: x\n")  # python -m torchspec puts the current folder on sys.path

    def no_scan() -> None:
        raise AssertionError("scanned although no distribution changed")

    monkeypatch.setattr(eps, "_scan", no_scan)
    assert names() == first


def test_a_new_distribution_is_seen(site: Path) -> None:
    assert "mine" not in names()
    install(site, "ts-mine", "mine = ts_mine:create_scheduler\n")
    assert names()["mine"] == "ts_mine:create_scheduler"
    assert next(ep for ep in eps.entry_points("torchspec.schedulers") if ep.name == "mine").dist == "ts-mine"


def test_an_entry_points_file_edited_in_place_is_seen(site: Path) -> None:
    path = install(site, "ts-mine", "mine = ts_mine:create_scheduler\n")
    assert names()["mine"] == "ts_mine:create_scheduler"
    path.write_text("[torchspec.schedulers]\nmine = ts_mine.v2:create_scheduler\n")
    assert names()["mine"] == "ts_mine.v2:create_scheduler"
    path.unlink()
    assert "mine" not in names()


def test_a_broken_cache_file_is_scanned_over(site: Path) -> None:
    cache = site.parent / "cache" / "torchspec" / "entry-points.json"
    cache.parent.mkdir(parents=True)
    cache.write_text("{not json")
    assert "local" in names()
    cache.write_text('{"x": 1}')
    assert "local" in names()


def test_only_torchspec_groups(site: Path) -> None:
    with pytest.raises(ValueError):
        eps.entry_points("console_scripts")


def test_load_follows_attributes(site: Path) -> None:
    ep = eps.EntryPoint("torchspec.schedulers", "x", "torchspec.specs:AppDef.__name__", "d")
    assert ep.load() == "AppDef" and ep.module == "torchspec.specs"
    assert sys.modules["torchspec.specs"]
