"""The vCPU report: PCs found in QEMU's register dump and named from System.map."""

from pathlib import Path

from harness.vm.vcpus import Symbols, pcs, where

DUMP = """
CPU#0
 PC=ffffffc00832adc0 X00=ffffff803ff3ff08 X01=0000000000000000
X29=ffffff803ff3eb30 X30=ffffffc00832adc8  SP=ffffff803ff3eb30
CPU#1
 PC=ffffffc00805c74c X00=ffffff803ff53f08 X01=0000000000000000
"""


def _map(tmp_path: Path) -> Path:
    path = tmp_path / "System.map"
    path.write_text(
        "ffffffc008000000 T _text\n"
        "ffffffc00805c700 T __cmpwait_case_32\n"
        "ffffffc00805c760 t other\n"
        "ffffffc00832ac00 T queued_spin_lock_slowpath\n"
        "ffffffc00832b000 D some_data\n"
    )
    return path


def test_pcs_are_read_in_vcpu_order_and_x30_is_not_a_pc() -> None:
    assert pcs(DUMP) == (0xFFFFFFC00832ADC0, 0xFFFFFFC00805C74C)


def test_x86_rip_is_a_pc() -> None:
    assert pcs("RAX=0 RBX=1\nRIP=ffffffff81000010 RFL=00000246") == (0xFFFFFFFF81000010,)


def test_pcs_are_named_by_the_text_symbol_below_them(tmp_path: Path) -> None:
    symbols = Symbols.from_system_map(_map(tmp_path))
    assert where(DUMP, symbols) == ("queued_spin_lock_slowpath+0x1c0", "__cmpwait_case_32+0x4c")


def test_data_symbols_do_not_name_code(tmp_path: Path) -> None:
    symbols = Symbols.from_system_map(_map(tmp_path))
    assert "some_data" not in symbols.names


def test_without_a_map_or_below_the_text_the_address_stays(tmp_path: Path) -> None:
    assert where(DUMP, Symbols.from_system_map(tmp_path / "none")) == (
        "0xffffffc00832adc0",
        "0xffffffc00805c74c",
    )
    symbols = Symbols.from_system_map(_map(tmp_path))
    assert symbols.name(0x1000) == "0x1000"
    assert symbols.name(0xFFFFFFC000331000) == "0xffffffc000331000"  # a module: below the text
