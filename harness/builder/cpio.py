"""A deterministic ``newc`` cpio writer for initramfs images (pure, no I/O).

The kernel unpacks the "new ASCII" format (magic ``070701``). Determinism comes
from the input being a sorted list of `CpioMember` values with owner 0:0,
a fixed mtime and inode numbers assigned in order; gzip is written with
``mtime=0`` and no file name. Same members in, same bytes out::

    members = [directory("dev"), char_device("dev/console", 5, 1), file("init", b"...", 0o755)]
    blob = gzip_deterministic(write_newc(members))

Why not the kernel's ``usr/gen_init_cpio``: it would tie the rootfs to a built
kernel tree and a text spec; 60 lines of Python are easier to test.
"""

from __future__ import annotations

import gzip
import io
import stat
from collections.abc import Iterable
from dataclasses import dataclass

_MAGIC = b"070701"
_TRAILER = "TRAILER!!!"


@dataclass(frozen=True, slots=True)
class CpioMember:
    """One archive entry; ``path`` is relative (no leading slash)."""

    path: str
    mode: int  # full st_mode, type bits included
    data: bytes = b""
    rdev_major: int = 0
    rdev_minor: int = 0


def directory(path: str, perm: int = 0o755) -> CpioMember:
    """A directory entry."""
    return CpioMember(path, stat.S_IFDIR | perm)


def file(path: str, data: bytes, perm: int = 0o644) -> CpioMember:
    """A regular file."""
    return CpioMember(path, stat.S_IFREG | perm, data)


def symlink(path: str, target: str) -> CpioMember:
    """A symbolic link to ``target``."""
    return CpioMember(path, stat.S_IFLNK | 0o777, target.encode())


def char_device(path: str, major: int, minor: int, perm: int = 0o600) -> CpioMember:
    """A character device node."""
    return CpioMember(path, stat.S_IFCHR | perm, b"", major, minor)


def write_newc(members: Iterable[CpioMember], *, mtime: int = 0) -> bytes:
    """Serialise ``members`` (sorted by path, parents first) into a newc archive.

    :raise ValueError: a path appears twice or is absolute.
    """
    ordered = sorted(members, key=lambda m: m.path)
    out = io.BytesIO()
    seen: set[str] = set()
    for ino, member in enumerate(ordered, start=1):
        if member.path in seen or member.path.startswith("/") or not member.path:
            raise ValueError(f"bad or duplicate cpio path {member.path!r}")
        seen.add(member.path)
        _write_entry(out, member, ino=ino, mtime=mtime)
    _write_entry(out, CpioMember(_TRAILER, 0), ino=0, mtime=0)
    _pad(out, 512)  # the kernel does not need it, but cpio(1) tools expect block padding
    return out.getvalue()


def _write_entry(out: io.BytesIO, member: CpioMember, *, ino: int, mtime: int) -> None:
    name = member.path.encode() + b"\0"
    nlink = 2 if stat.S_ISDIR(member.mode) else 1
    fields = (
        ino,
        member.mode,
        0,  # uid
        0,  # gid
        nlink,
        mtime,
        len(member.data),
        0,  # dev major
        0,  # dev minor
        member.rdev_major,
        member.rdev_minor,
        len(name),
        0,  # check
    )
    out.write(_MAGIC + b"".join(b"%08X" % value for value in fields))
    out.write(name)
    _pad(out, 4)
    out.write(member.data)
    _pad(out, 4)


def _pad(out: io.BytesIO, align: int) -> None:
    out.write(b"\0" * (-out.tell() % align))


def gzip_deterministic(data: bytes, level: int = 6) -> bytes:
    """Gzip ``data`` with no timestamp or file name, so equal input gives equal output."""
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=level, mtime=0) as gz:
        gz.write(data)
    return out.getvalue()


def read_newc(blob: bytes) -> list[CpioMember]:
    """Parse a newc archive back into members (for tests and inspection)."""
    members: list[CpioMember] = []
    offset = 0
    while True:
        if blob[offset : offset + 6] != _MAGIC:
            raise ValueError(f"bad cpio magic at offset {offset}")
        header = blob[offset + 6 : offset + 110]
        values = [int(header[i * 8 : i * 8 + 8], 16) for i in range(13)]
        mode, size, rmaj, rmin, namesize = values[1], values[6], values[9], values[10], values[11]
        name_start = offset + 110
        name = blob[name_start : name_start + namesize - 1].decode()
        data_start = name_start + namesize + (-(110 + namesize) % 4)
        data = blob[data_start : data_start + size]
        offset = data_start + size + (-size % 4)
        if name == _TRAILER:
            return members
        members.append(CpioMember(name, mode, data, rmaj, rmin))
