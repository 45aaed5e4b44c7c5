"""hwpmc as data: its counters, quirk bits, PMC operations, log record and parameters.

The port of FreeBSD hwpmc (seeds-spec §4, §6): per-CPU rings of ``nsamples``
entries swept on their own CPU by a pinned hrtimer, PMC objects driven through one
multiplexed ioctl, ``SP_IOC_PMC_OP``. Read by the C template
(``guest/agent/flavours/hwpmc/hwpmc.c.j2``), the decoder and the oracles::

    HWPMC.percpu_names              # ('x_recorded', ...), the order of stats_percpu
    PMC_OPS["PMCSTART"]             # 14, the seed's op code
"""

from __future__ import annotations

from harness.agent.values.info import FlavourInfo, Mutant, Param, Quirk
from harness.agent.values.layouts import Field, Ioctl, RecordLayout, ioc

#: PCs a log record holds (the interrupted PC and its callers): the top of
#: kern.hwpmc.callchaindepth's range (seeds-spec §4.1: default 8, range 1-32). The seed's
#: callchain records vary in length; this port's are fixed, sized for the deepest chain.
HW_MAX_DEPTH = 32
#: kern.hwpmc.callchaindepth's default, the seed's.
HW_DEFAULT_DEPTH = 8

HWPMC_LOG_REC = RecordLayout(
    c_name="hwpmc_log_rec",
    py_name="HwpmcLogRec",
    doc="One callchain record in hwpmc/log (depth PCs); seq numbers the log from 1.",
    fields=(
        Field("seq", "u64", "log sequence number, from 1, no gaps: a torn or lost record shows"),
        Field("ts_ns", "u64", "ktime_get_mono_fast_ns() when the sample was taken"),
        Field("pc", "u64", "the interrupted program counter"),
        Field("pmcid", "u32", "id of the PMC that sampled"),
        Field("cpu", "u32", "CPU that took the sample (full width)"),
        Field("pid", "u32", "tgid of the interrupted process; 0xffffffff when none (idle)"),
        Field("tid", "u32", "thread id of the interrupted task"),
        Field("flags", "u32", "bit 0: the sample interrupted user mode"),
        Field("depth", "u32", "PCs in the chain: the interrupted PC, then depth - 1 callers"),
        Field("chain_stop", "u32", "why the walk stopped: pa_chain_stop (1: depth reached)"),
        Field("pad", "u32", "0: keeps the record (and seq's store-release) 8-byte aligned"),
        Field("chain", "u64", "the callers' return addresses (0 past depth)", HW_MAX_DEPTH - 1),
    ),
)

PMC_OP = RecordLayout(
    c_name="pmc_op",
    py_name="PmcOp",
    doc="SP_IOC_PMC_OP's argument: one hwpmc system call, its inputs and outputs.",
    fields=(
        Field("abi", "u32", "the caller's ABI version (HWPMC_ABI)"),
        Field("op", "u32", "PMC_OP_* (the seed's op codes)"),
        Field("id", "u32", "PMC id: in for lookups, out of ALLOCATE"),
        Field("cpu", "u32", "CPU (ALLOCATE SS/SC, PMCADMIN); 0xffffffff: any"),
        Field("mode", "u32", "0 SS, 1 SC, 2 TS (process: sampling on cpuset), 3 TC"),
        Field("flags", "u32", "RW: 1 read, 2 write; PMCADMIN: 1 enable, 2 disable"),
        Field("row", "u32", "PMCADMIN: row; out of ALLOCATE: the row taken"),
        Field("cpuset_base", "u32", "first CPU of cpuset_mask (process mode)"),
        Field("cpuset_mask", "u64", "bit i: CPU cpuset_base + i is in the set (process mode)"),
        Field("value", "u64", "SETCOUNT count, RW value in/out, GETMODULEVERSION version"),
        Field("out0", "u64", "GETDRIVERSTATS / GETCPUINFO outputs, in order"),
        Field("out1", "u64", "ditto"),
        Field("out2", "u64", "ditto"),
        Field("out3", "u64", "ditto"),
        Field("out4", "u64", "ditto"),
        Field("out5", "u64", "ditto"),
        Field("out6", "u64", "ditto"),
        Field("out7", "u64", "ditto"),
    ),
)

