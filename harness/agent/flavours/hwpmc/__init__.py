"""The hwpmc flavour: a port of FreeBSD hwpmc's per-CPU sample rings (seeds-spec §4)."""
