"""The ground-truth workload: its build, its symbols, and what a run of it said."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from harness import arches
from harness.agent import profctl
from harness.agent.truth import placement, program
from harness.agent.truth.build import TEXT_BASE, compile_truth
from harness.agent.truth.elfsyms import (
    Function,
    FunctionTable,
    executable_span,
    read_functions,
    symbol_span,
)
from harness.agent.truth.placement import place_module
from harness.errors import InfraError
from harness.process import tool_version

_BL_MASK, _BL = 0xFC000000, 0x94000000


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    compiler = f"{arches.get('arm64').cross_compile}gcc"
    if not tool_version(compiler):
        pytest.skip(f"{compiler} is not installed")
    out = tmp_path_factory.mktemp("truth")
    return compile_truth(out, compiler, timeout_s=120).read_bytes()


@pytest.fixture(scope="module")
def image(binary: bytes) -> FunctionTable:
    return read_functions(binary)


def _words(binary: bytes, table: FunctionTable, name: str) -> list[int]:
    """The function's instructions, read back through its file offset (text at TEXT_BASE)."""
    function = table.named(name)
    start = function.start - TEXT_BASE  # the first LOAD segment maps the file from offset 0
    return [struct.unpack_from("<I", binary, start + i)[0]
            for i in range(0, function.end - function.start, 4)]  # fmt: skip


def test_every_function_of_the_chain_has_a_frame_record(image: FunctionTable) -> None:
    for name in (*program.CHAIN_PATH, "hot", "cold", "mix", "now_ns"):
        low, high = image.named(name).framed
        assert image.named(name).start < low < high <= image.named(name).end, name
    assert image.span[0] >= TEXT_BASE


def test_the_executable_segment_holds_every_function(
    image: FunctionTable, tmp_path_factory: pytest.TempPathFactory
) -> None:
    compiler = f"{arches.get('arm64').cross_compile}gcc"
    binary = compile_truth(tmp_path_factory.mktemp("span"), compiler, 120).read_bytes()
    low, high = executable_span(binary)
    assert low == TEXT_BASE
    assert low <= image.span[0]
    assert image.span[1] <= high


def test_leaf_calls_nothing_and_its_loop_is_the_modelled_length(
    image: FunctionTable, tmp_path_factory: pytest.TempPathFactory
) -> None:
    compiler = f"{arches.get('arm64').cross_compile}gcc"
    binary = compile_truth(tmp_path_factory.mktemp("again"), compiler, 120).read_bytes()
    words = _words(binary, image, "leaf")
    assert not [w for w in words if w & _BL_MASK == _BL]
    # b.ne back to the loop head: imm19 (negative) counts the loop's instructions
    back = [w for w in words if w & 0xFF00001F == 0x54000001]
    assert len(back) == 1
    imm19 = (back[0] >> 5) & 0x7FFFF
    assert 0x80000 - imm19 + 1 == program.LEAF_LOOP_INSNS
    assert _words(binary, image, "hot")[2:] == _words(binary, image, "cold")[2:]


def _results(*lines: tuple[str, ...]) -> tuple[profctl.StepResult, ...]:
    return tuple(profctl.StepResult(i, "cat", True, None, {}, chunk)
                 for i, chunk in enumerate(lines))  # fmt: skip


def test_workloads_come_from_their_output_files() -> None:
    chain, mix = program.TruthLaunch("chain", 1, 900), program.TruthLaunch("mix", 0, 900)
    steps = program.output_steps((chain, mix))
    results = _results(
        ("pid=71 tid=71 cpu=1 kind=chain",
         "calls=12 iterations=1 rounds=0 faults=40 begin_ns=1000 end_ns=9000", "life_faults=90"),
        ("pid=72 tid=73 cpu=0 kind=mix",
         "calls=0 iterations=0 rounds=512 faults=41 begin_ns=1100 end_ns=9100", "life_faults=91"),
    )  # fmt: skip
    chain_run, mix_run = program.workloads_of(steps, results)
    assert chain_run == program.WorkloadRun("chain", 1, 71, 71, 12, 0, 40, span=(1000, 9000),
                                          life_faults=90)  # fmt: skip
    assert mix_run == program.WorkloadRun("mix", 0, 72, 73, 0, 512, 41, span=(1100, 9100),
                                        life_faults=91)  # fmt: skip
    assert mix_run.threads == {(72, 72), (72, 73)}  # main's thread, and the worker's
    assert (mix_run.during(1100), mix_run.during(9100), mix_run.during(9101)) == (True,) * 2 + (
        False,
    )
    with pytest.raises(InfraError, match="said"):
        program.workloads_of(steps[:1], _results(("pid=71 tid=71 cpu=1 kind=chain",)))
    with pytest.raises(InfraError, match="said"):  # a workload from before it printed its phase
        program.workloads_of(
            steps[:1],
            _results(
                ("pid=71 tid=71 cpu=1 kind=chain", "calls=12 iterations=1 rounds=0 faults=40")
            ),
        )
    assert program.launch_steps((chain,)) == (
        "exec:1:/tmp/profagent/truth-chain-1.out:/tmp/profagent/truth chain 1 900",
    )


