from __future__ import annotations

import pytest

from harness.builder.kconfig import (
    MergedConfig,
    apply_fragment,
    merge_fragments,
    parse_config,
    verify,
)
from harness.errors import ConfigError
from harness.paths import REPO_ROOT

KCONFIG_DIR = REPO_ROOT / "guest" / "kconfig"


def test_parse_config() -> None:
    text = (
        "# a comment\n"
        "\n"
        "CONFIG_SMP=y\n"
        "CONFIG_NR_CPUS=64\n"
        'CONFIG_CMDLINE="console=ttyAMA0"\n'
        "# CONFIG_SWAP is not set\n"
        "   \n"
        "#CONFIG_NOT_AN_UNSET_LINE\n"
    )
    assert parse_config(text) == {
        "CONFIG_SMP": "y",
        "CONFIG_NR_CPUS": "64",
        "CONFIG_CMDLINE": '"console=ttyAMA0"',
        "CONFIG_SWAP": "n",
    }


def test_parse_config_rejects_bad_line_with_file_and_line() -> None:
    text = "CONFIG_SMP=y\n# fine\nSMP=y\n"
    with pytest.raises(ConfigError, match=r"^frag\.config:3: not a Kconfig line: 'SMP=y'$"):
        parse_config(text, source="frag.config")


def test_merge_later_fragment_wins_and_override_is_reported() -> None:
    merged = merge_fragments(
        [
            ("base.config", "CONFIG_A=y\nCONFIG_B=y\n"),
            ("debug.config", "# CONFIG_A is not set\nCONFIG_B=y\nCONFIG_C=m\n"),
        ]
    )
    assert merged == MergedConfig(
        options=(("CONFIG_A", "n"), ("CONFIG_B", "y"), ("CONFIG_C", "m")),
        overrides=("CONFIG_A: base.config sets y, debug.config sets n",),
    )


def test_merged_as_text_writes_unset_lines() -> None:
    merged = merge_fragments([("f", "CONFIG_B=y\n# CONFIG_A is not set\n")])
    assert merged.as_text() == "# CONFIG_A is not set\nCONFIG_B=y\n"


def test_apply_fragment_replaces_earlier_lines_and_keeps_others() -> None:
    base = (
        "#\n# Automatically generated file; DO NOT EDIT.\n#\n"
        "CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=m\nCONFIG_D=y\n"
    )
    merged = merge_fragments([("f", "CONFIG_B=y\n# CONFIG_D is not set\n")])
    result = apply_fragment(base, merged)
    assert parse_config(result) == {
        "CONFIG_A": "y",
        "CONFIG_B": "y",
        "CONFIG_C": "m",
        "CONFIG_D": "n",
    }
    assert "# CONFIG_B is not set" not in result
    assert result.count("CONFIG_D") == 1
    assert "# Automatically generated file; DO NOT EDIT." in result


def test_verify_names_changed_and_dropped_options() -> None:
    requested = [
        ("CONFIG_A", "y"),
        ("CONFIG_B", "y"),
        ("CONFIG_C", "n"),
        ("CONFIG_D", "y"),
        ("CONFIG_E", "n"),
    ]
    final = "CONFIG_A=m\nCONFIG_D=y\n# CONFIG_E is not set\n"
    assert verify(requested, final) == [
        "CONFIG_A: requested y, olddefconfig left it m",
        "CONFIG_B: requested y, olddefconfig left it unset",
    ]


def test_verify_reports_an_option_that_should_be_off() -> None:
    assert verify([("CONFIG_SWAP", "n")], "CONFIG_SWAP=y\n") == [
        "CONFIG_SWAP: requested n, olddefconfig left it y"
    ]


# --- the project's real fragments -----------------------------------------------------------


def fragments(*names: str) -> list[tuple[str, str]]:
    return [(name, (KCONFIG_DIR / name).read_text()) for name in names]


ARM64 = ("base.config", "arm64/arch.config", "arm64/pmu-nmi.config", "debug.config")
X86_64 = ("base.config", "x86_64/arch.config", "x86_64/pmu-nmi.config", "debug.config")


def test_every_real_fragment_parses() -> None:
    names = sorted(str(p.relative_to(KCONFIG_DIR)) for p in KCONFIG_DIR.rglob("*.config"))
    assert set(ARM64) | set(X86_64) <= set(names)
    for name, text in fragments(*names):
        assert parse_config(text, source=name), f"{name} sets nothing"


def test_real_arm64_fragments_merge_with_the_options_the_bench_needs() -> None:
    options = dict(merge_fragments(fragments(*ARM64)).options)
    wanted = {
        "CONFIG_ARM64_PSEUDO_NMI": "y",
        "CONFIG_PERF_EVENTS": "y",
        "CONFIG_PROVE_LOCKING": "y",
        "CONFIG_DEBUG_ATOMIC_SLEEP": "y",
    }
    assert {name: options.get(name) for name in wanted} == wanted


def test_real_x86_64_fragments_merge_with_perf_events() -> None:
    options = dict(merge_fragments(fragments(*X86_64)).options)
    assert (options.get("CONFIG_PERF_EVENTS"), options.get("CONFIG_X86_LOCAL_APIC")) == ("y", "y")
