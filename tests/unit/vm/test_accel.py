from __future__ import annotations

import os
import platform
import struct
from pathlib import Path
from typing import NoReturn

import pytest

from harness import arches
from harness.builder.cache import Cache
from harness.errors import ConfigError
from harness.vm import accel
from harness.vm.accel import choose_accel, kvm_probe

ARM64 = arches.get("arm64")
X86_64 = arches.get("x86_64")


def no_boot(*args: object) -> NoReturn:
    pytest.fail("the KVM probe must not boot QEMU here")


@pytest.fixture
def cache(tmp_path: Path) -> Cache:
    return Cache(tmp_path / "cache")


@pytest.fixture
def x86_host_with_kvm_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """An x86_64 host whose /dev/kvm exists; QEMU only answers --version."""
    real_exists = os.path.exists
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(os.path, "exists", lambda p: p == "/dev/kvm" or real_exists(p))
    monkeypatch.setattr(accel, "tool_version", lambda binary: "QEMU emulator version 7.2.0")
    monkeypatch.setattr(accel, "boot_probe", no_boot)


def test_tcg_requested(cache: Cache) -> None:
    assert choose_accel(ARM64, "tcg", cache) == ("tcg", "requested")


def test_unknown_accelerator(cache: Cache) -> None:
    with pytest.raises(ConfigError, match="unknown accelerator 'hvf'"):
        choose_accel(ARM64, "hvf", cache)


def test_arm64_on_x86_host_falls_back_to_tcg(cache: Cache, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(accel, "boot_probe", no_boot)
    chosen, reason = choose_accel(ARM64, "auto", cache)
    assert (chosen, reason) == ("tcg", "a x86_64 host cannot run arm64 guests under KVM")


def test_kvm_demanded_where_impossible(cache: Cache, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(accel, "boot_probe", no_boot)
    with pytest.raises(ConfigError, match="--accel kvm is not usable: a x86_64 host cannot"):
        choose_accel(ARM64, "kvm", cache)


def test_no_dev_kvm(cache: Cache, monkeypatch: pytest.MonkeyPatch) -> None:
    real_exists = os.path.exists
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(os.path, "exists", lambda p: p != "/dev/kvm" and real_exists(p))
    monkeypatch.setattr(accel, "boot_probe", no_boot)
    assert choose_accel(X86_64, "auto", cache) == ("tcg", "/dev/kvm does not exist")


@pytest.mark.usefixtures("x86_host_with_kvm_device")
def test_cached_failed_probe_gives_tcg_without_booting(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(accel, "boot_probe", lambda *_: (False, "x"))
    assert kvm_probe(X86_64, cache) == (False, "x")
    monkeypatch.setattr(accel, "boot_probe", no_boot)
    assert choose_accel(X86_64, "auto", cache) == ("tcg", "x (cached probe)")
    assert len(list((cache.root / "probes").glob("kvm-*.json"))) == 1


@pytest.mark.usefixtures("x86_host_with_kvm_device")
def test_cached_failed_probe_refuses_demanded_kvm(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(accel, "boot_probe", lambda *_: (False, "no output"))
    kvm_probe(X86_64, cache)
    monkeypatch.setattr(accel, "boot_probe", no_boot)
    with pytest.raises(ConfigError, match=r"not usable: no output \(cached probe\)"):
        choose_accel(X86_64, "kvm", cache)


@pytest.mark.usefixtures("x86_host_with_kvm_device")
def test_working_probe_chooses_kvm(cache: Cache, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accel, "boot_probe", lambda *_: (True, "booted"))
    assert choose_accel(X86_64, "auto", cache) == ("kvm", "booted")


def test_x86_probe_is_a_valid_multiboot_image() -> None:
    # Multiboot 1: magic, flags, checksum with magic + flags + checksum == 0 (mod 2**32);
    # flags bit 16 says the address fields follow; entry right after the 32-byte header.
    image = arches.get("x86_64").probe_kernel
    magic, flags, checksum, header, load, _load_end, _bss_end, entry = struct.unpack_from(
        "<8I", image
    )
    assert (magic, flags & 0x10000) == (0x1BADB002, 0x10000)
    assert (magic + flags + checksum) % 2**32 == 0
    assert (header, load, entry) == (0x100000, 0x100000, 0x100020)
    assert b"\xee" in image[32:]  # an `out dx, al` to the serial port


def test_arm64_probe_is_a_valid_linux_image() -> None:
    # arm64 boot protocol: branch at 0, image_size at 16, "ARM\x64" magic at 56.
    image = arches.get("arm64").probe_kernel
    (branch,) = struct.unpack_from("<I", image, 0)
    (size,) = struct.unpack_from("<Q", image, 16)
    assert image[56:60] == b"ARM\x64"
    assert size == len(image)
    assert branch == 0x14000000 | (64 // 4)  # b to the first instruction after the header
