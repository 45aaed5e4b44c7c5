"""CHAIN's general law: every return address follows a call to the frame below."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from harness import arches
from harness.agent.oracles import frames
from harness.agent.truth import program
from harness.agent.truth.build import compile_truth
from harness.agent.truth.elfsyms import (
    Call,
    Function,
    FunctionTable,
    read_functions,
)
from harness.agent.truth.insns import UNDECODED
from harness.agent.truth.insns import decode as _decode
from harness.agent.truth.insns import framed as _framed
from harness.agent.values.samples import Sample
from harness.process import tool_version

BASE = 0x1000


def fn(
    name: str, start: int, calls: tuple[Call, ...] = (), tails: tuple[Call, ...] = ()
) -> Function:
    return Function(name, start, start + 0x40, (start + 8, start + 0x30), 1, calls, tails)


# main calls outer (BL, returns to +0x20) and a stub (+0x28) and through a pointer (+0x30);
# outer calls middle; middle calls jump, which tail-calls leaf; leaf has a frame record.
TABLE = FunctionTable((
    fn("main", BASE, (Call(0x20, True, "outer"), Call(0x28, True, None), Call(0x30, False))),
    fn("outer", BASE + 0x100, (Call(0x20, True, "middle"),)),
    fn("middle", BASE + 0x200, (Call(0x20, True, "jump"),)),
    fn("jump", BASE + 0x300, tails=(Call(0x8, True, "leaf"),)),
    fn("leaf", BASE + 0x400),
))  # fmt: skip
RET = {f.name: f.start + 0x20 for f in TABLE.functions}
LEAF_PC = BASE + 0x410  # inside leaf's framed span


def judge(pc: int, *chain: int) -> frames.FrameVerdict:
    return frames.judge_frames([Sample(0, pc, 1, 1, True, chain)], lambda _: (TABLE,))


def test_a_right_chain_holds_and_says_what_it_judged() -> None:
    verdict = judge(LEAF_PC, RET["middle"], RET["outer"], RET["main"], 0x99)
    assert verdict.faults == ()
    # middle's call of jump reaches leaf by jump's tail call
    assert (verdict.samples, verdict.frames, verdict.targets, verdict.unknown) == (1, 3, 3, 1)


def test_a_return_address_after_no_call_fails() -> None:
    (fault,) = judge(LEAF_PC, RET["middle"] + 4).faults
    assert fault.index == 0
    assert "does not follow a call instruction" in fault.why


def test_a_call_to_another_function_than_the_frame_below_fails() -> None:
    swapped = judge(LEAF_PC, RET["middle"], RET["main"], RET["outer"])
    assert [(f.index, f.why.split(" at ")[0]) for f in swapped.faults] == [
        (1, "main calls outer"), (2, "outer calls middle")]  # fmt: skip
    skipped = judge(LEAF_PC, RET["outer"], RET["main"])
    assert [f.index for f in skipped.faults] == [0]
    # tail calls are followed from the call's target only: outer calls middle, which
    # calls (not tail-calls) jump: jump cannot be below outer's frame
    assert judge(BASE + 0x210, RET["outer"]).faults == ()  # middle's framed body
    assert [f.index for f in judge(BASE + 0x310, RET["outer"]).faults] == [0]  # jump's


def test_tail_calls_are_followed_through_any_number_of_branches() -> None:
    # main calls a, which branches to b, which branches to c (glibc's unlock path)
    table = FunctionTable((fn("main", BASE, (Call(0x20, True, "a"),)),
                           fn("a", BASE + 0x100, tails=(Call(0x8, True, "b"),)),
                           fn("b", BASE + 0x200, tails=(Call(0x8, True, "c"),)),
                           fn("c", BASE + 0x300, tails=(Call(0x8, True, "a"),)),
                           fn("d", BASE + 0x400)))  # fmt: skip
    for below, faults in ((0x310, 0), (0x210, 0), (0x110, 0), (0x410, 1)):
        sample = Sample(0, BASE + below, 1, 1, True, (RET["main"],))
        assert len(frames.judge_frames([sample], lambda _: (table,)).faults) == faults


def test_a_tail_call_past_a_function_start_is_followed() -> None:
    # glibc's _setjmp: `b __sigsetjmp+4` (past a nop), and __sigsetjmp tail-calls
    # __sigjmp_save: a sample there under main's call of _setjmp holds the law.
    table = FunctionTable((fn("main", BASE, (Call(0x20, True, "setjmp", 0x100),)),
                           fn("setjmp", BASE + 0x100, tails=(Call(0x8, True, None, 0x104),)),
                           fn("sigsetjmp", BASE + 0x200, tails=(Call(0x8, True, "save", 0x100),)),
                           fn("save", BASE + 0x300),
                           fn("other", BASE + 0x400)))  # fmt: skip
    for below, faults in ((0x310, 0), (0x210, 0), (0x410, 1)):
        sample = Sample(0, BASE + below, 1, 1, True, (RET["main"],))
        assert len(frames.judge_frames([sample], lambda _: (table,)).faults) == faults


def test_outside_the_frame_record_the_first_target_is_not_judged() -> None:
    # leaf's prologue: the walk skipped middle, its first return address is in outer
    verdict = judge(BASE + 0x404, RET["outer"], RET["main"])
    assert (verdict.faults, verdict.frames, verdict.targets) == ((), 2, 1)
    # ... but that return address must still follow a call
    assert len(judge(BASE + 0x404, RET["outer"] + 4).faults) == 1


def test_stubs_and_indirect_calls_are_judged_only_as_calls() -> None:
    for offset in (0x28, 0x30):
        verdict = judge(LEAF_PC, BASE + offset)
        assert (verdict.faults, verdict.frames, verdict.targets) == ((), 1, 0)


def test_unknown_code_is_counted_and_cuts_the_target_half() -> None:
    verdict = judge(0x50, RET["outer"])  # a PC no table holds: outer's target not judged
    assert (verdict.faults, verdict.frames, verdict.targets, verdict.unknown) == ((), 1, 0, 0)
    verdict = judge(LEAF_PC, 0x77, RET["outer"])
    assert (verdict.faults, verdict.frames, verdict.targets, verdict.unknown) == ((), 1, 0, 1)
    assert judge(0x50).samples == 0


def test_a_new_threads_walk_on_its_parents_frame_pointer_is_not_judged() -> None:
    clone = fn("__clone", BASE + 0x500)
    table = FunctionTable((*TABLE.functions, clone))
    torn = (RET["outer"], RET["main"])  # the parent's stack, rewritten as it was read
    child = Sample(0, clone.start + 0x38, 1, 2, True, torn)
    verdict = frames.judge_frames([child], lambda _: (table,))
    assert (verdict.faults, verdict.frames, verdict.unknown) == ((), 0, 2)
    elsewhere = dataclasses.replace(child, pc=LEAF_PC)  # the same chain from leaf: judged
    assert [f.index for f in frames.judge_frames([elsewhere], lambda _: (table,)).faults] == [0]


def test_after_the_exception_entry_comes_the_interrupted_pc() -> None:
    kernel = FunctionTable(TABLE.functions, entry_text=(0x5000, 0x5100))
    interrupted = BASE + 0x110  # outer's framed body, not after a call: the exception's PC
    chain = (RET["middle"], 0x5010, interrupted, RET["main"])
    verdict = frames.judge_frames([Sample(0, LEAF_PC, 0, 0, False, chain)], lambda _: (kernel,))
    # middle's and main's calls judged (main's of outer, the interrupted function)
    assert (verdict.faults, verdict.frames, verdict.targets, verdict.unknown) == ((), 2, 2, 2)
    # without the entry text, the interrupted PC is a return address after no call
    assert len(judge(LEAF_PC, *chain).faults) == 1
    # sampled in the entry code: the next address may be the interrupted PC (kprof's
    # false alarm: do_select's PC after no call), or a return address; not judged
    for first in (interrupted, RET["outer"]):
        sample = Sample(0, 0x5020, 0, 0, False, (first, RET["main"]))
        verdict = frames.judge_frames([sample], lambda _: (kernel,))
        assert (verdict.faults, verdict.frames, verdict.targets, verdict.unknown) == ((), 1, 0, 1)


def test_without_the_entry_code_no_address_after_an_unknown_frame_is_judged() -> None:
    # The module alone (no vmlinux): an interrupt taken in outer's body, handled in
    # unknown kernel code, leaves outer's interrupted PC after unknown frames
    # (CI's noisy-neighbour run: dt_read's PC after no call)
    interrupted = BASE + 0x110
    for pc, chain in (
        (0x9000, (0x9100, interrupted, RET["main"])),
        (LEAF_PC, (RET["middle"], 0x9100, 0x9200, interrupted, RET["main"])),
    ):
        sample = Sample(0, pc, 0, 0, False, chain)
        blind = frames.judge_frames([sample], lambda _: (TABLE,), entry_known=lambda _: False)
        assert blind.faults == ()
        assert blind.frames == (2 if pc == LEAF_PC else 1)  # main's call, middle's
        # told the entry code is known, that PC is judged as a return address, and fails
        known = frames.judge_frames([sample], lambda _: (TABLE,))
        assert [f.index for f in known.faults] == [len(chain) - 2]
    # after a known frame, a return address after no call still fails
    sample = Sample(0, 0x9000, 0, 0, False, (0x9100, RET["outer"], RET["middle"] + 4))
    blind = frames.judge_frames([sample], lambda _: (TABLE,), entry_known=lambda _: False)
    assert [f.index for f in blind.faults] == [2]


def test_a_call_by_address_finds_the_right_one_of_two_static_namesakes() -> None:
    # two objects' static "dup"; caller calls the second (delta from its start)
    table = FunctionTable((fn("caller", BASE, (Call(0x20, True, "dup", 0x200),)),
                           fn("dup", BASE + 0x100), fn("dup", BASE + 0x200)))  # fmt: skip
    sample = Sample(0, BASE + 0x210, 1, 1, True, (RET["main"],))
    verdict = frames.judge_frames([sample], lambda _: (table,))
    assert (verdict.faults, verdict.targets) == ((), 1)
    wrong = Sample(0, BASE + 0x110, 1, 1, True, (RET["main"],))  # the first dup below
    assert len(frames.judge_frames([wrong], lambda _: (table,)).faults) == 1


# --- against real code: the ground-truth workload and a relocatable object -----------------


def _compiler() -> str:
    compiler = f"{arches.get('arm64').cross_compile}gcc"
    if not tool_version(compiler):
        pytest.skip(f"{compiler} is not installed")
    return compiler


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> FunctionTable:
    out = tmp_path_factory.mktemp("truth")
    return read_functions(compile_truth(out, _compiler(), timeout_s=120).read_bytes())


def _return_to(table: FunctionTable, caller: str, callee: str) -> int:
    function = table.named(caller)
    (call,) = (c for c in function.calls if c.target == callee)
    return function.start + call.offset


def test_the_workloads_chain_holds_and_a_swap_fails(image: FunctionTable) -> None:
    leaf = image.named("leaf")
    chain = tuple(_return_to(image, caller, callee) for callee, caller
                  in zip(program.CHAIN_PATH, program.CHAIN_PATH[1:], strict=False))  # fmt: skip
    pc = leaf.framed[0]
    right = frames.judge_frames([Sample(0, pc, 1, 1, True, chain)], lambda _: (image,))
    assert (right.faults, right.frames, right.targets) == ((), 4, 4)
    swapped = (chain[0], chain[2], chain[1], chain[3])
    wrong = frames.judge_frames([Sample(0, pc, 1, 1, True, swapped)], lambda _: (image,))
    assert [f.index for f in wrong.faults] == [1, 2, 3]  # work and outer swapped: 3 calls off


def test_a_sample_in_the_workloads_clone_is_not_judged(image: FunctionTable) -> None:
    """CI, kprof on 8 vCPUs: a lane thread sampled just after its clone syscall walked
    its parent's stack (`frames.CLONE_WINDOW`); the static image names the function clone."""
    clone = image.find("clone") or image.find("__clone")
    assert clone is not None
    assert clone.name in frames.CLONE_WINDOW
    leaf = image.named("leaf")
    torn = (_return_to(image, "outer", "middle"), _return_to(image, "work", "outer"))
    sample = Sample(0, clone.start + 4, 1, 2, True, torn)
    verdict = frames.judge_frames([sample], lambda _: (image,))
    assert (verdict.faults, verdict.frames, verdict.unknown) == ((), 0, 2)
    from_leaf = dataclasses.replace(sample, pc=leaf.framed[0])  # middle skipped: judged
    assert len(frames.judge_frames([from_leaf], lambda _: (image,)).faults) == 1


