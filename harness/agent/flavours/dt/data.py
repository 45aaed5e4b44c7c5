"""dt as data: its counters, quirk bits, event record and ioctls.

The port of OpenBSD dt(4) (seeds-spec §3): per-open, per-CPU rings of 16 slots.
Everything here is read by the C template (``guest/agent/flavours/dt/dt.c.j2``),
the decoder and the oracles::

    DT.percpu_names         # ('dc_readevt', ...), DTIOC_X_PCPUSTATS's order
    DT.ioctl("DTIOCRECORD").number
"""

from __future__ import annotations

from harness.agent.values.info import FlavourInfo, Mutant, Quirk
from harness.agent.values.layouts import Field, Ioctl, RecordLayout, ioc_read, ioc_write

#: PCs in each of an event's stacks: OpenBSD's STACKTRACE_MAX (<sys/stacktrace.h>), the
#: depth of the seed's ``stack`` and ``ustack`` actions (struct stacktrace's st_pc[]).
DT_STACK_MAX = 19

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
        Field("kstack_n", "u32", "PCs in kstack (the seed's dtev_kstack.st_count)"),
        Field("ustack_n", "u32", "PCs in ustack (the seed's dtev_ustack.st_count)"),
        Field("kstack_stop", "u32", "why the kernel walk stopped (enum pa_chain_stop)"),
        Field("ustack_stop", "u32", "why the user walk stopped (enum pa_chain_stop)"),
        Field("kstack", "u64", "the kernel PC, then its callers (0 past kstack_n)", DT_STACK_MAX),
        Field("ustack", "u64", "the user PC, then its callers (0 past ustack_n)", DT_STACK_MAX),
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


#: Per-open counters of dt, after the per-CPU ones in DTIOC_X_PCPUSTATS.
DT_OPEN_STATS: tuple[tuple[str, str], ...] = (
    ("x_evtcnt", "events readable now, all CPUs (the seed's ds_evtcnt)"),
    ("x_wakeups", "reader wakeups run from the irq_work"),
    ("x_partial_events", "events returned truncated (quirk DT-D2)"),
)
DT_RING_SLOTS = 16

#: The seed's defects dt reproduces (seeds-spec §3.7, §6.6), each with its scenario pair
#: ``scenarios/dt-<defect>-{quirk,fixed}*.toml``, except DT-D3 (below) and the three
#: the fuzzer finds from scratch (``invoke fuzz --flavour dt --quirk DT-D6``: DT-D6,
#: DT-D7 and DT-D10, whose scenarios are ``scenarios/fuzz-dt-dt-d<n>-s<seed>.toml``).
#: DT-D6 and DT-D7 are also mutants their oracle catches in the readers run
#: (``no_reader_mutex``, ``fault_loses_copied``: the same code); DT-D10's quirk makes a
#: re-enable fail with EEXIST, which the fuzzer's ``reprobe`` op meets as a failed ioctl.
#: The others have no bit: DT-D4 and DT-D11 would deadlock or fault in NMI (§6.6: not
#: reproducible in the port); DT-D5 is fixed only, removed by a mutant DT-O8 catches
#: (``seed_count_order``); DT-D8 (no EOF) is behaviour without a number, kept as the seed.
#:
#: DT-D3 has its bit but no scenario pair: the seed's barrier placement lets a reader on a
#: weakly ordered CPU copy a stale or half-written slot, and only such a CPU shows it
#: (§3.8). These guests are arm64 under TCG on an x86-64 host: MTTCG runs the guest's
#: loads and stores with the host's TSO order, and the reader's copy is an out-of-line
#: copy_to_user the compiler does not move loads across, so the quirk build's numbers are
#: the fixed build's (0 torn events both ways). Nor does the strict kcsan kernel judge
#: it, measured in dt's overlap run beside the spinners (quirk 140318 watchpoints, 10000
#: spinner passes; fixed 155911 and 13000; 0 races and every oracle held, both ways).
#: Why, from KCSAN's design: the seed's reader loads the index with smp_rmb + READ_ONCE
#: where acquire is needed, a later load moving earlier, which KCSAN's weak-memory
#: modelling (delayed accesses only, no acquire) cannot express; and its free (WRITE_ONCE
#: then smp_wmb, no release) is seen only if a watched copy of a slot is re-checked while
#: that CPU's producer refills the slot, which needs a full ring at that instant, and the
#: overlap run's reader keeps the rings near empty.
DT_QUIRKS: tuple[Quirk, ...] = (
    Quirk(16, "DT-D1", "GSTATS skiptick and recurevt are the last CPU's, not the sum"),
    Quirk(17, "DT-D2", "read budget rounds up: a partial event, consumed and counted"),
    Quirk(18, "DT-D3", "the reader's barriers as the seed places them (weakly ordered CPUs)"),
    Quirk(19, "DT-D9", "the seed's four per-CPU counters are 32-bit: they wrap at 2^32"),
    Quirk(20, "DT-D6", "readers not serialised, each copy sleeping 1 ms: events read twice"),
    Quirk(21, "DT-D7", "a copy fault returns EFAULT: events copied before it lost, counted read"),
    Quirk(22, "DT-D10", "PRBDISABLE of the profile probe is a silent no-op: re-enable EEXIST"),
)
#: Quirk DT-D9's counters: the seed's own, kept in 32 bits (the x_ ones stay 64-bit).
DT_SEED_PERCPU = ("dc_readevt", "dc_dropevt", "dc_skiptick", "dc_recurevt")

