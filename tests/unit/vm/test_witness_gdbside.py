"""The witness's breakpoint (`gdbside`) under a fake ``gdb`` module: its TTBR0 rule.

gdbside runs inside gdb-multiarch; here a fake ``gdb`` module stands in: guest memory
as a few blocks, the hitting CPU's registers, and the gdbstub monitor's ``gva2gpa``.
Loading the file runs its ``main`` against that fake (attach, break, continue: all
no-ops), then each test calls the hit's user walk, or a whole hit, as gdb would.
"""

from __future__ import annotations

import importlib.util
import io
import json
import struct
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.vm.witness.session import GDBSIDE
from tests.unit.vm.test_witness_records import OFFSETS

CURRENT, MM, STACK = 0xFFFFFF8000946000, 0xFFFFFF8000E9E000, 0xFFFFFFC00A000000
PGD, PGD_PHYS = 0xFFFFFF80098A4000, 0x498A4000
USER_PC, USER_FP, USER_RET = 0x51019828, 0x7FFFFFF000, 0x400A4C
ASID = 0x61 << 48  # bits 63:48 of a TTBR, masked off like CnP (bit 0)


class FakeMemoryError(Exception):
    """gdb.MemoryError: an unreadable guest address."""


@dataclass
class FakeGuest:
    """Guest memory in blocks, the hit's registers, the monitor's answers, what was read."""

    memory: dict[int, bytes]
    registers: dict[str, int]
    gpa: dict[int, int]
    reads: list[int] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    cpu: int = 0
    points: list[Any] = field(default_factory=list)  # every breakpoint gdbside made
    on_continue: Callable[[], None] = lambda: None

    def read_memory(self, address: int, size: int) -> bytes:
        self.reads.append(address)
        for start, block in self.memory.items():
            if start <= address and address + size <= start + len(block):
                return block[address - start : address - start + size]
        raise FakeMemoryError(f"Cannot access memory at address {address:#x}")

    def read_register(self, name: str) -> int:
        return self.registers[name]

    def execute(self, command: str, to_string: bool = False) -> str:
        self.commands.append(command)
        if command == "continue":
            self.on_continue()
        if command.startswith("monitor gva2gpa "):
            address = int(command.rsplit(maxsplit=1)[-1], 16)
            return f"gpa: {self.gpa[address]:#x}\r\n" if address in self.gpa else "Unmapped\r\n"
        return ""


def guest(ttbr0: int, *, kthread: bool = False) -> FakeGuest:
    """A user task interrupted in the kernel, its user stack one frame record deep."""
    regs = bytearray(OFFSETS.regs_size)
    struct.pack_into("<Q", regs, OFFSETS.regs_pc, USER_PC)
    struct.pack_into("<Q", regs, OFFSETS.regs_fp, USER_FP)
    task = bytearray(1024)
    struct.pack_into("<Q", task, OFFSETS.task_mm, MM)
    struct.pack_into("<Q", task, OFFSETS.task_stack, STACK)
    struct.pack_into("<I", task, OFFSETS.task_flags, OFFSETS.pf_kthread_bits if kthread else 0)
    mm = bytearray(128)
    struct.pack_into("<Q", mm, OFFSETS.mm_pgd, PGD)
    memory = {
        CURRENT: bytes(task),
        MM: bytes(mm),
        STACK + OFFSETS.thread_size_bytes - OFFSETS.regs_size: bytes(regs),
        USER_FP: struct.pack("<QQ", 0, USER_RET),
    }
    return FakeGuest(memory, {"TTBR0_EL1": ttbr0}, {PGD: PGD_PHYS})