def test_main_is_called_through_a_pointer_and_libc_starts_it(image: FunctionTable) -> None:
    start_call_main = image.named("__libc_start_call_main")
    assert any(not c.direct for c in start_call_main.calls)  # main(argc, argv, env): BLR
    assert any(c.target == "__libc_start_call_main" for c in image.named("__libc_start_main").calls)


RELOCATABLE = r"""
extern void external(void);
__attribute__((noinline)) static void local(void) { asm volatile(""); }
__attribute__((noinline)) void tail(void) { external(); }
void caller(void) { local(); external(); tail(); asm volatile(""); }
"""


def test_a_relocatable_names_its_calls_by_their_relocations(tmp_path: Path) -> None:
    source = tmp_path / "calls.c"
    source.write_text(RELOCATABLE)
    out = tmp_path / "calls.o"
    subprocess.run([_compiler(), "-O2", "-fno-omit-frame-pointer", "-c", "-o", str(out),
                    str(source)], check=True, timeout=60)  # fmt: skip
    table = read_functions(out.read_bytes())
    targets = [c.target for c in table.named("caller").calls]
    assert targets == ["local", "external", "tail"]
    # B external: R_AARCH64_JUMP26, by name
    assert table.named("tail").tails == (Call(0, True, "external"),)
    # the static function by address (no relocation): its start from caller's
    local = table.named("caller").calls[0]
    assert table.named("caller").start + (local.delta or 0) == table.named("local").start
    assert table.named("caller").framed[0] > table.named("caller").start


