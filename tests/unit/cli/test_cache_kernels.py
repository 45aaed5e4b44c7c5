"""``invoke cache`` and kernels from developers' trees."""

from __future__ import annotations

import json
from pathlib import Path

from harness.builder.cache import Cache
from harness.cli.cachelist import _tree_kernel_current


def test_a_tree_kernel_stays_current_while_its_tree_exists(tmp_path: Path) -> None:
    cache, tree = Cache(tmp_path / "cache"), tmp_path / "linux"
    entry = cache.entry("kernel", "k")
    entry.path.mkdir(parents=True)
    entry.manifest_path.write_text(json.dumps({"tree": str(tree), "version": "6.12.117"}))
    assert not _tree_kernel_current(entry)
    tree.mkdir()
    assert _tree_kernel_current(entry)
    entry.manifest_path.write_text(json.dumps({"package": "linux-source-6.1"}))
    assert not _tree_kernel_current(entry)  # Debian's kernels are current by key only
