"""A developer's kernel tree: content identity (git index or walk), release, fitness checks."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.builder.cache import Cache
from harness.builder.kerneltree import (
    check_buildable,
    missing_options,
    tree_identity,
    tree_release,
    tree_version_text,
)
from harness.errors import ConfigError

MAKEFILE = "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 117\nEXTRAVERSION = -rc1\nNAME = x\n"
KCONFIG = "config PERF_EVENTS\n\tbool\nmenuconfig MODULES\n\tbool\n"
ARM64_KCONFIG = 'config ARM64_PSEUDO_NMI\n\tbool "NMI"\n'


def small_tree(root: Path) -> Path:
    (root / "arch/arm64").mkdir(parents=True)
    (root / "arch/x86").mkdir(parents=True)
    (root / "Makefile").write_text(MAKEFILE)
    (root / "Kconfig").write_text(KCONFIG)
    (root / "arch/arm64/Kconfig").write_text(ARM64_KCONFIG)
    (root / "arch/x86/Kconfig").write_text("config X86_ONLY\n\tbool\n")
    return root


def git(tree: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    subprocess.run(["git", "-C", str(tree), *args], check=True, env=env, capture_output=True)


def test_release_and_version_come_from_the_makefile(tmp_path: Path) -> None:
    tree = small_tree(tmp_path)
    assert tree_release(tree) == (6, 12)
    assert tree_version_text(tree) == "6.12.117-rc1"
    (tree / "Makefile").write_text("NAME = none\n")
    with pytest.raises(ConfigError, match="no VERSION"):
        tree_release(tree)


def test_a_missing_option_is_named_with_why_the_bench_needs_it(tmp_path: Path) -> None:
    tree = small_tree(tmp_path)
    wanted = [("CONFIG_PERF_EVENTS", "y"), ("CONFIG_MODULES", "y"),
              ("CONFIG_ARM64_PSEUDO_NMI", "y"), ("CONFIG_ARM_PMUV3", "y")]  # fmt: skip
    assert missing_options(tree, "arm64", wanted) == [
        f"CONFIG_ARM_PMUV3 is not defined in {tree}'s Kconfig: the arm64 PMUv3 driver "
        "(drivers/perf/arm_pmuv3.c), which the bench needs"
    ]
    (tree / "arch/arm64/Kconfig").write_text("")  # a tree from before pseudo-NMI (5.1)
    assert "pseudo-NMI" in missing_options(tree, "arm64", wanted)[0]
    # another arch's symbols do not count for this one
    assert missing_options(tree, "arm64", [("CONFIG_X86_ONLY", "y")]) != []
    assert missing_options(tree, "x86", [("CONFIG_X86_ONLY", "y")]) == []


def test_a_tree_with_in_tree_build_output_is_refused(tmp_path: Path) -> None:
    tree = small_tree(tmp_path)
    check_buildable(tree)
    (tree / ".config").write_text("CONFIG_X=y\n")
    with pytest.raises(ConfigError, match=r"\.config.*mrproper"):
        check_buildable(tree)


def test_a_walked_tree_changes_identity_on_an_edit_only(tmp_path: Path) -> None:
    tree, cache = small_tree(tmp_path / "t"), Cache(tmp_path / "cache")
    first = tree_identity(tree, cache)
    assert first.content.startswith("walk:")
    assert first.commit is None
    os.utime(tree / "Kconfig", ns=(1, 1))  # touched, same bytes: same identity
    assert tree_identity(tree, cache).content == first.content
    (tree / "Kconfig").write_text(KCONFIG + "# edit\n")
    edited = tree_identity(tree, cache)
    assert edited.content != first.content
    (tree / "Kconfig").write_text(KCONFIG)
    assert tree_identity(tree, cache).content == first.content
    (tree / "new.c").write_text("int x;\n")
    assert tree_identity(tree, cache).content != first.content


def test_a_same_size_edit_within_the_same_mtime_is_seen(tmp_path: Path) -> None:
    tree, cache = small_tree(tmp_path / "t"), Cache(tmp_path / "cache")
    first = tree_identity(tree, cache)
    stat = (tree / "Kconfig").stat()
    (tree / "Kconfig").write_text(KCONFIG.replace("MODULES", "MODULEZ"))
    os.utime(tree / "Kconfig", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    # same size, inode and mtime: only the ctime (which utime cannot set back) moved
    assert tree_identity(tree, cache).content != first.content


def test_a_git_tree_is_hashed_through_its_index(tmp_path: Path) -> None:
    tree, cache = small_tree(tmp_path / "g"), Cache(tmp_path / "cache")
    git(tree, "init", "-q")
    (tree / ".gitignore").write_text("*.o\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "c")
    index = (tree / ".git/index").read_bytes()
    clean = tree_identity(tree, cache)
    assert clean.content.startswith("git-tree:")
    assert clean.commit
    assert not clean.dirty
    (tree / "built.o").write_text("ignored build output")
    assert tree_identity(tree, cache).content == clean.content
    (tree / "Kconfig").write_text(KCONFIG + "# dirty\n")
    dirty = tree_identity(tree, cache)
    assert dirty.dirty
    assert dirty.content != clean.content
    assert dirty.commit == clean.commit
    (tree / "Kconfig").write_text(KCONFIG)
    (tree / "untracked.c").write_text("int y;\n")
    assert tree_identity(tree, cache).content not in (clean.content, dirty.content)
    (tree / "untracked.c").unlink()
    assert tree_identity(tree, cache).content == clean.content
    assert (tree / ".git/index").read_bytes() == index  # hashing left the real index alone
