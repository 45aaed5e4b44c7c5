"""The kernel axes as data: versions and variants, their fragments, keys and names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest

from harness import arches
from harness.builder import kernel as kernelmod
from harness.builder.cache import Cache
from harness.builder.images import BootFiles, GuestImages, kernel_identity, kernel_name, publish
from harness.builder.kernel import KCONFIG_DIR, KernelChoice, KernelRequest, kernel_key
from harness.builder.kernels import (
    VARIANT_FRAGMENTS,
    VARIANT_MAKE_VARS,
    VERSION_FRAGMENTS,
    VERSIONS,
    Variant,
    fragment_names,
    get_version,
)
from harness.builder.kernelsteps import expected_steps, past_builds
from harness.cli.session import parse_kernel
from harness.errors import ConfigError

ARM64, X86 = arches.get("arm64"), arches.get("x86_64")


def test_every_variant_is_in_the_table_and_its_fragments_exist() -> None:
    assert set(get_args(Variant)) == set(VARIANT_FRAGMENTS)
    for names in VARIANT_FRAGMENTS.values():
        assert all((KCONFIG_DIR / name).is_file() for name in names)


def test_every_version_fragment_exists_and_names_an_arch() -> None:
    for fragment in VERSION_FRAGMENTS:
        assert fragment.arch in arches.ARCHES
        assert (KCONFIG_DIR / fragment.name).is_file(), fragment.name


def test_612_adds_the_pmuv3_driver_on_arm64_only_and_before_the_variant() -> None:
    v612 = get_version("6.12").release
    assert fragment_names(ARM64, "debug", v612) == (
        "base.config", "arm64/arch.config", "arm64/pmu-nmi.config", "arm64/pmu-6.12.config",
        "debug.config")  # fmt: skip
    assert "CONFIG_ARM_PMUV3=y" in (KCONFIG_DIR / "arm64/pmu-6.12.config").read_text()
    assert fragment_names(X86, "default", v612) == fragment_names(X86, "default", (6, 1))
    assert "arm64/pmu-6.12.config" not in fragment_names(ARM64, "default", (6, 1))
    assert "arm64/pmu-6.12.config" in fragment_names(ARM64, "default", (6, 4))  # a 6.4 tree


def test_an_unknown_version_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"'6\.6'.*6\.1, 6\.12"):
        get_version("6.6")


def test_the_key_follows_the_source_package_and_the_version_fragments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kernelmod, "capture", lambda argv: "aarch64-linux-gnu-gcc 12.2.0\n")
    installed = {"linux-source-6.1": "6.1.192-2", "linux-source-6.12": "6.12.117-1~deb12u1"}
    monkeypatch.setattr(kernelmod, "package_version", installed.__getitem__)
    keys = {v: kernel_key(KernelRequest(arch=ARM64, kernel=KernelChoice(v))) for v in VERSIONS}
    assert len(set(keys.values())) == len(VERSIONS)
    installed["linux-source-6.12"] = "6.12.118-1"  # a Debian update rebuilds 6.12 only
    assert kernel_key(KernelRequest(arch=ARM64, kernel=KernelChoice("6.12"))) != keys["6.12"]
    assert kernel_key(KernelRequest(arch=ARM64)) == keys["6.1"]


def test_kcsan_instruments_the_agent_and_not_the_kernel_and_its_key_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kernelmod, "capture", lambda argv: "aarch64-linux-gnu-gcc 12.2.0\n")
    monkeypatch.setattr(kernelmod, "package_version", lambda package: "6.1.192-2")
    make = {v: kernelmod._make(KernelRequest(arch=ARM64, variant=v), Path("s"), Path("b"))
            for v in get_args(Variant)}  # fmt: skip
    assert make["kcsan"][-1] == "KCSAN_SANITIZE=n"  # overrides every directory's choice
    assert make["default"] == make["debug"] == make["kcsan"][:-1]
    key = kernel_key(KernelRequest(arch=ARM64, variant="kcsan"))
    monkeypatch.setitem(VARIANT_MAKE_VARS, "kcsan", ())
    assert kernel_key(KernelRequest(arch=ARM64, variant="kcsan")) != key


def test_reports_name_the_kernel_and_its_origin() -> None:
    version, origin = kernel_identity({"version": "6.12", "package": "linux-source-6.12",
                                       "source": "6.12.117-1~deb12u1"})  # fmt: skip
    assert kernel_name(version, origin) == "6.12 (linux-source-6.12 6.12.117-1~deb12u1)"
    older = kernel_identity({"source": "6.1.192-2"})  # manifests from before the version axis
    assert kernel_name(*older) == "6.1 (linux-source-6.1 6.1.192-2)"
    tree = kernel_identity({"version": "6.12.117", "tree": "/src/linux", "content": "ab12"})
    assert kernel_name(*tree) == "6.12.117 (tree /src/linux at content ab12)"
    commit = kernel_identity({"version": "6.13.0", "tree": "/l", "commit": "deadbeef"})
    assert kernel_name(*commit) == "6.13.0 (tree /l at deadbeef)"


def test_kernel_options_parse_to_a_choice(tmp_path: Path) -> None:
    assert parse_kernel("6.12", None) == KernelChoice("6.12")
    with pytest.raises(ConfigError, match="unknown kernel version"):
        parse_kernel("5.10", None)
    with pytest.raises(ConfigError, match="not a kernel source tree"):
        parse_kernel("6.1", str(tmp_path))
    (tmp_path / "Makefile").write_text("VERSION = 6\n")
    (tmp_path / "Kconfig").write_text("")
    assert parse_kernel("6.1", str(tmp_path)) == KernelChoice(tree=tmp_path.resolve())
    with pytest.raises(ConfigError, match="not both"):
        parse_kernel("6.12", str(tmp_path))


def test_run_json_and_the_images_view_name_the_kernel(tmp_path: Path) -> None:
    version, origin = kernel_identity({"version": "6.12", "package": "linux-source-6.12",
                                       "source": "6.12.117-1~deb12u1"})  # fmt: skip
    images = GuestImages(
        arch=ARM64, variant="debug", files=BootFiles(tmp_path / "Image", tmp_path / "r.cpio"),
        kernel_build=tmp_path, ssh_key=tmp_path / "id", kernel_key="k", kernel_release="6.12.117",
        kernel_sha256="a", config_sha256="b", rootfs_key="r", rootfs_sha256="c",
        kernel_version=version, kernel_origin=origin,
    )  # fmt: skip
    record = images.record()
    assert record["kernel_version"] == "6.12"
    assert record["kernel_name"] == "6.12 (linux-source-6.12 6.12.117-1~deb12u1)"
    assert record["kernel_origin"] == {"package": "linux-source-6.12",
                                       "source": "6.12.117-1~deb12u1"}  # fmt: skip
    view = publish(images, tmp_path / "images")
    assert view.name == "arm64-debug-6.12"
    assert json.loads((view / "manifest.json").read_text())["kernel_name"] == record["kernel_name"]


def test_step_counts_carry_over_between_a_series_package_and_tree(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    for key, version, steps in (("a", "6.1", 828), ("b", "6.12.117", 875)):  # b: a tree's
        entry = cache.entry("kernel", key)
        entry.path.mkdir(parents=True)
        entry.manifest_path.write_text(
            json.dumps(
                {"arch": "arm64", "variant": "default", "version": version, "build_steps": steps}
            )
        )
    past = past_builds(cache)
    assert expected_steps("arm64", "default", past, "6.12")[0] == 875
    assert expected_steps("arm64", "default", past, "6.1")[0] == 828
