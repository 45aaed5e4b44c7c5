"""The binary layouts of the agent's records and ioctls: now `harness.agent.values.layouts`.

The flavours' registry reads them, so they sit below it with the agent's other values;
this name stays for what still names it (``guest/agent/profagent_abi.h.j2``'s header
comment, flavour packages outside the tree written against it). New code imports
`harness.agent.values.layouts`::

    from harness.agent.values.layouts import Field, RecordLayout, ioc_read
"""

from __future__ import annotations

from harness.agent.values.layouts import (
    CType,
    Field,
    FramedRecord,
    Ioctl,
    RecordLayout,
    Tail,
    ioc,
    ioc_none,
    ioc_read,
    ioc_write,
    varint_encode,
    varint_size,
)

__all__ = [
    "CType", "Field", "FramedRecord", "Ioctl", "RecordLayout", "Tail",
    "ioc", "ioc_none", "ioc_read", "ioc_write", "varint_encode", "varint_size",
]  # fmt: skip