DT = FlavourInfo(
    name="dt",
    flavour_id=2,
    records_chains=True,
    records_chain_stop=True,  # kstack_n/kstack_stop, ustack_n/ustack_stop
    pairs_profile=True,  # its overflow wakes the reader, whose run perf then samples
    probe_drops="dc_dropevt",
    sample_drops=("dc_dropevt", "dc_recurevt", "dc_skiptick"),
    stats=(
        ("readevt", "events read (DTIOCGSTATS)"),
        ("dropevt", "events dropped because the CPU's ring was full"),
        ("skiptick", "profile ticks skipped (seed, quirk DT-D1: the last CPU's only)"),
        ("recurevt", "events dropped for recursion (seed, quirk DT-D1: the last CPU's only)"),
    ),
    stats_percpu=(
        ("dc_readevt", "events the reader copied from this CPU's ring"),
        ("dc_dropevt", "get calls that found this CPU's ring full"),
        ("dc_skiptick", "profile ticks skipped on this CPU"),
        ("dc_recurevt", "get calls while this CPU was already inside one"),
        ("x_committed", "events committed into this CPU's ring"),
        ("x_calls", "get calls on this CPU (E_c)"),
        ("x_inring", "events in the ring now: (cons - prod) mod 16"),
        ("x_seq", "sequence number of the last committed event"),
    ),
    quirks=DT_QUIRKS,
    record=DT_EVT,
    layouts=(DT_EVT, DT_STAT, DT_REQ, DT_PCPU_HDR),
    ioctls=DT_IOCTLS,
    fault_points=("dt_copyout",),
    template_context={
        "dt_open_stats": DT_OPEN_STATS,
        "dt_ring_slots": DT_RING_SLOTS,
        "dt_seed_percpu": DT_SEED_PERCPU,
        "dt_stack_max": DT_STACK_MAX,
    },
    mutants=(
        Mutant(
            "skip_canary", "every 10th event of a CPU is published without its canary", ("DT-O3",)
        ),
        Mutant("drop_uncounted", "every 3rd drop on a full ring goes uncounted", ("DT-O1",)),
        Mutant("ring_holds_14", "a ring is full one slot early: 14 events, not 15", ("DT-O2",)),
        Mutant("gstats_skips_cpu0", "DTIOCGSTATS's readevt leaves CPU 0 out", ("DT-O4",)),
        Mutant("recursion_as_drop", "a recursive get is counted as a drop", ("DT-O6",)),
        Mutant("skiptick_short", "a run of skipped ticks is counted one short", ("DT-O7",)),
        Mutant(
            "retry_get",
            "every 10th get of a CPU is retried, committing one more event",
            ("DT-INJ",),
        ),
        Mutant(
            "producer_skips_open",
            "every 7th producer call of a CPU never reaches the open: no get, nothing counted",
            ("DT-O1",),
        ),
        Mutant(
            "skiptick_pmu_lost",
            "periods the PMU never raised are not counted as skipped ticks (forced ones are)",
            ("DT-O7",),
        ),
        Mutant(
            "kernel_ustack_late",
            "a kernel event's user stack starts at its first caller, the user PC left out",
            ("WITNESS",),
            case="witness",
        ),
        Mutant(
            "no_reader_mutex",
            "DT-D6's fix removed: readers are not serialised, and a copy sleeps 1 ms after "
            "each event as the seed's copy-out may on a page fault",
            ("DT-O10",),
            case="readers",
        ),
        Mutant(
            "fault_loses_copied",
            "DT-D7's fix removed: a copy-out fault returns EFAULT although events were "
            "copied, consumed and counted before it",
            ("DT-O3",),
            case="readers",
        ),
        Mutant(
            "seed_count_order",
            "the seed's DT-D5: a slot published 500 us before the readable count rises, "
            "and the reader waits on the count",
            ("DT-O8",),
            case="racing_reader",
            quick=False,  # a race: caught in most runs, not all (it survived one CI run)
        ),
        # The LKMM classes, on the strict kcsan kernel, in dt's overlap run (a spinner for
        # every CPU reading every CPU's indices and counters while every CPU samples at a
        # 250 us period: harness.agent.overlap; the model in harness.vm.kcsan). On arm64
        # smp_load_acquire and smp_store_release's store are inline asm KCSAN does not
        # instrument: only a plain access (watched) or READ_ONCE/WRITE_ONCE meets them.
        # Caught since the spinners call dt_spin for PA_SPIN_NS a pass (core.c): data-race in
        # dt_consume / dt_pcpu_values, 10 races in 137108 watchpoints, control clean (0 in
        # 127943), 2 vCPUs. With one read a call it was a blind spot: of four runs three
        # survived (0 races in 100213, 113151 and 108638 watchpoints) and one had KCSAN
        # count 2 it printed no report for (harness.vm.kcsan.KcsanWatch.races).
        Mutant(
            "plain_ring_index",
            "the producer publishes its ring's write index with a plain store, not a release",
            ("KCSAN",),
            case="kcsan",
            quick=False,
        ),
        # A known blind spot, measured: survived dt's overlap run (0 races in 102567
        # watchpoints, 16000 spinner passes). KCSAN sees a missing release only by weak-
        # memory modelling: a watched plain access is checked again at later accesses of
        # the same function until a barrier. The slot is filled in dt_fill, out of line
        # (dt_fill.isra.0), which returns, its delayed write checked a last time and
        # dropped, before dt_consume publishes; and on arm64 the reader's acquire load is
        # inline asm KCSAN does not instrument. Kept, and in the agent README's table.
        Mutant(
            "publish_no_release",
            "the producer publishes its write index with WRITE_ONCE: marked, but no release "
            "orders the slot's contents before it",
            ("KCSAN",),
            case="kcsan",
            quick=False,
        ),
        Mutant(
            "plain_index_load",
            "the reader loads another CPU's write index plainly, not with acquire (the "
            "event reader and its wait)",
            ("KCSAN",),
            case="kcsan",
            quick=False,
        ),
        Mutant(
            "plain_stats_read",
            "the per-CPU counters other CPUs' producers change are read plainly",
            ("KCSAN",),
            case="kcsan",
            quick=False,
        ),
        # In the overlap run its report printed, then the guest hung inside it: KCSAN
        # prints under a raw spinlock with interrupts masked, which a pseudo-NMI ignores,
        # and the NMI's own report on that CPU waits on it for ever (RUN-ERROR row).
        Mutant(
            "plain_event_count",
            "the readable-event count, an atomic every CPU's producer raises and the reader "
            "lowers, is a plain int: increments from two CPUs' NMIs race",
            ("KCSAN",),
            case="kcsan",
            quick=False,
        ),
    ),
)
