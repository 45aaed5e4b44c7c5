from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.builder.cache import Cache, content_key
from harness.paths import REPO_ROOT


def test_content_key_ignores_key_order_at_every_level() -> None:
    one = {"arch": "arm64", "lock": {"a": 1, "b": [1, 2]}, "recipe": 1}
    two = {"recipe": 1, "lock": {"b": [1, 2], "a": 1}, "arch": "arm64"}
    assert content_key(one) == content_key(two)


def test_content_key_changes_with_content() -> None:
    keys = {
        content_key({"arch": "arm64"}),
        content_key({"arch": "amd64"}),
        content_key({"arch": "arm64", "variant": "debug"}),
        content_key({"lock": [1, 2]}),
        content_key({"lock": [2, 1]}),
    }
    assert len(keys) == 5


def test_content_key_is_short_hex() -> None:
    key = content_key({"x": 1})
    assert (len(key), set(key) <= set("0123456789abcdef")) == (24, True)


def test_content_key_is_stable_across_processes() -> None:
    parts = {"kernel": "6.1", "fragments": ["base.config", "debug.config"], "n": 3}
    code = f"from harness.builder.cache import content_key; print(content_key({parts!r}))"
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345"},
        cwd=REPO_ROOT,
    ).stdout.strip()
    assert other == content_key(parts)


class CountingBuilder:
    """A builder that writes one file and records how often it ran."""

    def __init__(self) -> None:
        self.calls: list[Path] = []

    def __call__(self, path: Path) -> dict[str, object]:
        self.calls.append(path)
        (path / "out.txt").write_text("built")
        return {"files": 1, "arch": "arm64"}


def test_obtain_builds_once_and_writes_the_manifest(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    entry = cache.entry("rootfs", "k1")
    builder = CountingBuilder()
    before = time.time()
    cache.obtain(entry, builder)
    cache.obtain(cache.entry("rootfs", "k1"), builder)
    manifest = entry.manifest
    assert builder.calls == [tmp_path / "rootfs" / "k1"]
    assert {k: manifest[k] for k in ("kind", "key", "files", "arch")} == {
        "kind": "rootfs",
        "key": "k1",
        "files": 1,
        "arch": "arm64",
    }
    assert before <= manifest["built_at"] <= time.time()
    assert (entry.path / "out.txt").read_text() == "built"


def test_manifest_is_valid_json_on_disk(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    entry = cache.obtain(cache.entry("kernel", "k2"), CountingBuilder())
    assert json.loads(entry.manifest_path.read_text())["kind"] == "kernel"


def test_failing_builder_leaves_no_directory(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    entry = cache.entry("kernel", "k3")

    def fail(path: Path) -> dict[str, object]:
        (path / "half-built").write_text("x")
        raise RuntimeError("make failed")

    with pytest.raises(RuntimeError, match="make failed"):
        cache.obtain(entry, fail)
    assert not entry.path.exists()


def test_interrupted_builder_leaves_no_directory(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    entry = cache.entry("kernel", "k4")

    def interrupted(path: Path) -> dict[str, object]:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cache.obtain(entry, interrupted)
    assert not entry.path.exists()


def test_directory_without_manifest_is_discarded_and_rebuilt(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    entry = cache.entry("kernel", "k5")
    entry.path.mkdir(parents=True)
    (entry.path / "stale.o").write_text("from a killed build")
    builder = CountingBuilder()
    cache.obtain(entry, builder)
    assert (len(builder.calls), sorted(p.name for p in entry.path.iterdir())) == (
        1,
        ["manifest.json", "out.txt"],
    )


def test_default_honours_profbench_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFBENCH_CACHE", str(tmp_path / "cache"))
    assert Cache.default().root == (tmp_path / "cache").resolve()


def test_default_falls_back_to_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROFBENCH_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert Cache.default().root == tmp_path / "profbench"
