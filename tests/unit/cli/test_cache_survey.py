"""Cache survey and prune: stale and unfinished entries go, current finished ones stay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.builder.cache import Cache
from harness.cli import cachelist as images
from harness.process import tool_version


def make_entry(cache: Cache, kind: str, key: str, *, finished: bool, size: int = 10) -> Path:
    path = cache.root / kind / key
    path.mkdir(parents=True)
    (path / "blob").write_bytes(b"x" * size)
    (cache.root / kind / f"{key}.lock").touch()
    if finished:
        (path / "manifest.json").write_text(json.dumps({"key": key}))
    return path


def test_prune_keeps_only_current_finished_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = Cache(tmp_path)
    keep = make_entry(cache, "kernel", "current1", finished=True, size=100)
    stale = make_entry(cache, "kernel", "old1", finished=True)
    half = make_entry(cache, "rootfs", "current2", finished=False)
    monkeypatch.setattr(images, "current_keys", lambda _cache: {"current1", "current2"})

    survey = {item.entry.key: item for item in images.survey_cache(cache)}
    assert (survey["current1"].current, survey["current1"].finished) == (True, True)
    assert (survey["old1"].current, survey["current2"].finished) == (False, False)
    assert survey["current1"].size_bytes >= 100

    removed = images.prune_cache(cache)
    assert sorted(item.entry.key for item in removed) == ["current2", "old1"]
    assert keep.is_dir()
    assert not stale.exists()
    assert not half.exists()
    assert not (cache.root / "kernel" / "old1.lock").exists()
    text = images.format_listing(removed, cache.root, pruned=True)
    assert "2 entries" in text
    assert "freed" in text


@pytest.mark.parametrize(
    ("kernel", "qemu_version", "current"),
    [("current1", None, True), ("old1", None, False), ("current1", "QEMU 1.0", False)],
    ids=["its-images-are-current", "its-kernel-is-stale", "another-qemu"],
)
def test_a_snapshot_is_current_while_its_images_and_qemu_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel: str, qemu_version: str | None,
    current: bool,
) -> None:  # fmt: skip
    cache = Cache(tmp_path)
    entry = make_entry(cache, "snapshot", "snap1", finished=True)
    argv = ["true", "-kernel", str(tmp_path / "kernel" / kernel / "build" / "Image"),
            "-initrd", str(tmp_path / "rootfs" / "current2" / "rootfs.cpio")]  # fmt: skip
    manifest = {"key": "snap1", "argv": argv,
                "qemu_version": qemu_version or tool_version("true")}  # fmt: skip
    (entry / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(images, "current_keys", lambda _cache: {"current1", "current2"})
    (item,) = images.survey_cache(cache)
    assert item.current is current