def test_a_shrink_wrapped_fast_path_runs_without_a_frame_record() -> None:
    # skb_push on the kcsan kernel: b.cs over the stp to a ret, past mov x29, sp
    words = {0x00: 0xB9406804, 0x04: 0x54000122, 0x08: 0xA9BF7BFD, 0x0C: 0x910003FD,
             0x10: 0x940003FC, 0x14: 0x17FFFFFF, 0x28: 0xAA0203E0, 0x2C: 0xD65F03C0}  # fmt: skip
    code = b"".join(words.get(at, 0xD503201F).to_bytes(4, "little") for at in range(0, 0x30, 4))
    insns = _decode(code, 0)
    assert [(i.address, i.mnemonic) for i in insns if i.address in words] == [
        (0x00, "ldr"), (0x04, "b.hs"), (0x08, "stp"), (0x0C, "mov"), (0x10, "bl"),
        (0x14, "b"), (0x28, "mov"), (0x2C, "ret")]  # fmt: skip
    assert _framed(insns, 0) == (0x10, 0x28)
    nop = 0xD503201F.to_bytes(4, "little")
    bti = _decode(0xD503245F.to_bytes(4, "little") + nop + code[8:], 0)  # no fast path
    assert bti[0].mnemonic == "bti"
    assert _framed(bti, 0) == (0x10, 0x30)


