from __future__ import annotations

import gzip
import stat

import pytest

from harness.builder.cpio import (
    CpioMember,
    char_device,
    directory,
    file,
    gzip_deterministic,
    read_newc,
    symlink,
    write_newc,
)

HEADER_LEN = 110  # "070701" + 13 fields of 8 hex digits

MEMBERS = [
    directory("bin"),
    file("bin/busybox", b"\x7fELF" + bytes(range(37)), 0o755),
    directory("dev"),
    char_device("dev/console", 5, 1),
    char_device("dev/null", 1, 3, 0o666),
    symlink("bin/sh", "busybox"),
    file("init", b"#!/bin/busybox sh\n", 0o755),
    file("etc/a-long-name-of-odd-length", b"xyz"),
]


def walk_headers(blob: bytes) -> list[tuple[int, str]]:
    """(offset, name) of every entry, walked independently of read_newc."""
    entries = []
    offset = 0
    while True:
        fields = [int(blob[offset + 6 + 8 * i : offset + 14 + 8 * i], 16) for i in range(13)]
        size, namesize = fields[6], fields[11]
        name = blob[offset + HEADER_LEN : offset + HEADER_LEN + namesize - 1].decode()
        entries.append((offset, name))
        if name == "TRAILER!!!":
            return entries
        data_at = offset + HEADER_LEN + namesize
        data_at += -data_at % 4
        offset = data_at + size + (-(data_at + size) % 4)


def test_same_members_in_any_order_give_identical_bytes() -> None:
    assert write_newc(MEMBERS) == write_newc(list(reversed(MEMBERS)))


def test_round_trip_keeps_paths_modes_data_and_devices() -> None:
    back = read_newc(write_newc(MEMBERS))
    assert back == sorted(MEMBERS, key=lambda m: m.path)


def test_round_trip_of_device_numbers() -> None:
    (console,) = read_newc(write_newc([char_device("dev/console", 5, 1)]))
    assert (stat.S_ISCHR(console.mode), console.rdev_major, console.rdev_minor) == (True, 5, 1)


def test_every_header_is_4_byte_aligned_and_has_the_magic() -> None:
    blob = write_newc(MEMBERS)
    entries = walk_headers(blob)
    bad = [
        (offset, name)
        for offset, name in entries
        if offset % 4 or blob[offset : offset + 6] != b"070701"
    ]
    assert (len(entries), bad) == (len(MEMBERS) + 1, [])


def test_archive_ends_with_trailer_and_block_padding() -> None:
    blob = write_newc(MEMBERS)
    last_offset, last_name = walk_headers(blob)[-1]
    assert last_name == "TRAILER!!!"
    assert len(blob) % 512 == 0
    assert blob[last_offset + HEADER_LEN + len("TRAILER!!!\0") :].strip(b"\0") == b""


@pytest.mark.parametrize(
    "members",
    [
        [file("init", b"a"), file("init", b"b")],
        [file("/init", b"a")],
        [file("", b"a")],
    ],
    ids=["duplicate", "absolute", "empty"],
)
def test_rejects_bad_paths(members: list[CpioMember]) -> None:
    with pytest.raises(ValueError, match="bad or duplicate cpio path"):
        write_newc(members)


def test_header_fields_of_one_small_member_by_hand() -> None:
    blob = write_newc([file("a", b"hi", 0o644)])
    expected = (
        b"070701"
        b"00000001"  # ino
        b"000081A4"  # mode: S_IFREG | 0644
        b"00000000"  # uid
        b"00000000"  # gid
        b"00000001"  # nlink
        b"00000000"  # mtime
        b"00000002"  # filesize
        b"00000000"  # devmajor
        b"00000000"  # devminor
        b"00000000"  # rdevmajor
        b"00000000"  # rdevminor
        b"00000002"  # namesize, NUL included
        b"00000000"  # check
        b"a\0"  # 110 + 2 = 112: already aligned
        b"hi\0\0"  # data padded to 4
    )
    assert blob[: len(expected)] == expected
    assert blob[len(expected) : len(expected) + 6] == b"070701"  # the trailer follows


def test_gzip_is_deterministic_and_decompresses_to_input() -> None:
    data = write_newc(MEMBERS)
    first, second = gzip_deterministic(data), gzip_deterministic(data)
    assert first == second
    assert gzip.decompress(first) == data


def test_gzip_header_has_no_mtime_and_no_name() -> None:
    header = gzip_deterministic(b"payload")[:10]
    # RFC 1952: ID1 ID2 CM FLG MTIME(4) XFL OS; FLG bit 3 (FNAME) must be clear.
    assert (header[:3], header[3] & 0x08, header[4:8]) == (b"\x1f\x8b\x08", 0, bytes(4))