def test_a_workload_knows_the_busy_loops_pinned_beside_it() -> None:
    chain = program.TruthLaunch("chain", 1, 900)
    steps = (profctl.spin_step(1, 900), profctl.spin_step(0, 900), *program.output_steps((chain,)))
    spins = profctl.parse_output("step=0 op=spin ok=1 pid=80 cpu=1\n"
                                 "step=1 op=spin ok=1 pid=81 cpu=0\n", steps[:2])  # fmt: skip
    lines = ("pid=71 tid=71 cpu=1 kind=chain", "calls=1 rounds=0 faults=4 begin_ns=1 end_ns=2",
             "life_faults=9")  # fmt: skip
    (cat,) = _results(lines)
    (run,) = program.workloads_of(steps, (*spins, cat))
    assert run.neighbours == (80,)


def test_module_functions_move_to_their_kallsyms_addresses() -> None:
    spin = Function("pa_probe_spin", 0x334, 0x414, (0x33C, 0x40C), 3)
    table = FunctionTable((spin, Function("gone", 0x500, 0x510, (0x500, 0x500), 3)))
    placed = place_module(table, ["ffff800008c10334 t pa_probe_spin\t[profagent]"])
    assert placed.functions == (Function("pa_probe_spin", 0xFFFF800008C10334,
                                         0xFFFF800008C10414,
                                         (0xFFFF800008C1033C, 0xFFFF800008C1040C), 3),)  # fmt: skip
    with pytest.raises(InfraError, match="places no function"):
        place_module(table, ["0000000000000000 t pa_probe_spin\t[profagent]"])


def test_a_stripped_binary_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InfraError, match="not an ELF64"):
        read_functions(b"#!/bin/sh\n")


def test_lanes_run_a_thread_on_each_cpu_between_the_others() -> None:
    eight = program.standard_launches(range(8), 900)
    assert [(w.kind, w.cpu, w.lanes) for w in eight][-1] == ("lanes", 1, (1, 2, 3, 4, 5, 6))
    assert [w.kind for w in program.standard_launches((0, 1), 900)] == ["chain", "mix", "zero"]
    (step,) = program.launch_steps(eight[-1:])
    assert step == "exec:1:/tmp/profagent/truth-lanes-1.out:/tmp/profagent/truth lanes 1 900 " \
        "1,2,3,4,5,6"  # fmt: skip
    lines = (
        "pid=80 tid=80 cpu=1 kind=lanes",
        "lane=1 lane_tid=83 lane_cpu=2",
        "lane=0 lane_tid=82 lane_cpu=1",
        "calls=0 iterations=0 rounds=0 faults=0 begin_ns=5 end_ns=9",
        "life_faults=7",
    )
    (run,) = program.workloads_of(program.output_steps(eight[-1:]), _results(lines))
    assert run.lanes == ((1, 82), (2, 83))  # by lane number, as printed in any order
    assert run.threads_on(2) == {(80, 83), (80, 80)}  # main creates lane 1 from CPU 2
    assert run.threads_on(4) == set()
    assert run.threads_on(1) == {(80, 80), (80, 82)}  # main waits there beside lane 0
    with pytest.raises(InfraError, match="one did not start"):
        program.workloads_of(program.output_steps(eight[-1:]), _results(
            (lines[0], lines[1], *lines[3:])))  # fmt: skip


def test_each_lane_spins_in_a_function_of_its_own(image: FunctionTable) -> None:
    lanes = [image.named(f"lane{k}") for k in range(program.LANES_MAX)]
    assert len({f.start for f in lanes}) == program.LANES_MAX  # not folded into one
    assert all(f.framed[0] < f.framed[1] for f in lanes)


def test_a_function_span_comes_from_its_symbol(binary: bytes, image: FunctionTable) -> None:
    leaf = image.named("leaf")
    assert symbol_span(binary, "leaf") == (leaf.start, leaf.end)
    with pytest.raises(InfraError, match="no function"):
        symbol_span(binary, "truth_sink")  # an object, not a function


def test_a_vmlinux_table_is_read_once_and_kept_by_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROFBENCH_CACHE", str(tmp_path / "cache"))
    reads: list[bytes] = []

    def read(data: bytes) -> FunctionTable:
        reads.append(data)
        return FunctionTable((Function("f", len(data), len(data) + 8, (0, 0)),))

    monkeypatch.setattr(placement, "read_functions", read)
    vmlinux = tmp_path / "vmlinux"
    vmlinux.write_bytes(b"one")
    uncached = placement.kernel_table.__wrapped__  # past the per-process cache
    first, again = uncached(vmlinux), uncached(vmlinux)
    assert reads == [b"one"]
    assert again == first
    assert again.at(3) is not None  # the lookup state survives the pickle
    vmlinux.write_bytes(b"other")  # another kernel: another entry
    assert uncached(vmlinux).functions[0].start == 5
    assert reads == [b"one", b"other"]
