from __future__ import annotations

import logging
import stat
from collections import Counter
from pathlib import Path, PurePosixPath

import pytest

from harness.builder import cpio
from harness.builder.debs import PinnedPackage
from harness.builder.keys import KeyPair
from harness.builder.rootfs import (
    _current_pins,
    assemble_members,
    collect_files,
    load_plan,
    resolve_in_tree,
)
from harness.errors import BuildError, ConfigError

ELF = b"\x7fELF\x02\x01\x01"


# --- packages.toml --------------------------------------------------------------------------


def test_load_plan_reads_the_real_package_list() -> None:
    plan = load_plan()
    assert {"busybox-static", "dropbear-bin", "libgmp10"} <= set(plan.packages)
    assert ("bin/busybox", "bin/busybox") in plan.programs


def test_load_plan_rejects_an_unknown_section(tmp_path: Path) -> None:
    path = tmp_path / "packages.toml"
    path.write_text('[packages]\nbusybox-static = "shell"\n\n[extras]\nfoo = "bar"\n')
    with pytest.raises(ConfigError, match=r"unknown section\(s\) \['extras'\]"):
        load_plan(path)


def test_load_plan_rejects_a_non_string_value(tmp_path: Path) -> None:
    path = tmp_path / "packages.toml"
    path.write_text('[programs]\n"bin/busybox" = 1\n')
    with pytest.raises(ConfigError, match="must be a string"):
        load_plan(path)


# --- resolving links inside the unpacked tree -----------------------------------------------


def put(tree: Path, rel: str, data: bytes) -> Path:
    path = tree / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def link(tree: Path, rel: str, target: str) -> None:
    path = tree / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def test_resolve_plain_file(tmp_path: Path) -> None:
    real = put(tmp_path, "bin/busybox", ELF)
    assert resolve_in_tree(tmp_path, "bin/busybox") == real


def test_resolve_relative_link_chain(tmp_path: Path) -> None:
    real = put(tmp_path, "lib/aarch64-linux-gnu/libz.so.1.2.13", ELF)
    link(tmp_path, "lib/aarch64-linux-gnu/libz.so.1", "libz.so.1.2.13")
    link(tmp_path, "usr/lib/libz.so", "../../lib/aarch64-linux-gnu/libz.so.1")
    assert resolve_in_tree(tmp_path, "usr/lib/libz.so") == real


def test_resolve_absolute_link_stays_in_the_tree(tmp_path: Path) -> None:
    # /etc/hostname exists on every host; the tree's own copy must be the one found.
    real = put(tmp_path, "etc/hostname", b"in-tree")
    link(tmp_path, "lib/x", "/etc/hostname")
    found = resolve_in_tree(tmp_path, "lib/x")
    assert (found, found.read_bytes() if found else None) == (real, b"in-tree")


def test_resolve_absolute_link_missing_in_tree_is_none(tmp_path: Path) -> None:
    link(tmp_path, "lib/x", "/etc/hostname")  # present on the host, absent in the tree
    assert resolve_in_tree(tmp_path, "lib/x") is None


def test_resolve_dangling_link_is_none(tmp_path: Path) -> None:
    link(tmp_path, "lib/libgone.so.1", "libgone.so.1.0")
    assert resolve_in_tree(tmp_path, "lib/libgone.so.1") is None


def test_resolve_missing_path_is_none(tmp_path: Path) -> None:
    assert resolve_in_tree(tmp_path, "usr/sbin/dropbear") is None


def test_resolve_link_loop_is_none(tmp_path: Path) -> None:
    link(tmp_path, "lib/a", "b")
    link(tmp_path, "lib/b", "a")
    assert resolve_in_tree(tmp_path, "lib/a") is None


def test_resolve_dotdot_link_cannot_climb_out_of_the_tree(tmp_path: Path) -> None:
    # As under chroot, ".." at the tree's root stays at the root.
    tree = tmp_path / "tree"
    real = put(tree, "etc/hostname", b"in-tree")
    link(tree, "lib/x", "../" * 40 + "etc/hostname")
    found = resolve_in_tree(tree, "lib/x")
    assert (found, found.read_bytes() if found else None) == (real, b"in-tree")


def test_resolve_through_an_absolute_directory_link(tmp_path: Path) -> None:
    # A merged-/usr tree: lib -> /usr/lib. The directory link is inside the tree too.
    real = put(tmp_path, "usr/lib/libprofbench-test.so.1", ELF)
    link(tmp_path, "lib", "/usr/lib")
    assert resolve_in_tree(tmp_path, "lib/libprofbench-test.so.1") == real


