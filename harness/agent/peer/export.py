"""Both profiles in the viewers people use: speedscope's JSON and pprof's ``profile.proto``.

Pure: a `Profile` (folded stacks, callers named at return address - 1 by
`harness.agent.peer.symbols`) in, bytes out::

    Path("profile-01.speedscope.json").write_text(speedscope({"agent": a, "perf": p}))
    Path("profile-01-agent.pb.gz").write_bytes(pprof(a))     # go tool pprof -http : FILE

speedscope has no Python writer to use: its file format is JSON with a published
schema (``file-format-schema.json`` in the speedscope package), and the file holds
both profiles, one "sampled" profile each, with the frames shared, so speedscope
shows them side by side. pprof's format is a protocol buffer: it is encoded with
Google's ``protobuf`` library from the message types of pprof's ``profile.proto``
(github.com/google/pprof, ``proto/profile.proto``), declared below as a descriptor
rather than generated code; gzipped, as pprof writes it. A frame is a function
(its name); a folded profile has no addresses or lines.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from harness.agent.peer.symbols import Profile

#: The speedscope file format's schema, as its files name it.
SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"

_I64, _U64, _BOOL = "TYPE_INT64", "TYPE_UINT64", "TYPE_BOOL"
_REPEATED = "LABEL_REPEATED"
#: pprof's profile.proto, message by message: (field, number, type, label), in its order.
PROFILE_PROTO: dict[str, tuple[tuple[str, int, str, str], ...]] = {
    "Profile": (("sample_type", 1, ".perftools.profiles.ValueType", _REPEATED),
                ("sample", 2, ".perftools.profiles.Sample", _REPEATED),
                ("mapping", 3, ".perftools.profiles.Mapping", _REPEATED),
                ("location", 4, ".perftools.profiles.Location", _REPEATED),
                ("function", 5, ".perftools.profiles.Function", _REPEATED),
                ("string_table", 6, "TYPE_STRING", _REPEATED),
                ("drop_frames", 7, _I64, ""), ("keep_frames", 8, _I64, ""),
                ("time_nanos", 9, _I64, ""), ("duration_nanos", 10, _I64, ""),
                ("period_type", 11, ".perftools.profiles.ValueType", ""),
                ("period", 12, _I64, ""), ("comment", 13, _I64, _REPEATED),
                ("default_sample_type", 14, _I64, "")),
    "ValueType": (("type", 1, _I64, ""), ("unit", 2, _I64, "")),
    "Sample": (("location_id", 1, _U64, _REPEATED), ("value", 2, _I64, _REPEATED),
               ("label", 3, ".perftools.profiles.Label", _REPEATED)),
    "Label": (("key", 1, _I64, ""), ("str", 2, _I64, ""), ("num", 3, _I64, ""),
              ("num_unit", 4, _I64, "")),
    "Mapping": (("id", 1, _U64, ""), ("memory_start", 2, _U64, ""),
                ("memory_limit", 3, _U64, ""), ("file_offset", 4, _U64, ""),
                ("filename", 5, _I64, ""), ("build_id", 6, _I64, ""),
                ("has_functions", 7, _BOOL, ""), ("has_filenames", 8, _BOOL, ""),
                ("has_line_numbers", 9, _BOOL, ""), ("has_inline_frames", 10, _BOOL, "")),
    "Location": (("id", 1, _U64, ""), ("mapping_id", 2, _U64, ""), ("address", 3, _U64, ""),
                 ("line", 4, ".perftools.profiles.Line", _REPEATED),
                 ("is_folded", 5, _BOOL, "")),
    "Line": (("function_id", 1, _U64, ""), ("line", 2, _I64, ""), ("column", 3, _I64, "")),
    "Function": (("id", 1, _U64, ""), ("name", 2, _I64, ""), ("system_name", 3, _I64, ""),
                 ("filename", 4, _I64, ""), ("start_line", 5, _I64, "")),
}  # fmt: skip


def speedscope(profiles: Mapping[str, Profile], *, name: str = "profbench") -> str:
    """A speedscope file holding each of ``profiles`` (its name → profile), frames shared."""
    frames: dict[str, int] = {}
    found = []
    for title, profile in profiles.items():
        stacks = [[frames.setdefault(f, len(frames)) for f in stack]
                  for stack, _ in profile.stacks if stack]  # fmt: skip
        weights = [n for stack, n in profile.stacks if stack]
        found.append({"type": "sampled", "name": title, "unit": "none", "startValue": 0,
                      "endValue": sum(weights), "samples": stacks, "weights": weights})  # fmt: skip
    document = {"$schema": SPEEDSCOPE_SCHEMA, "name": name, "exporter": "profbench",
                "activeProfileIndex": 0, "profiles": found,
                "shared": {"frames": [{"name": f} for f in frames]}}  # fmt: skip
    return json.dumps(document, indent=1) + "\n"


@cache
def _message(name: str) -> Any:
    """The message class ``perftools.profiles.NAME`` of `PROFILE_PROTO`."""
    pool = descriptor_pool.DescriptorPool()
    file = descriptor_pb2.FileDescriptorProto(name="profile.proto", package="perftools.profiles",
                                              syntax="proto3")  # fmt: skip
    field = descriptor_pb2.FieldDescriptorProto
    for message, fields in PROFILE_PROTO.items():
        kind = file.message_type.add(name=message)
        for field_name, number, type_name, label in fields:
            entry = kind.field.add(name=field_name, number=number,
                                   label=field.Label.Value(label or "LABEL_OPTIONAL"))  # fmt: skip
            if type_name.startswith("."):
                entry.type, entry.type_name = field.TYPE_MESSAGE, type_name
            else:
                entry.type = field.Type.Value(type_name)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"perftools.profiles.{name}"))


def pprof_message(profile: Profile, *, period: int = 0, event: str = "cycles") -> Any:
    """``profile`` as a pprof ``Profile`` message: one sample type, ``samples``/``count``."""
    strings: dict[str, int] = {"": 0}

    def index(text: str) -> int:
        return strings.setdefault(text, len(strings))

    message = _message("Profile")()
    message.sample_type.add(type=index("samples"), unit=index("count"))
    message.period_type.type, message.period_type.unit = index(event), index("count")
    message.period = period
    functions: dict[str, int] = {}
    for stack, count in profile.stacks:
        ids = []
        for frame in reversed(stack):  # pprof: the leaf first
            if frame not in functions:
                functions[frame] = len(functions) + 1
                message.function.add(id=functions[frame], name=index(frame),
                                     system_name=index(frame))  # fmt: skip
                location = message.location.add(id=functions[frame])
                location.line.add(function_id=functions[frame])
            ids.append(functions[frame])
        if ids:
            message.sample.add(location_id=ids, value=[count])
    message.string_table.extend(strings)
    return message


def pprof(profile: Profile, *, period: int = 0, event: str = "cycles") -> bytes:
    """``profile`` as pprof writes a profile: ``profile.proto`` serialized, gzipped."""
    data = pprof_message(profile, period=period, event=event).SerializeToString()
    return gzip.compress(data, mtime=0)


def parse_pprof(data: bytes) -> Any:
    """A gzipped (or plain) ``profile.proto`` read back as a ``Profile`` message."""
    raw = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    return _message("Profile").FromString(raw)