def test_the_frame_record_is_read_from_operands_not_text() -> None:
    setup, restore = _decode(bytes.fromhex("fd030091fd7bc1a8"), 0)  # mov x29, sp; ldp ..., #16
    assert setup.sets_frame_pointer()
    assert restore.restores_frame_record()
    other, longjmp = _decode(bytes.fromhex("e00302911d7840a9"), 0)  # add x0, sp, #0x80
    assert not other.sets_frame_pointer()
    assert not longjmp.restores_frame_record()  # ldp x29, x30, [x0]: a buffer's, not a frame's


def test_a_large_frame_restores_its_record_before_popping_its_locals() -> None:
    # mas_topiary_replace of 6.12.118's vmlinux: its record at [sp], the locals above it
    words = ["d10883ff", "a9007bfd", "910003fd", "97ffc73d", "a9407bfd", "a94153f3",
             "910883ff", "d65f03c0"]  # fmt: skip
    insns = _decode(b"".join(int(w, 16).to_bytes(4, "little") for w in words), 0x1000)
    assert [i.mnemonic for i in insns] == ["sub", "stp", "mov", "bl", "ldp", "ldp", "add", "ret"]
    assert insns[4].restores_frame_record()  # ldp x29, x30, [sp]
    assert not insns[5].restores_frame_record()  # ldp x19, x20, [sp, #16]
    # CI, kprof on 6.12: a PC after the restore walked on from the caller's record
    assert _framed(insns, 0x1000) == (0x100C, 0x1010)


# --- Linux 6.12's vmlinux: a word capstone cannot decode must not hide the calls after it ---

#: ``__arm64_sys_pselect6`` of the 6.12.118 arm64 vmlinux the bench builds, at its link
#: address, word by word (``aarch64-linux-gnu-objdump -d``). Its ``ldtr x25, [x25]``
#: (0xf8400b39, from get_user) is a word capstone 5.0 does not decode.
PSELECT6_AT = 0xFFFF80008010B548
PSELECT6 = """
a9b97bfd 910003fd a90153f3 a9025bf5 a90363f7 a9046bf9 a9424c14 a9405815 a9416017 b40001d3
b27cbfe0 eb00027f 54000128 9248fa79 52800000 f8400b39 350000a0 91002273 9248fa73 f8400a73
34000080 928001a0 14000013 d2800019 a9057fff a9067fff b40002b4 aa1403e1 910143e0 97fde8b7
35fffee0 a9450be1 910183e0 97ffff11 35000360 910183fa aa1303e1 aa1903e0 97fc9a06 34000140
93407c00 a94153f3 a9425bf5 a94363f7 a9446bf9 a8c77bfd d65f03c0 d280001a 17fffff4 aa1a03e4
aa1803e3 aa1703e2 aa1603e1 2a1503e0 97ffff1b aa1403e1 2a0003e3 52800042 910183e0 97fffc0b
17ffffec 928002a0 17ffffeb
"""


