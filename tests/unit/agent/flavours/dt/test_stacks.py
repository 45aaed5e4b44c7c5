"""dt's stacks: the event layout's arrays, their decoding, and the events as samples."""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

import pytest

from harness.agent.flavours.dt.data import DT_EVT, DT_STACK_MAX
from harness.agent.flavours.dt.results import CHAIN_TRUNCATED, DtEvent
from harness.agent.flavours.dt.run import event_from
from harness.agent.module.render import DECODER, load_decoder, render_agent
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.chain import check_chain
from harness.agent.values.layouts import Field, RecordLayout
from harness.agent.values.samples import Sample
from tests.unit.agent.flavours.dt.test_oracles import BASE

USER_PC, KERNEL_PC = 0x5100_0878, 0xFFFF_8000_8001_2340
CALLERS = (0x5100_0970, 0x5100_09AC, 0x5100_06CC)
END = 0  # enum pa_chain_stop: the stack's last frame record
NO_REGS = 5


def test_an_array_field_is_one_c_declarator_and_count_values() -> None:
    layout = RecordLayout("r", "R", "doc", (Field("n", "u32", "d"), Field("a", "u64", "d", 3)))
    assert (layout.struct_format, layout.size) == ("<I3Q", 28)
    assert layout.names == ("n", "a[0]", "a[1]", "a[2]")
    assert [f.c_declarator for f in layout.fields] == ["n", "a[3]"]
    assert layout.array({"n": 1, "a[0]": 7, "a[1]": 8, "a[2]": 9}, "a") == (7, 8, 9)
    with pytest.raises(KeyError, match="no field b"):
        layout.array({}, "b")


def test_a_dt_event_holds_the_seeds_two_stacks() -> None:
    # OpenBSD's struct stacktrace: STACKTRACE_MAX (19) PCs, for dtev_kstack and dtev_ustack.
    assert DT_STACK_MAX == 19
    assert DT_EVT.size == 48 + 4 * 4 + 2 * 19 * 8


def packed(ustack: tuple[int, ...], ustop: int, kstack: tuple[int, ...], kstop: int) -> bytes:
    """One event packed by hand, offsets as the C struct declares them."""
    head = struct.pack("<QQQIIIIII", 3, 1000, ustack[0] if ustack else KERNEL_PC, 1, 1, 212,
                       213, 0 if ustack else 1, 0xD7E7C0DE ^ 3)  # fmt: skip
    counts = struct.pack("<IIII", len(kstack), len(ustack), kstop, ustop)
    pad = (0,) * DT_STACK_MAX
    stacks = struct.pack("<19Q19Q", *(kstack + pad)[:19], *(ustack + pad)[:19])
    return head + counts + stacks


def decode(data: bytes, tmp_path: Path) -> list[DtEvent]:
    """``data`` through the rendered decoder and the run's event builder."""
    decoder = load_decoder(render_agent(AgentSpec(flavour="dt")).write(tmp_path) / DECODER)
    return [event_from(e) for e in decoder.decode_all(DT_EVT.c_name, data)]


def test_a_user_event_decodes_into_its_user_chain(tmp_path: Path) -> None:
    (event,) = decode(packed((USER_PC, *CALLERS), END, (), NO_REGS), tmp_path)
    assert (event.ustack_n, event.kstack_n, event.kstack_stop) == (4, 0, NO_REGS)
    assert event.ustack[:5] == (USER_PC, *CALLERS, 0)
    assert event.sample() == Sample(1, USER_PC, 212, 213, user=True, chain=CALLERS, length=4,
                                    stop=END, time_ns=1000)  # fmt: skip


def test_a_kernel_event_decodes_into_its_kernel_chain(tmp_path: Path) -> None:
    kstack = tuple(KERNEL_PC + 16 * i for i in range(DT_STACK_MAX))
    (event,) = decode(packed((), END, kstack, CHAIN_TRUNCATED), tmp_path)
    sample = event.sample()
    assert (sample.user, sample.pc, sample.chain) == (False, KERNEL_PC, kstack[1:])
    assert sample.truncated


def test_dt_runs_judge_chains_at_the_seeds_depth() -> None:
    full = tuple(KERNEL_PC + 16 * i for i in range(DT_STACK_MAX))
    honest = replace(BASE.events[0], kstack_n=19, kstack=full, kstack_stop=CHAIN_TRUNCATED)
    # the core counted two walks on CPU 0: the kernel's, cut at the depth (19 frames),
    # and the kernel event's user walk, ended (none)
    walked = {0: {**BASE.core[0], "x_chain_walks": 2, "x_chain_frames": 19,
                  "x_chain_truncated": 1, "x_chain_end": 1}}  # fmt: skip
    run = replace(BASE, core=walked)
    view = replace(run, events=(honest,)).content()
    assert (view.chain_depth, check_chain(view)) == (DT_STACK_MAX, [])
    # A walk cut below the depth that says it reached the depth: CHAIN fails it.
    cut = replace(honest, kstack_n=5)
    assert [v.oracle for v in check_chain(replace(run, events=(cut,)).content())] == ["CHAIN"]
    # A record that claims more frames than the depth (its PCs cannot hold them): fails.
    long = replace(honest, kstack_n=25)
    found = check_chain(replace(run, events=(long,)).content())
    assert any("longer than 19 frames" in v.observed for v in found)
    # A walk that wrote the depth's frames and says it ended there: fails.
    ended = replace(honest, kstack_stop=0)
    found = check_chain(replace(run, events=(ended,)).content())
    assert any("whose walk says it ended" in v.observed for v in found)


def test_dt_records_against_the_cores_walk_counts() -> None:
    full = tuple(KERNEL_PC + 16 * i for i in range(DT_STACK_MAX))
    honest = replace(BASE.events[0], kstack_n=19, kstack=full, kstack_stop=CHAIN_TRUNCATED)
    # two records cut at the depth, one walk the core counted so: more than were walked
    # (each event's user walk ended: x_chain_end holds them)
    one = {0: {**BASE.core[0], "x_chain_walks": 4, "x_chain_frames": 60,
               "x_chain_truncated": 1, "x_chain_end": 3}}  # fmt: skip
    found = check_chain(replace(BASE, core=one, events=(honest, honest)).content())
    assert [v.observed for v in found] == ["records whose walk stopped at truncated = 2"]
    # the core's stop causes must add up to its walks
    lost = {0: {**one[0], "x_chain_walks": 6, "x_chain_truncated": 2}}  # 5 causes
    found = check_chain(replace(BASE, core=lost, events=(honest, honest)).content())
    assert [v.expected for v in found] == ["x_chain_walks (the sum of the stop causes) = 5"]
