"""Binary layouts of the agent's records: one description drives C and Python.

A `RecordLayout` renders into a packed C struct (with a size assertion) in the
generated ``profagent_abi.h`` and into the generated Python decoder, and it
computes ioctl numbers, so the two sides cannot disagree::

    SAMPLE = RecordLayout("tprof_sample", "TprofSample", "...", (Field("pid", "u32", "..."), ...))
    SAMPLE.size                       # bytes per record
    SAMPLE.struct_format              # "<IIIIQ"
    ioc_read(ord("T"), 4, STAT.size)

Each flavour describes its own records and ioctls in its ``data.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

CType = Literal["u16", "u32", "u64"]
_FORMAT: dict[CType, str] = {"u16": "H", "u32": "I", "u64": "Q"}
_C_TYPE: dict[CType, str] = {"u16": "__u16", "u32": "__u32", "u64": "__u64"}


@dataclass(frozen=True, slots=True)
class Field:
    """One fixed-width little-endian field, or an array of ``count`` of them.

    An array is ``name[count]`` in C; the decoder names its elements ``name[0]``,
    ``name[1]``, … (`names`), each one value like a plain field.
    """

    name: str
    ctype: CType
    doc: str
    count: int = 1

    @property
    def c_type(self) -> str:
        """The UAPI C type (``__u16``/``__u32``/``__u64``)."""
        return _C_TYPE[self.ctype]

    @property
    def c_declarator(self) -> str:
        """Its C declarator: the name, with ``[count]`` for an array."""
        return self.name if self.count == 1 else f"{self.name}[{self.count}]"

    @property
    def names(self) -> tuple[str, ...]:
        """The decoded names of its values: its own, or one per array element."""
        if self.count == 1:
            return (self.name,)
        return tuple(f"{self.name}[{i}]" for i in range(self.count))


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
        return "<" + "".join(f"{f.count if f.count > 1 else ''}{_FORMAT[f.ctype]}"
                             for f in self.fields)  # fmt: skip

    @property
    def size(self) -> int:
        """Bytes per record."""
        return struct.calcsize(self.struct_format)

    @property
    def names(self) -> tuple[str, ...]:
        """The decoded values' names in order (an array's elements: `Field.names`)."""
        return tuple(name for f in self.fields for name in f.names)

    def array(self, record: Mapping[str, int], name: str) -> tuple[int, ...]:
        """The elements of array field ``name`` in a decoded ``record``.

        :raise KeyError: the layout has no field ``name``.
        """
        field = next((f for f in self.fields if f.name == name), None)
        if field is None:
            raise KeyError(f"{self.c_name} has no field {name}")
        return tuple(record[element] for element in field.names)


#: Bytes a varint of ``value`` takes: 7-bit little-endian groups, high bit = more.
def varint_size(value: int) -> int:
    """Encoded length of the unsigned varint ``value`` (1 byte below 128, 2 below 16 384)."""
    if value < 0:
        raise ValueError(f"a varint is unsigned, not {value}")
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def varint_encode(value: int) -> bytes:
    """``value`` as an unsigned varint (what the C encoder writes)."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


Tail = Literal["u64s", "text"]


@dataclass(frozen=True, slots=True)
class FramedRecord:
    """One record type of a varint-framed byte stream (kprof's, seeds-spec §2.1).

    On the wire: varint ``type_id``, varint payload size, then the payload: the
    packed ``header`` fields, then the tail: ``count`` × u64 (``u64s``, ``count``
    names the header field that holds how many) or the rest of the payload as
    text (``text``). The C encoder and the Python decoder are rendered from it.
    """

    type_id: int
    header: RecordLayout
    tail: Tail
    count: str | None = None  # the header field counting the tail's u64s

    @property
    def name(self) -> str:
        """The record's name (its header struct's C name without ``_hdr``)."""
        return self.header.c_name.removesuffix("_hdr")

    def payload_size(self, n: int) -> int:
        """Payload bytes with ``n`` tail u64s (or ``n`` text bytes)."""
        return self.header.size + (8 * n if self.tail == "u64s" else n)

    def encoded_size(self, n: int) -> int:
        """Bytes on the wire: the envelope (type and size varints) and the payload."""
        payload = self.payload_size(n)
        return varint_size(self.type_id) + varint_size(payload) + payload


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
