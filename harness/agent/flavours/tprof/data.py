"""tprof as data: its counters, drop causes, quirk bits, records and ioctls.

The port of NetBSD tprof (seeds-spec §1): per-CPU buffers of S samples swapped
onto a global read list. Everything here is read by the C template
(``guest/agent/flavours/tprof/tprof.c.j2``), the decoder and the oracles::

    TPROF.stat_names        # ('sample', 'overflow', ...), the `stats` file's order
    TPROF.ioctl("TPROF_IOC_START").number
"""

from __future__ import annotations

import dataclasses

from harness.agent.values.info import FlavourInfo, Mutant, Param, Quirk
from harness.agent.values.layouts import Field, Ioctl, RecordLayout, ioc_none, ioc_read, ioc_write

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


# Drop causes, per CPU: every producer call ends in exactly one of these or in
# `x_sample` (recorded in a buffer that reached the read list) or in the current
# buffer (`x_cur_used`, `x_cur_overflow`) while running.
TPROF_DROP_CAUSES: tuple[tuple[str, str], ...] = (
    ("x_overflow", "buffer full: the seed's per-buffer overflow, of queued buffers"),
    ("x_dropbuf_sample", "recorded, then the whole buffer dropped: list full"),
    ("x_overflow_dropbuf", "buffer full, in a buffer later dropped (seed: lost, TP-D1)"),
    ("x_overflow_emptybuf", "buffer full with S = 0 or nothing recorded (seed: lost)"),
    ("x_nobuf", "no buffer installed on this CPU"),
    ("x_not_running", "arrived while tprof was not running"),
    ("x_nested_drop", "a second producer context on the same CPU"),
    ("x_stop_discard", "left in a current buffer freed at STOP"),
    ("x_quirk_lost", "lost on purpose by quirk TP-D1 (the seed's invisible loss)"),
)

#: The seed's cap on S, and the largest port override we allow: one buffer per
#: possible CPU is allocated at START, 24 bytes a sample.
S_CAP = 10_000
MAX_BUFFER_SAMPLES = 1_000_000

TPROF_PARAMS = (
    Param(
        "est_freq", 5000, 0, 10_000_000, "estimated samples/s per CPU; S = min(2 est_freq, 10000)"
    ),
    Param("buffer_samples", 0, 0, MAX_BUFFER_SAMPLES, "S directly (0: from est_freq)"),
    Param("list_limit", 100, 1, 100_000, "filled buffers the read list holds (the seed's 100)"),
)


def samples_per_buffer(est_freq: int, buffer_samples: int) -> int:
    """Tprof's S: ``buffer_samples`` if set, else the seed's ``min(2 est_freq, 10000)``."""
    return buffer_samples or min(2 * est_freq, S_CAP)