# --- collecting programs and their libraries ------------------------------------------------


class FakeElf:
    """An `ElfReader` answering from a table keyed by file name; records what it read."""

    def __init__(self, table: dict[str, tuple[str | None, tuple[str, ...]]]) -> None:
        self.table = table
        self.read: list[str] = []

    def __call__(self, path: Path) -> tuple[str | None, tuple[str, ...]]:
        self.read.append(path.name)
        return self.table[path.name]


LIBDIR = "lib/aarch64-linux-gnu"
LD = "/lib/ld-linux-aarch64.so.1"


def debian_like_tree(tree: Path) -> dict[str, bytes]:
    """Unpacked packages; returns the bytes of each real file by name."""
    contents = {
        "dropbear": ELF + b"dropbear",
        "busybox": ELF + b"busybox",
        "ld-linux-aarch64.so.1": ELF + b"ld",
        "libc.so.6": ELF + b"libc",
        "libz.so.1.2.13": ELF + b"zlib",
        "hello.sh": b"#!/bin/sh\necho hi\n",
    }
    put(tree, "usr/sbin/dropbear", contents["dropbear"])
    put(tree, "bin/busybox", contents["busybox"])
    put(tree, "usr/bin/hello.sh", contents["hello.sh"])
    put(tree, f"{LIBDIR}/ld-linux-aarch64.so.1", contents["ld-linux-aarch64.so.1"])
    link(tree, "lib/ld-linux-aarch64.so.1", f"/{LIBDIR}/ld-linux-aarch64.so.1")
    put(tree, f"{LIBDIR}/libc.so.6", contents["libc.so.6"])
    put(tree, f"{LIBDIR}/libz.so.1.2.13", contents["libz.so.1.2.13"])
    link(tree, f"{LIBDIR}/libz.so.1", "libz.so.1.2.13")
    put(tree, f"{LIBDIR}/libunused.so.3", ELF + b"unused")
    return contents


ELF_TABLE: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "dropbear": (LD, ("libz.so.1", "libc.so.6")),
    "busybox": (None, ()),
    "libz.so.1.2.13": (None, ("libc.so.6",)),
    "libc.so.6": (LD, ("ld-linux-aarch64.so.1",)),
    "ld-linux-aarch64.so.1": (None, ()),
}


def test_collect_files_follows_interpreter_and_needed_transitively(tmp_path: Path) -> None:
    contents = debian_like_tree(tmp_path)
    reader = FakeElf(ELF_TABLE)
    files = collect_files(
        tmp_path, ["usr/sbin/dropbear", "bin/busybox", "usr/bin/hello.sh"], reader
    )
    assert files == {
        "usr/sbin/dropbear": contents["dropbear"],
        "bin/busybox": contents["busybox"],
        "usr/bin/hello.sh": contents["hello.sh"],
        "lib/ld-linux-aarch64.so.1": contents["ld-linux-aarch64.so.1"],
        f"{LIBDIR}/ld-linux-aarch64.so.1": contents["ld-linux-aarch64.so.1"],
        f"{LIBDIR}/libc.so.6": contents["libc.so.6"],
        f"{LIBDIR}/libz.so.1": contents["libz.so.1.2.13"],
    }
    assert "hello.sh" not in reader.read  # not ELF: never handed to readelf


def test_collect_files_missing_library_names_the_soname(tmp_path: Path) -> None:
    debian_like_tree(tmp_path)
    table = {**ELF_TABLE, "dropbear": (LD, ("libz.so.1", "libtomcrypt.so.1"))}
    with pytest.raises(BuildError, match=r"usr/sbin/dropbear needs libtomcrypt\.so\.1"):
        collect_files(tmp_path, ["usr/sbin/dropbear"], FakeElf(table))


def test_collect_files_missing_program(tmp_path: Path) -> None:
    debian_like_tree(tmp_path)
    with pytest.raises(BuildError, match="usr/lib/openssh/sftp-server is not in the unpacked"):
        collect_files(tmp_path, ["usr/lib/openssh/sftp-server"], FakeElf(ELF_TABLE))


# --- assembling the image -------------------------------------------------------------------

KEYPAIR = KeyPair(private_key=Path("/k"), public_line="ssh-ed25519 AAAA test")