def _words(text: str) -> bytes:
    return b"".join(int(word, 16).to_bytes(4, "little") for word in text.split())


def test_a_word_capstone_cannot_decode_is_kept_and_decoding_goes_on() -> None:
    code = _words(PSELECT6)
    insns = _decode(code, PSELECT6_AT)
    assert [i.address for i in insns] == list(range(PSELECT6_AT, PSELECT6_AT + len(code), 4))
    # The two get_user loads of the 6.12 kernel, each kept as the word it is.
    assert [(i.address - PSELECT6_AT, i.operands) for i in insns if i.mnemonic == UNDECODED] == [
        (0x3C, "0xf8400b39"), (0x4C, "0xf8400a73")]  # fmt: skip
    # The call issue 48 saw condemned: bl core_sys_select at ...b620, returning to ...b624.
    call = next(i for i in insns if i.address == 0xFFFF80008010B620)
    assert (call.mnemonic, call.branch_target()) == ("bl", 0xFFFF80008010B28C)


def test_on_linux_6_12_a_return_address_after_a_call_is_one(tmp_path: Path) -> None:
    """Issue 48: CHAIN said ``0xffff80008010b624 in __arm64_sys_pselect6 does not follow a
    call instruction``; it follows ``bl core_sys_select``. The real words, assembled as a
    function of a relocatable object, read as any module is."""
    source = tmp_path / "pselect6.s"
    insts = "".join(f"  .inst 0x{word}\n" for word in PSELECT6.split())
    source.write_text("  .text\n  .globl __arm64_sys_pselect6\n  .type __arm64_sys_pselect6, "
                      "%function\n__arm64_sys_pselect6:\n" + insts
                      + "  .size __arm64_sys_pselect6, .-__arm64_sys_pselect6\n")  # fmt: skip
    out = tmp_path / "pselect6.o"
    subprocess.run([_compiler(), "-c", "-o", str(out), str(source)], check=True, timeout=60)
    function = read_functions(out.read_bytes()).named("__arm64_sys_pselect6")
    moved = function.moved(PSELECT6_AT)
    returns = [moved.start + c.offset for c in moved.calls]
    assert 0xFFFF80008010B624 in returns  # after bl core_sys_select
    assert returns == [0xFFFF80008010B5C0, 0xFFFF80008010B5D0, 0xFFFF80008010B5E4,
                       0xFFFF80008010B624, 0xFFFF80008010B638]  # fmt: skip
    assert moved.framed == (PSELECT6_AT + 8, 0xFFFF80008010B5FC)
    table = FunctionTable((moved,))
    sample = Sample(0, 0xFFFF80008010B28C, 1, 1, False, (0xFFFF80008010B624,))
    verdict = frames.judge_frames([sample], lambda _: (table,))
    assert (verdict.faults, verdict.frames) == ((), 1)


def test_a_repeated_chain_is_counted_and_faulted_for_every_sample_that_carries_it() -> None:
    wrong = (RET["outer"], RET["main"])  # outer's call of middle under leaf: a fault
    right = (RET["middle"], RET["outer"], RET["main"])
    samples = [Sample(cpu, LEAF_PC, 1, 1, True, chain)
               for cpu in (0, 1, 2) for chain in (wrong, right)]  # fmt: skip
    verdict = frames.judge_frames(samples, lambda _: (TABLE,))
    assert [(f.sample.cpu, f.index) for f in verdict.faults] == [(0, 0), (1, 0), (2, 0)]
    assert all(f.sample.chain == wrong for f in verdict.faults)
    one = frames.judge_frames(samples[:2], lambda _: (TABLE,))
    assert (verdict.samples, verdict.frames, verdict.targets, verdict.unknown) == (
        3 * one.samples, 3 * one.frames, 3 * one.targets, 3 * one.unknown)  # fmt: skip
    # the same chain against other tables is judged again, in the same call: where outer
    # calls leaf itself, the chain holds
    other = (FunctionTable((
        fn("main", BASE, (Call(0x20, True, "outer"),)),
        fn("outer", BASE + 0x100, (Call(0x20, True, "leaf"),)),
        fn("leaf", BASE + 0x400),
    )),)  # fmt: skip
    mixed = frames.judge_frames(samples, lambda s: other if s.cpu == 1 else (TABLE,))
    assert [f.sample.cpu for f in mixed.faults] == [0, 2]