TPROF = FlavourInfo(
    sample_drops=(
        "x_dropbuf_sample",
        "x_overflow",
        "x_overflow_dropbuf",
        "x_overflow_emptybuf",
        "x_nobuf",
        "x_not_running",
        "x_nested_drop",
        "x_stop_discard",
        "x_quirk_lost",
    ),
    name="tprof",
    flavour_id=1,
    stats=(
        ("sample", "samples in buffers appended to the read list"),
        ("overflow", "overflow of buffers appended to the read list"),
        ("buf", "buffers appended to the read list"),
        ("emptybuf", "swaps that returned a buffer with nothing recorded"),
        ("dropbuf", "non-empty buffers dropped because the list was full"),
        ("dropbuf_sample", "samples in those dropped buffers"),
        ("x_overflow_dropbuf", "overflow of dropped buffers (the seed loses it: TP-D1)"),
        ("x_overflow_emptybuf", "overflow of empty buffers (the seed loses it: TP-D1/D2)"),
        ("x_nobuf", "producer calls with no buffer installed"),
        ("x_not_running", "producer calls while not running"),
        ("x_nested_drop", "producer calls nested in another on the same CPU"),
        ("x_stop_discard", "samples left in current buffers freed at STOP"),
        ("x_quirk_lost", "overflow lost by quirk TP-D1, as the seed loses it"),
        ("x_swaps", "buffer swaps, all CPUs"),
        ("x_nbuf_on_list", "buffers on the read list now"),
        ("x_nbuf_on_list_max", "most buffers ever on the read list"),
        ("x_bytes_read", "bytes returned by read(2)"),
        ("x_stop_ns", "guest ns the last STOP ioctl took, call to return (TP-O10)"),
    ),
    stats_percpu=(
        ("x_sample", "samples of this CPU in buffers appended to the read list"),
        *TPROF_DROP_CAUSES,
        ("x_swaps", "swaps of this CPU's buffer"),
        ("x_swap_misplaced", "drain work that ran on another CPU and did nothing"),
        ("x_cur_used", "samples in the current buffer"),
        ("x_cur_overflow", "overflow of the current buffer"),
    ),
    # A quirk and a fixed scenario each, where the defect yields a number (seeds-spec §1.7,
    # §6.6): TP-D1 (scenarios/tprof-tp-d1-*.toml) and TP-D9 (tprof-tp-d9-*.toml: the
    # `partial_read` run). TP-D2 has its quirk scenario only: fixed, START refuses S = 0
    # with EINVAL (§7.1 TP-O8; the spec's "or START refused"), so there is no number to
    # set beside the seed's, and a scenario starts before its steps and cannot expect a
    # refused START; tests/guest/test_agent.py test_tp_d2_zero_estimate shows both modes.
    # TP-D3 yields an errno, not a number (§7.1 TP-O7: after a wq_create fault, the next
    # START is EBUSY with the quirk, 0 fixed), and no scenario op injects faults;
    # test_tp_o7_control_errors runs both modes.
    quirks=(
        Quirk(0, "TP-D1", "overflow of dropped and empty buffers is lost, counted nowhere"),
        Quirk(1, "TP-D2", "S = min(2 est_freq, 10000) even when that is 0; START accepts it"),
        Quirk(2, "TP-D3", "a START that fails after taking the backend leaks it: EBUSY after"),
        Quirk(3, "TP-D9", "a partially read buffer goes back on the list past its limit"),
        Quirk(4, "TP-D7", "no buffer for a CPU onlined after START: lost, STOP warns"),
    ),
    record=TPROF_SAMPLE,
    layouts=(TPROF_SAMPLE, TPROF_STAT, TPROF_PARAM),
    ioctls=TPROF_IOCTLS,
    fault_points=("wq_create", "buf_alloc"),
    params=TPROF_PARAMS,
    template_context={},  # filled in below, from the values above
    mutants=(
        Mutant(
            # Every 10th, not 50th: PLACE sees it only in a busy loop's sample, and on a
            # loaded host the loop had 108 of CPU 0's ~1000 samples, so of 20 moved
            # samples none was the loop's in about one run in eight (0.9^20; it survived
            # a quick set). Of 100, about one in 40 000.
            "wrong_cpu",
            "every 10th sample of a CPU records the next CPU's id",
            ("TP-O5", "PLACE"),
        ),
        Mutant(
            "skip_kick_swap", "every 3rd kick of the last CPU returns without its swap", ("TP-O2",)
        ),
        # WHO, not PLACE: PLACE judges the busy loops' samples in spin_loop only (their
        # start runs on profctl's CPU), and on 2 vCPUs the one loop's samples take the
        # workload's pid, which no loop has (the local CI run of fb9bb64: WHERE, WHO)
        Mutant("shared_pid_cache", "a sample's pid comes from a cache all CPUs share", ("WHO",)),
        # The window is the core's, judged by tprof's PROBE (dt runs no probe).
        Mutant(
            "probe_masks_nmi", "the IRQ-off probe window masks pseudo-NMIs too (DAIF.I)", ("PROBE",)
        ),
        Mutant(
            "double_count", "every 100th recorded sample also counts as a nested drop", ("TP-O1",)
        ),
        Mutant(
            "lose_at_swap",
            "one recorded sample of every queued buffer vanishes at the swap",
            ("TP-O1",),
        ),
        Mutant(
            "no_nest_guard",
            "the producer has no recursion guard, as the seed has none (TP-D5)",
            ("TP-O1",),
        ),
        # Judged only where the guest's clock counts instructions (the deterministic case:
        # tprof's budget scenario, input-free). The core's slow_producer breaks C-3 there.
        Mutant(
            "stop_waits",
            "STOP sleeps 1.5 s of guest time first, as the seed's STOP waits on its callouts",
            ("TP-O10",),
            case="deterministic",
        ),
        Mutant(
            "publish_early",
            "the index is published first, the record filled where it then points",
            ("TP-O5",),
        ),
        # Issue 10's fixed races, reintroduced (issue 25): every tprof run on the KASAN
        # kernel, its console judged; the `offline_stop` run opens this one's window.
        Mutant(
            "free_outside_lock",
            "STOP frees an offline CPU's published buffer outside tp.lock and clears the "
            "pointer 200 ms later; a stats_percpu reader reads the freed buffer",
            ("KASAN",),
            case="kasan",
            quick=False,
        ),
        # A leak, not a memory error (nothing the late kick touches was freed): STOPPED
        # sees the buffer it installs after STOP; the `stop_kick` run opens the window.
        Mutant(
            "kick_after_stop",
            "a kick past its running check when STOP began swaps after STOP (tp_swap no "
            "longer refuses it; the window held open), installing a buffer nothing frees",
            ("STOPPED",),
            case="stop_kick",
            quick=False,
        ),
        # Issue 10's fixed set-up order on CPU online, reintroduced: its mutation point is
        # the core's pa_cpu_online (only tprof counts a call that finds no buffer, x_nobuf);
        # the `online` run brings a CPU back while the PMU samples.
        # Issue 10's burst race, reintroduced: its mutation point is the core's
        # pa_overflow; the `burst_timeout` run ends injections' waits as overflows take
        # their bursts, and CALLS counts the calls to the injections that succeeded.
        Mutant(
            "burst_take_plain",
            "an overflow reads a burst, produces it and clears it 1 ms later with plain "
            "accesses and no busy flag: an inject whose wait ends meanwhile takes it back",
            ("CALLS",),
            case="burst_timeout",  # 10 s a run: in the quick set, so CI proves inject's contract
        ),
        # The LKMM's plain-index class on the strict kcsan kernel, in its overlap watch
        # (harness.agent.overlap): the spinners' READ_ONCE of every CPU's cur->used.
        Mutant(
            "plain_used_publish",
            "the producer publishes its buffer's fill index (used) with a plain store, "
            "which other CPUs' stats readers load",
            ("KCSAN",),
            case="kcsan",
            quick=False,
        ),
        Mutant(
            "online_arm_first",
            "a CPU coming online is armed 100 ms before its flavour's per-CPU set-up",
            ("ONLINE",),
            case="online",
            quick=False,
        ),
    ),
)
#: Global statistics that are sums of a per-CPU one under another name.
_PERCPU_ALIASES = {"sample": "x_sample", "overflow": "x_overflow",
                   "dropbuf_sample": "x_dropbuf_sample"}  # fmt: skip


def _stat_sources() -> tuple[tuple[str, str], ...]:
    """Per global statistic, the per-CPU enum it sums (``-1``: kept globally)."""
    percpu = set(TPROF.percpu_names)
    sources = []
    for name in TPROF.stat_names:
        alias = _PERCPU_ALIASES.get(name, name)
        sources.append((name, f"TP_PC_{alias.upper()}" if alias in percpu else "-1"))
    return tuple(sources)


TPROF = dataclasses.replace(
    TPROF,
    template_context={
        "tprof_version": TPROF_VERSION,
        "quirks": TPROF.quirks,
        "stats": TPROF.stats,
        "stats_percpu": TPROF.stats_percpu,
        "stat_sources": _stat_sources(),
        "record": TPROF.record,
    },
)