def assemble() -> list[cpio.CpioMember]:
    return assemble_members(
        {"bin/busybox": ELF + b"busybox", "usr/lib/openssh/sftp-server": ELF + b"sftp"},
        links=[("usr/lib/sftp-server", "openssh/sftp-server")],
        keypair=KEYPAIR,
        programs={"bin/busybox", "usr/lib/openssh/sftp-server"},
    )


@pytest.fixture(scope="module")
def members() -> dict[str, cpio.CpioMember]:
    return {m.path: m for m in assemble()}


def test_every_path_appears_once() -> None:
    counts = Counter(m.path for m in assemble())
    assert [path for path, n in counts.items() if n > 1] == []


def test_init_is_an_executable_generated_script(members: dict[str, cpio.CpioMember]) -> None:
    init = members["init"]
    text = init.data.decode()
    assert (stat.S_ISREG(init.mode), stat.S_IMODE(init.mode)) == (True, 0o755)
    assert text.startswith("#!/bin/busybox sh\n")
    assert "Generated by" in text
    assert "do not edit" in text


def test_inittab_starts_dropbear(members: dict[str, cpio.CpioMember]) -> None:
    assert b"dropbear" in members["etc/inittab"].data


def test_authorized_keys(members: dict[str, cpio.CpioMember]) -> None:
    keys = members["root/.ssh/authorized_keys"]
    assert (keys.data, stat.S_IMODE(keys.mode)) == (b"ssh-ed25519 AAAA test\n", 0o600)


def test_dev_console_is_char_device_5_1(members: dict[str, cpio.CpioMember]) -> None:
    console = members["dev/console"]
    assert (stat.S_ISCHR(console.mode), console.rdev_major, console.rdev_minor) == (True, 5, 1)


def test_every_parent_directory_is_present(members: dict[str, cpio.CpioMember]) -> None:
    missing = sorted(
        {
            str(parent)
            for path in members
            for parent in PurePosixPath(path).parents
            if str(parent) != "."
            and not (str(parent) in members and stat.S_ISDIR(members[str(parent)].mode))
        }
    )
    assert missing == []


def test_private_directories(members: dict[str, cpio.CpioMember]) -> None:
    modes = {d: stat.S_IMODE(members[d].mode) for d in ("root", "root/.ssh", "etc/dropbear")}
    assert modes == {"root": 0o700, "root/.ssh": 0o700, "etc/dropbear": 0o700}


def test_programs_are_executable_and_links_kept(members: dict[str, cpio.CpioMember]) -> None:
    sftp_link = members["usr/lib/sftp-server"]
    assert stat.S_IMODE(members["bin/busybox"].mode) == 0o755
    assert (stat.S_ISLNK(sftp_link.mode), sftp_link.data) == (True, b"openssh/sftp-server")


def test_members_make_a_valid_archive(members: dict[str, cpio.CpioMember]) -> None:
    back = cpio.read_newc(cpio.write_newc(members.values()))
    assert {m.path for m in back} == set(members)


class _ServedApt:
    """Debian's lists as a fresh machine sees them after a point release of linux-perf."""

    def has_version(self, name: str, version: str) -> bool:
        return (name, version) != ("linux-perf", "6.1.192-2")

    def show(self, name: str, version: str | None = None) -> PinnedPackage:
        return PinnedPackage(name, "6.1.192-3", "ab" * 32)


def test_a_point_release_is_recorded_not_warned(caplog: pytest.LogCaptureFixture) -> None:
    locked = [PinnedPackage("busybox-static", "1:1.35.0-4", "cd" * 32),
              PinnedPackage("linux-perf", "6.1.192-2", "ef" * 32)]  # fmt: skip
    with caplog.at_level(logging.INFO):
        pins, drift = _current_pins(_ServedApt(), locked, strict=False)  # type: ignore[arg-type]
    assert [p.version for p in pins] == ["1:1.35.0-4", "6.1.192-3"]
    assert drift == ["linux-perf: locked 6.1.192-2, Debian now serves 6.1.192-3"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # issue 47
    assert any("recorded in the rootfs manifest" in r.getMessage() for r in caplog.records)


def test_a_strict_build_still_refuses_it_with_the_fix() -> None:
    locked = [PinnedPackage("linux-perf", "6.1.192-2", "ef" * 32)]
    with pytest.raises(BuildError, match="invoke rootfs --relock"):
        _current_pins(_ServedApt(), locked, strict=True)  # type: ignore[arg-type]