#: The seed's op codes (sys/pmc.h), kept so a reader can map them.
PMC_OPS: dict[str, int] = {
    "CONFIGURELOG": 0,
    "FLUSHLOG": 1,
    "GETCPUINFO": 2,
    "GETDRIVERSTATS": 3,
    "GETMODULEVERSION": 4,
    "GETPMCINFO": 5,
    "PMCADMIN": 6,
    "PMCALLOCATE": 7,
    "PMCATTACH": 8,
    "PMCDETACH": 9,
    "PMCGETMSR": 10,
    "PMCRELEASE": 11,
    "PMCRW": 12,
    "PMCSETCOUNT": 13,
    "PMCSTART": 14,
    "PMCSTOP": 15,
    "WRITELOG": 16,
}
PMC_MODES: dict[str, int] = {"SS": 0, "SC": 1, "TS": 2, "TC": 3}
CPU_ANY = 0xFFFFFFFF
HWPMC_ABI = 0x03000000  # major 3 in the high half, as the seed's PMC_VERSION
HWPMC_NROWS = 4  # PMCs per CPU: row 0 samples (the CPU's overflow source), rows 1-3 count
PMC_OP_IOCTL = Ioctl(
    "SP_IOC_PMC_OP", ioc(3, ord("S"), 0x40, PMC_OP.size), PMC_OP.size, "one hwpmc system call"
)

#: GETDRIVERSTATS outputs out0..out7, the seed's struct order.
DRIVER_STATS: tuple[str, ...] = (
    "intr_ignored",
    "intr_processed",
    "intr_bufferfull",
    "syscalls",
    "syscall_errors",
    "buffer_requests",
    "buffer_requests_failed",
    "log_sweeps",
)