def load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeGuest,
         **where: object) -> types.ModuleType:  # fmt: skip
    """gdbside as gdb loads it, against ``fake``; ``where`` replaces ``address``."""
    config = tmp_path / "witness.json"
    config.write_text(json.dumps({
        "port": 1, "address": 0x1000, "depth": 8, "offsets": OFFSETS.as_dict(),
        "out": str(tmp_path / "out.jsonl"), "ready": str(tmp_path / "ready")} | where))  # fmt: skip
    monkeypatch.setenv("PROFBENCH_WITNESS", str(config))

    class Breakpoint:
        def __init__(self, spec: str, internal: bool = False) -> None:
            self.spec = spec
            fake.points.append(self)

        def delete(self) -> None:
            pass

    thread = types.SimpleNamespace(ptid=(1, fake.cpu + 1, 0))
    gdb = types.ModuleType("gdb")
    gdb.__dict__.update(Breakpoint=Breakpoint, MemoryError=FakeMemoryError, execute=fake.execute,
                        selected_inferior=lambda: fake, selected_frame=lambda: fake,
                        selected_thread=lambda: thread)  # fmt: skip
    monkeypatch.setitem(sys.modules, "gdb", gdb)
    spec = importlib.util.spec_from_file_location("gdbside_under_test", GDBSIDE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tasks_own_table_in_ttbr0_is_walked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    fake = guest(ASID | PGD_PHYS | 1)
    side = load(tmp_path, monkeypatch, fake)
    found = side._user_walk(CURRENT, STACK, 0)
    assert found == {"ttbr0": ASID | PGD_PHYS | 1, "pgd_phys": PGD_PHYS,
                     "user_walk": [USER_PC, USER_RET], "user_stop": "end"}  # fmt: skip
    assert fake.commands[-2:] == ["monitor cpu 0", f"monitor gva2gpa {PGD:#x}"]


def test_another_table_in_ttbr0_is_foreign_and_no_user_address_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Mid switch_mm: TTBR0 already holds the next task's table, current is the old one."""
    fake = guest(ASID | 0x498BF000)
    side = load(tmp_path, monkeypatch, fake)
    found = side._user_walk(CURRENT, STACK, 0)
    assert found == {"ttbr0": ASID | 0x498BF000, "pgd_phys": PGD_PHYS, "user_walk": [],
                     "user_stop": "foreign_ttbr0"}  # fmt: skip
    assert USER_FP not in fake.reads
    # The reserved (zero) table, and a pgd QEMU cannot translate, are foreign too.
    assert side._user_walk(CURRENT, STACK, 0)["user_stop"] == "foreign_ttbr0"
    fake.registers["TTBR0_EL1"] = 0
    assert side._user_walk(CURRENT, STACK, 0)["user_stop"] == "foreign_ttbr0"
    fake.registers["TTBR0_EL1"], fake.gpa = PGD_PHYS, {}
    unmapped: dict[str, object] = {
        "ttbr0": PGD_PHYS,
        "pgd_phys": None,
        "user_walk": [],
        "user_stop": "foreign_ttbr0",
    }
    assert side._user_walk(CURRENT, STACK, 0) == unmapped


def test_a_kernel_thread_has_no_regs_and_its_ttbr0_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    fake = guest(0x498BF000, kthread=True)
    side = load(tmp_path, monkeypatch, fake)
    fake.commands.clear()
    assert side._user_walk(CURRENT, STACK, 0) == {"user_walk": [], "user_stop": "no_regs"}
    assert fake.commands == []


@pytest.mark.parametrize(("ttbr0", "walk", "stop"), [
    (0x498BF000, [], "foreign_ttbr0"), (PGD_PHYS, [USER_PC, USER_RET], "end")])  # fmt: skip
def test_a_kernel_hit_writes_the_ttbr0_evidence_in_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ttbr0: int, walk: list[int], stop: str,
) -> None:  # fmt: skip
    fake = guest(ttbr0)
    regs, event = 0xFFFFFF800A000000, 0xFFFFFF800094A500
    kernel = bytearray(OFFSETS.regs_size)
    struct.pack_into("<Q", kernel, OFFSETS.regs_pc, 0xFFFFFFC0080132A4)
    struct.pack_into("<Q", kernel, OFFSETS.regs_pstate, 0x20000005)
    fake.memory.update({regs: bytes(kernel), event: bytes(OFFSETS.event_count + 8)})
    fake.registers.update(x0=event, x2=regs, SP_EL0=CURRENT)
    side = load(tmp_path, monkeypatch, fake)
    out = io.StringIO()
    assert side.Overflow(0x1000, out).stop() is False
    line = json.loads(out.getvalue())
    assert (line["user_walk"], line["user_stop"]) == (walk, stop)
    assert (line["ttbr0"], line["pgd_phys"]) == (ttbr0, PGD_PHYS)


CREATE, TEXT = 0xFFFFFFC008200000, (0xFFFFFFC008000000, 0xFFFFFFC009000000)
HANDLER = 0xFFFFFFC000330A00  # a module's: below the kernel's text


def test_discovery_breaks_on_each_new_module_handler_the_kernel_is_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """x3 of perf_event_create_kernel_counter: NULL and kernel handlers pass, a module's stops."""
    fake = guest(0)
    calls = iter([0, TEXT[0] + 0x40, HANDLER, HANDLER])  # counting event, watchdog, agent x2
    stops: list[bool] = []

    def run_guest() -> None:  # the kernel creates its events during the first continue
        finder = next(p for p in fake.points if p.spec == f"*{CREATE:#x}")
        for x3 in calls:
            fake.registers["x3"] = x3
            stops.append(finder.stop())
            if stops[-1]:
                return  # gdb stops; gdbside's loop adds the breakpoint and continues

    fake.on_continue = run_guest
    load(tmp_path, monkeypatch, fake, address=None, discover={"at": CREATE, "image": list(TEXT)})
    assert stops == [False, False, True, False]  # the agent's second CPU: already broken on
    assert [p.spec for p in fake.points] == [f"*{CREATE:#x}", f"*{HANDLER:#x}"]
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == {"handler": HANDLER, "cpu": 0}
    assert json.loads(lines[-1]) == {"end": 0}
    assert (tmp_path / "ready").exists()
    assert fake.commands.count("continue") == 2


def test_a_handler_inside_the_kernels_text_or_null_is_not_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    side = load(tmp_path, monkeypatch, guest(0))
    assert not side.is_new_handler(0, TEXT, set())
    assert not side.is_new_handler(TEXT[0], TEXT, set())
    assert side.is_new_handler(TEXT[1], TEXT, set())
    assert not side.is_new_handler(HANDLER, TEXT, {HANDLER})
