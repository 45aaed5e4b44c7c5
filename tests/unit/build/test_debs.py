from __future__ import annotations

from harness.builder.debs import PinnedPackage, deb_file_name, parse_readelf

# `readelf -W -l -d usr/sbin/dropbear` from an arm64 Debian package (abridged by hand).
DYNAMIC = """
Elf file type is DYN (Position-Independent Executable file)
Entry point 0x1a340
There are 9 program headers, starting at offset 64

Program Headers:
  Type           Offset   VirtAddr           PhysAddr           FileSiz  MemSiz   Flg Align
  PHDR           0x000040 0x0000000000000040 0x0000000000000040 0x0001f8 0x0001f8 R   0x8
  INTERP         0x000238 0x0000000000000238 0x0000000000000238 0x00001b 0x00001b R   0x1
      [Requesting program interpreter: /lib/ld-linux-aarch64.so.1]
  LOAD           0x000000 0x0000000000000000 0x0000000000000000 0x05e7d4 0x05e7d4 R E 0x10000
  LOAD           0x06d9a8 0x000000000007d9a8 0x000000000007d9a8 0x002a80 0x0057c8 RW  0x10000
  DYNAMIC        0x06dc48 0x000000000007dc48 0x000000000007dc48 0x0001f0 0x0001f0 RW  0x8
  GNU_STACK      0x000000 0x0000000000000000 0x0000000000000000 0x000000 0x000000 RW  0x10

 Section to Segment mapping:
  Segment Sections...
   00
   01     .interp
   02     .interp .note.gnu.build-id .dynsym .dynstr .rela.dyn .text .rodata

Dynamic section at offset 0x6dc48 contains 31 entries:
  Tag        Type                         Name/Value
 0x0000000000000001 (NEEDED)             Shared library: [libz.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libcrypt.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libtomcrypt.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libtommath.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]
 0x000000000000000c (INIT)               0x17c40
 0x000000000000000d (FINI)               0x4e2a0
 0x000000000000001e (FLAGS)              BIND_NOW
 0x000000006ffffffb (FLAGS_1)            Flags: NOW PIE
 0x0000000000000000 (NULL)               0x0
"""

# `readelf -W -l -d bin/busybox` from busybox-static (abridged by hand).
STATIC = """
Elf file type is EXEC (Executable file)
Entry point 0x4002c0
There are 6 program headers, starting at offset 64

Program Headers:
  Type           Offset   VirtAddr           PhysAddr           FileSiz  MemSiz   Flg Align
  LOAD           0x000000 0x0000000000400000 0x0000000000400000 0x1a9c3c 0x1a9c3c R E 0x10000
  LOAD           0x1affb8 0x00000000005bffb8 0x00000000005bffb8 0x004cf8 0x00a4b0 RW  0x10000
  NOTE           0x000190 0x0000000000400190 0x0000000000400190 0x000044 0x000044 R   0x4
  TLS            0x1affb8 0x00000000005bffb8 0x00000000005bffb8 0x000018 0x000058 R   0x8
  GNU_STACK      0x000000 0x0000000000000000 0x0000000000000000 0x000000 0x000000 RW  0x10
  GNU_RELRO      0x1affb8 0x00000000005bffb8 0x00000000005bffb8 0x004048 0x004048 R   0x1

 Section to Segment mapping:
  Segment Sections...
   00     .note.gnu.build-id .note.ABI-tag .rela.plt .init .plt .text .fini .rodata
   01     .tdata .init_array .fini_array .data.rel.ro .got .got.plt .data .bss

There is no dynamic section in this file.
"""


def test_dynamic_executable() -> None:
    assert parse_readelf(DYNAMIC) == (
        "/lib/ld-linux-aarch64.so.1",
        ("libz.so.1", "libcrypt.so.1", "libtomcrypt.so.1", "libtommath.so.1", "libc.so.6"),
    )


def test_static_executable() -> None:
    assert parse_readelf(STATIC) == (None, ())


def test_shared_library_has_needed_but_no_interpreter() -> None:
    text = DYNAMIC.replace(
        "      [Requesting program interpreter: /lib/ld-linux-aarch64.so.1]\n", ""
    )
    assert parse_readelf(text) == (
        None,
        ("libz.so.1", "libcrypt.so.1", "libtomcrypt.so.1", "libtommath.so.1", "libc.so.6"),
    )


def test_deb_file_name_spells_the_epoch_as_apt_does() -> None:
    pkg = PinnedPackage("busybox-static", "1:1.35.0-4+deb12u1+b1", "0" * 64)
    assert deb_file_name(pkg, "arm64") == "busybox-static_1%3a1.35.0-4+deb12u1+b1_arm64.deb"