HWPMC = FlavourInfo(
    name="hwpmc",
    flavour_id=4,
    records_chains=True,
    sample_drops=(
        "x_ignored",
        "x_bufferfull",
        "x_log_failed",
        "x_discarded_stopped",
        "x_discarded_owner_kernel",
        "x_stalled_nmi",
    ),
    records_chain_stop=True,  # depth, chain_stop
    pairs_profile=True,  # perf samples on where a stalled PMC does not
    stats=(
        ("intr_ignored", "overflows with no running sampling PMC on the CPU"),
        ("intr_processed", "overflows handed to a running sampling PMC"),
        ("intr_bufferfull", "producer calls that found the CPU's ring full (stall events)"),
        ("syscalls", "SP_IOC_PMC_OP calls"),
        ("syscall_errors", "SP_IOC_PMC_OP calls that failed"),
        ("buffer_requests", "log record reservations"),
        ("buffer_requests_failed", "log record reservations refused: the log is full"),
        ("log_sweeps", "sweep invocations, all CPUs"),
        ("x_release_timeouts", "RELEASEs that gave up after release_ms (HW-D12 fixed)"),
        ("x_release_max_ticks", "most sweep ticks a CPU took to free a RELEASEd PMC's entries"),
        ("x_ss_running", "running system-sampling PMCs (the seed's SS-owner count)"),
        ("x_log_records", "records in hwpmc/log now"),
    ),
    stats_percpu=(
        ("x_ignored", "producer calls with no running sampling PMC on this CPU"),
        ("x_recorded", "producer calls that filled an entry"),
        ("x_bufferfull", "producer calls that found the ring full"),
        ("x_swept", "entries the sweeps took off the ring"),
        ("x_logged", "swept entries appended to hwpmc/log"),
        ("x_log_failed", "swept entries the full log refused"),
        ("x_discarded_stopped", "swept entries of a PMC no longer running (quirk HW-D7: 0)"),
        ("x_discarded_owner_kernel", "swept kernel samples of owner-attached PMCs (none here)"),
        ("x_inring", "entries not free now, from the entries' states"),
        ("x_stalled_nmi", "producer calls while soft-stalled (0 with the hardware stall)"),
        ("x_stall_events", "stalls: a PMC's counter stopped on this CPU for a full ring"),
        ("x_restarts", "stalled PMCs a sweep restarted on this CPU"),
        ("x_inuse_blocked_sweeps", "sweeps stopped by a pending entry at the head (HW-D3)"),
        ("x_sweeps", "sweeps of this CPU's ring"),
        ("x_ticks", "sweep timer expiries on this CPU"),
        ("x_pending_resolved", "pending entries a sweep resolved (HW-D3 fixed)"),
        ("x_sweep_lat_sum_ns", "sum over swept entries of sample-to-sweep time"),
        ("x_sweep_lat_max_ns", "longest sample-to-sweep time"),
    ),
    quirks=(
        Quirk(24, "HW-D1", "32-bit 'has samples' word indexed by cpu mod 32"),
        Quirk(25, "HW-D2", "one stall flag per PMC shared by all its CPUs"),
        Quirk(26, "HW-D3", "restart only after progress; a pending entry blocks the ring"),
        Quirk(27, "HW-D4", "START keeps a stale stall flag; RELEASE then skips the stop"),
        Quirk(28, "HW-D7", "samples of stopped PMCs discarded without a count"),
        Quirk(29, "HW-D12", "RELEASE waits without bound (killable; harness watchdog only)"),
    ),
    record=HWPMC_LOG_REC,
    layouts=(HWPMC_LOG_REC, PMC_OP),
    ioctls=(PMC_OP_IOCTL,),
    fault_points=("hwpmc_log",),
    template_context={
        "hwpmc_ops": PMC_OPS,
        "hwpmc_modes": PMC_MODES,
        "hwpmc_abi": HWPMC_ABI,
        "hwpmc_nrows": HWPMC_NROWS,
        "hwpmc_driver_stats": DRIVER_STATS,
    },
    params=(
        Param("nsamples", 32, 1, 65535, "entries per CPU ring (kern.hwpmc.nsamples)"),
        Param("sweep_us", 4000, 100, 1_000_000, "sweep timer period, us (the hardclock)"),
        Param("release_ms", 1000, 1, 60_000, "RELEASE's bound on waiting for entries"),
        # 41 391 records of 304 bytes: more than 4 MiB held of 112 (37 449, HW_MAX_DEPTH 8).
        Param("log_kib", 12288, 4, 65536, "hwpmc/log capacity, KiB"),
        Param(
            "callchaindepth",
            HW_DEFAULT_DEPTH,
            1,
            HW_MAX_DEPTH,
            "PCs per sample: the interrupted one and its callers (kern.hwpmc.callchaindepth)",
        ),
    ),
    mutants=(
        Mutant("skip_bufferfull_count", "every 5th full-ring call counts nothing", ("HW-O1",)),
        Mutant(
            "bufferfull_as_ignored",
            "a full-ring call is counted as ignored (no PMC), not as bufferfull: the sum holds",
            ("STRESS",),
            case="stress",
        ),
        Mutant(
            "lose_swept_entry",
            "every 9th swept entry is freed but neither logged nor counted",
            ("HW-O3",),
        ),
        Mutant(
            "no_restart", "a sweep clears the stall flag but never restarts the counter", ("HW-O5",)
        ),
        Mutant("wrong_log_cpu", "every 20th log record carries cpu + 1", ("HW-O10",)),
        Mutant("uncounted_entry", "every 11th entry goes into a ring uncounted", ("HW-O2",)),
        Mutant(
            "sweep_leaves_last",
            "a timer sweep leaves the last entry it finds in the ring",
            ("HW-O6",),
        ),
        Mutant(
            "shared_stall_flag",
            "one stall flag per PMC for all its CPUs, as the seed's (HW-D2 without the bit)",
            ("HW-O8",),
            case="independence",
        ),
        Mutant(
            "sc_never_counts",
            "START of an SC PMC leaves its counter off",
            ("HW-SC",),
            case="counting",
        ),
        Mutant(
            "ring_one_short",
            "a ring counts as full one entry early (nsamples - 1 entries, a slot kept empty)",
            ("HW-O4", "HW-O2"),
        ),
        Mutant(
            "log_fail_as_discard",
            "a swept entry the log refused is counted as discarded, not as a failed write",
            ("HW-O3",),
        ),
        Mutant(
            "setcount_running",
            "PMCSETCOUNT of a running PMC succeeds (§4.4: EBUSY)",
            ("HW-O9",),
            case="control",
        ),
        Mutant(
            "sweep_lags_release",
            "a CPU's first sweep after a RELEASE leaves its entries for the next tick",
            ("HW-O7",),
        ),
        Mutant(
            "counter_outlives_release",
            "STOP and RELEASE leave each counter running (a flag set only) and the last "
            "RELEASE keeps the sampling events (the close releases them)",
            ("HW-O7",),
        ),
        # The LKMM's plain-index class on the strict kcsan kernel, in hwpmc's overlap run
        # (harness.agent.overlap): the spinners' READ_ONCE of every CPU's ring indices
        # (the state file) meets the NMI's watched plain store. dt's and tprof's are the
        # same class in their rings.
        Mutant(
            "plain_write_index",
            "the producer advances its ring's write index with a plain store, which other "
            "CPUs' state readers load",
            ("KCSAN",),
            case="kcsan",
            quick=False,
        ),
    ),
)
