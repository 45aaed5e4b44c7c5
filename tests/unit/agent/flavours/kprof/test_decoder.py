"""The rendered decoder of kprof's varint-framed stream, fed in arbitrary pieces.

The expected bytes are written out by hand from seeds-spec §2.1 (varint type,
varint payload size, packed payload), not by the code under test.
"""

from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType

import pytest

from harness.agent.module.render import DECODER, load_decoder, render_agent
from harness.agent.module.spec import AgentSpec
from harness.agent.values.layouts import varint_encode, varint_size

PC = 0xFFFF_FFFF_8100_0000
#: type 1, payload 28: info 7, ts 1000, cpu 2, n 1, one PC: 30 bytes on the wire.
KERNEL = bytes([1, 28]) + struct.pack("<QQHHQ", 7, 1000, 2, 1, PC)
#: type 2, payload 32: info 0, ts 2000, pid 42, cpu 3, n 1, one PC.
USER = bytes([2, 32]) + struct.pack("<QQIHHQ", 0, 2000, 42, 3, 1, 0x400000)
#: type 1 with 16 PCs: payload 148 >= 128, so its size takes two varint bytes (0x94 0x01).
DEEP = bytes([1, 0x94, 0x01]) + struct.pack("<QQHH16Q", 0, 3000, 0, 16, *range(16))
#: type 4: ts, pid, then the name as the rest of the payload.
NEWPROC = bytes([4, 16]) + struct.pack("<QI", 5, 1) + b"init"


@pytest.fixture(scope="module")
def decoder(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    out: Path = tmp_path_factory.mktemp("agent")
    render_agent(AgentSpec(flavour="kprof")).write(out)
    return load_decoder(out / DECODER)


def test_varints_are_seven_bit_groups() -> None:
    assert varint_encode(28) == b"\x1c"
    assert varint_encode(148) == b"\x94\x01"
    assert (varint_size(127), varint_size(128), varint_size(16383), varint_size(16384)) == (
        1,
        2,
        2,
        3,
    )


def test_each_record_type_decodes(decoder: ModuleType) -> None:
    records, used = decoder.decode_framed(KERNEL + USER + DEEP + NEWPROC)
    assert used == len(KERNEL + USER + DEEP + NEWPROC)
    kernel, user, deep, proc = records
    assert (kernel["type"], kernel["cpu"], kernel["ts_ns"], kernel["pcs"]) == (1, 2, 1000, [PC])
    assert (user["type"], user["pid"], user["cpu"], user["pcs"]) == (2, 42, 3, [0x400000])
    assert deep["pcs"] == list(range(16))
    assert (proc["type"], proc["pid"], proc["text"]) == (4, 1, "init")


@pytest.mark.parametrize("cut", [1, 2, 3, 7, 29, 31, 45, 100])
def test_records_split_across_reads_are_reassembled(decoder: ModuleType, cut: int) -> None:
    stream = (KERNEL + DEEP + USER) * 3
    pieces = [stream[i : i + cut] for i in range(0, len(stream), cut)]
    framed = decoder.FramedStream()
    records = [record for piece in pieces for record in framed.feed(piece)]
    assert framed.pending == b""
    assert [r["type"] for r in records] == [1, 1, 2] * 3
    assert [r["ts_ns"] for r in records] == [1000, 3000, 2000] * 3


def test_a_cut_stream_leaves_the_tail_pending(decoder: ModuleType) -> None:
    framed = decoder.FramedStream()
    assert framed.feed(KERNEL + USER[:10]) != []
    assert framed.pending == USER[:10]
    records, used = decoder.decode_framed(KERNEL[:-1])
    assert (records, used) == ([], 0)


def test_garbage_is_refused(decoder: ModuleType) -> None:
    with pytest.raises(ValueError, match="unknown framed record type 9"):
        decoder.decode_framed(bytes([9, 1, 0]))
    with pytest.raises(ValueError, match="tail bytes for n = 2"):
        decoder.decode_framed(bytes([1, 28]) + struct.pack("<QQHHQ", 0, 0, 0, 2, PC))
