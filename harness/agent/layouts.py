"""Binary layouts of the agent's records: one description drives C and Python.

A `RecordLayout` renders into a packed C struct (with a size assertion) in the
generated ``profagent_abi.h`` and into the generated Python decoder, and it
computes ioctl numbers, so the two sides cannot disagree::

    TPROF_SAMPLE.size                 # 24
    TPROF_SAMPLE.struct_format        # "<IIIIQ"
    ioc_read(ord("T"), 4, TPROF_STAT.size)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal

CType = Literal["u32", "u64"]
_FORMAT: dict[CType, str] = {"u32": "I", "u64": "Q"}
_C_TYPE: dict[CType, str] = {"u32": "__u32", "u64": "__u64"}


@dataclass(frozen=True, slots=True)
class Field:
    """One fixed-width little-endian field."""

    name: str
    ctype: CType
    doc: str

    @property
    def c_type(self) -> str:
        """The UAPI C type (``__u32``/``__u64``)."""
        return _C_TYPE[self.ctype]


@dataclass(frozen=True, slots=True)
class RecordLayout:
    """A packed record: its C struct name and its fields in order."""

    c_name: str
    py_name: str
    doc: str
    fields: tuple[Field, ...]

    @property
    def struct_format(self) -> str:
        """`struct` format of one record (little-endian, no padding)."""
        return "<" + "".join(_FORMAT[f.ctype] for f in self.fields)

    @property
    def size(self) -> int:
        """Bytes per record."""
        return struct.calcsize(self.struct_format)

    @property
    def names(self) -> tuple[str, ...]:
        """Field names in order."""
        return tuple(f.name for f in self.fields)


TPROF_SAMPLE = RecordLayout(
    c_name="tprof_sample",
    py_name="TprofSample",
    doc="One tprof sample as read(2) streams it: the seed's 24-byte LP64 layout.",
    fields=(
        Field("pid", "u32", "thread group id of the interrupted task (0: idle)"),
        Field("tid", "u32", "thread id of the interrupted task"),
        Field("cpu", "u32", "CPU index that took the sample"),
        Field("flags", "u32", "bit 0: the sampled PC is a kernel address"),
        Field("pc", "u64", "the interrupted program counter"),
    ),
)

TPROF_STAT = RecordLayout(
    c_name="tprof_stat",
    py_name="TprofStat",
    doc="TPROF_IOC_GETSTAT's reply: the seed's six counters.",
    fields=(
        Field("sample", "u64", "samples in buffers appended to the read list"),
        Field("overflow", "u64", "overflow of those buffers"),
        Field("buf", "u64", "buffers appended to the read list"),
        Field("emptybuf", "u64", "swaps that returned an empty buffer"),
        Field("dropbuf", "u64", "non-empty buffers dropped because the list was full"),
        Field("dropbuf_sample", "u64", "samples in those dropped buffers"),
    ),
)

TPROF_PARAM = RecordLayout(
    c_name="tprof_param",
    py_name="TprofParam",
    doc="TPROF_IOC_START's argument; the seed ignores it, and so does the port.",
    fields=(
        Field("event", "u64", "ignored"),
        Field("unit", "u64", "ignored"),
        Field("flags", "u64", "ignored"),
    ),
)

DT_EVT = RecordLayout(
    c_name="dt_evt",
    py_name="DtEvt",
    doc="One dt event as read(2) returns it; seq and canary let a reader see torn events.",
    fields=(
        Field("seq", "u64", "per-CPU, per-open sequence number of committed events, from 1"),
        Field("ts_ns", "u64", "ktime_get_mono_fast_ns() when the event was taken"),
        Field("pc", "u64", "the interrupted program counter"),
        Field("probe", "u32", "probe id (1: profile)"),
        Field("cpu", "u32", "CPU that took the event"),
        Field("pid", "u32", "thread group id of the interrupted task (0: idle)"),
        Field("tid", "u32", "thread id of the interrupted task"),
        Field("flags", "u32", "bit 0: the PC is a kernel address"),
        Field("canary", "u32", "DT_CANARY ^ low 32 bits of seq, written last"),
    ),
)

DT_STAT = RecordLayout(
    c_name="dtioc_stat",
    py_name="DtiocStat",
    doc="DTIOCGSTATS's reply: the seed's four counters of this open.",
    fields=(
        Field("readevt", "u64", "events read"),
        Field("dropevt", "u64", "events dropped: ring full"),
        Field("skiptick", "u64", "profile ticks skipped"),
        Field("recurevt", "u64", "events dropped: recursion on the CPU"),
    ),
)

DT_REQ = RecordLayout(
    c_name="dtioc_req",
    py_name="DtiocReq",
    doc="DTIOCPRBENABLE/DISABLE's argument: which probe, and the profile period.",
    fields=(
        Field("probe", "u32", "probe id (1: profile)"),
        Field("pad", "u32", "zero"),
        Field("period_ns", "u64", "profile period; the seed refuses < 200 us"),
    ),
)

DT_PCPU_HDR = RecordLayout(
    c_name="dtioc_pcpu",
    py_name="DtiocPcpu",
    doc="DTIOC_X_PCPUSTATS header; ncpu x nstats u64 follow it in the same buffer.",
    fields=(
        Field("size", "u32", "in: bytes of the whole buffer"),
        Field("ncpu", "u32", "out: nr_cpu_ids"),
        Field("nstats", "u32", "out: values per CPU (DT percpu names)"),
        Field("nopen", "u32", "out: per-open values after the CPUs' (DT open names)"),
    ),
)

# Linux <asm-generic/ioctl.h> encoding (arm64 and x86_64 share it).
_IOC_WRITE = 1
_IOC_READ = 2


def ioc(direction: int, kind: int, number: int, size: int) -> int:
    """Linux ``_IOC(dir, type, nr, size)``."""
    return (direction << 30) | (size << 16) | (kind << 8) | number


def ioc_none(kind: int, number: int) -> int:
    """Linux ``_IO(type, nr)``."""
    return ioc(0, kind, number, 0)


def ioc_read(kind: int, number: int, size: int) -> int:
    """Linux ``_IOR(type, nr, size)``."""
    return ioc(_IOC_READ, kind, number, size)


def ioc_write(kind: int, number: int, size: int) -> int:
    """Linux ``_IOW(type, nr, size)``."""
    return ioc(_IOC_WRITE, kind, number, size)


@dataclass(frozen=True, slots=True)
class Ioctl:
    """One native ioctl: its C macro name and number."""

    name: str
    number: int
    arg_size: int
    doc: str


TPROF_IOC_TYPE = ord("T")
TPROF_VERSION = 3
TPROF_IOCTLS: tuple[Ioctl, ...] = (
    Ioctl("TPROF_IOC_GETVERSION", ioc_read(TPROF_IOC_TYPE, 1, 4), 4, "the ABI version"),
    Ioctl(
        "TPROF_IOC_START",
        ioc_write(TPROF_IOC_TYPE, 2, TPROF_PARAM.size),
        TPROF_PARAM.size,
        "start sampling",
    ),
    Ioctl("TPROF_IOC_STOP", ioc_none(TPROF_IOC_TYPE, 3), 0, "stop sampling, final swaps"),
    Ioctl(
        "TPROF_IOC_GETSTAT",
        ioc_read(TPROF_IOC_TYPE, 4, TPROF_STAT.size),
        TPROF_STAT.size,
        "the six seed counters",
    ),
)


DT_IOC_TYPE = ord("D")
DT_PCPU_MAX = 4096  # bytes profctl passes for DTIOC_X_PCPUSTATS
DT_IOCTLS: tuple[Ioctl, ...] = (
    Ioctl("DTIOCGSTATS", ioc_read(DT_IOC_TYPE, 1, DT_STAT.size), DT_STAT.size, "statistics"),
    Ioctl("DTIOCRECORD", ioc_write(DT_IOC_TYPE, 2, 4), 4, "recording on (1) or off (0)"),
    Ioctl("DTIOCPRBENABLE", ioc_write(DT_IOC_TYPE, 3, DT_REQ.size), DT_REQ.size, "enable"),
    Ioctl("DTIOCPRBDISABLE", ioc_write(DT_IOC_TYPE, 4, DT_REQ.size), DT_REQ.size, "disable"),
    Ioctl(
        "DTIOC_X_PCPUSTATS",
        ioc_read(DT_IOC_TYPE, 64, DT_PCPU_HDR.size),
        DT_PCPU_MAX,
        "port: per-CPU and per-open counters of this open",
    ),
)


def ioctl_named(name: str) -> Ioctl:
    """The native ioctl called ``name``, any flavour."""
    for ioctl in (*TPROF_IOCTLS, *DT_IOCTLS):
        if ioctl.name == name:
            return ioctl
    raise KeyError(name)


def tprof_ioctl(name: str) -> Ioctl:
    """The native tprof ioctl called ``name`` (e.g. ``"TPROF_IOC_START"``)."""
    for ioctl in TPROF_IOCTLS:
        if ioctl.name == name:
            return ioctl
    raise KeyError(name)
