"""Linux perf in the guest: commands run against a fake perf, counts from recorded output."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import hostshell
from harness.errors import ConfigError, GuestError
from harness.vm import perf, perfread
from harness.vm.perf import PerfSession, record_argv, start_perf, stop_perf
from harness.vm.perfread import PerfRead, parse_perf_output, read_perf_data
from tests.unit.golden import LOGS_DIR

MS = 1_000_000
# Read by hand from the recorded files (tests/data/logs/README.md says how each was made).
PLAIN_SAMPLES = {0: 43, 1: 43}
PLAIN_CPU0_FIRST_LAST = (8_025_467_600, 8_448_040_720)
LOST_COUNTS = (433, 462, 1)  # samples, lost, LOST records on CPU 1
THROTTLES = {0: 59, 1: 59}


def recorded(name: str) -> str:
    return (LOGS_DIR / f"arm64-perf-{name}.txt").read_text()


# --- commands -----------------------------------------------------------------------------


def test_record_argv_samples_the_cpus_with_the_period_in_monotonic_time() -> None:
    argv = record_argv(PerfSession(cpus=(3, 0, 1), period=MS, name="p1", mmap_pages=8))
    assert argv[:2] == ("/usr/bin/perf", "record")
    words = " ".join(argv)
    assert "-C 0,1,3 -e cycles -c 1000000 -k CLOCK_MONOTONIC -m 8 -D -1" in words
    assert "--control fifo:/tmp/p1.ctl,/tmp/p1.ack" in words
    assert argv[-2:] == ("-o", "/tmp/p1.data")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cpus": ()}, "CPU numbers"),
        ({"cpus": (-1,)}, "CPU numbers"),
        ({"period": 0}, "period 0"),
        ({"name": "a b"}, "plain words"),
        ({"event": "cycles;reboot"}, "plain words"),
    ],
)
def test_a_bad_session_is_a_config_error(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"cpus": (0,), "period": MS, **kwargs}
    with pytest.raises(ConfigError, match=message):
        PerfSession(**args)  # type: ignore[arg-type]


FAKE_PERF = """\
import os, signal, sys, threading, time
args = sys.argv[1:]
if "no-such-event" in args:
    print("event syntax error: 'no-such-event'")
    sys.exit(129)
ctl, ack = next(a for a in args if a.startswith("fifo:"))[5:].split(",")
stopped, heard = [], []
signal.signal(signal.SIGINT, lambda *_: stopped.append(1))
def serve():  # as perf does: both FIFOs open read-write, every command acknowledged
    answer = os.open(ack, os.O_RDWR)
    for line in os.fdopen(os.open(ctl, os.O_RDWR)):
        heard.append(line.strip())
        os.write(answer, b"ack\\n")
threading.Thread(target=serve, daemon=True).start()
while not stopped:
    time.sleep(0.01)
print("control:", " ".join(heard))
print("[ perf record: Captured and wrote 0.002 MB (3 samples) ]")
"""


@dataclass(frozen=True)
class Ran:
    stdout: str
    stderr: str
    exit_status: int


class HostShell:
    """Runs the guest commands in bash on the host (busybox's ash reads them the same)."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    def run(self, command: str, *, timeout_s: float | None = None, check: bool = True) -> Ran:
        self.commands.append(command)
        proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                              timeout=timeout_s, check=check)  # fmt: skip
        return Ran(proc.stdout, proc.stderr, proc.returncode)


@pytest.fixture
def fake_perf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "perf"
    script.write_text(f"#!{sys.executable}\n{FAKE_PERF}")
    script.chmod(0o755)
    monkeypatch.setattr(perf, "PERF", str(script))
    monkeypatch.setattr(perf, "SESSION_DIR", str(tmp_path))
    return tmp_path


def test_start_returns_once_perf_acknowledged_and_stop_waits_for_its_exit(fake_perf: Path) -> None:
    shell, session = HostShell(), PerfSession(cpus=(0,), period=MS, name="s")
    pid = start_perf(shell, session, timeout_s=20)
    assert (fake_perf / "s.pid").read_text().strip() == str(pid)
    stopped = shell.run(perf.stop_command(session, timeout_s=20))
    assert stopped.exit_status == 0
    assert "Captured and wrote" in stopped.stdout
    gone = subprocess.run(["kill", "-0", str(pid)], capture_output=True, check=False)
    assert gone.returncode != 0


def test_perf_started_off_records_only_between_enable_and_disable(fake_perf: Path) -> None:
    shell, session = HostShell(), PerfSession(cpus=(0,), period=MS, name="s")
    start_perf(shell, session, timeout_s=20, enable=False)
    perf.switch_perf(shell, session, on=True, timeout_s=20)
    perf.switch_perf(shell, session, on=False, timeout_s=20)
    stopped = shell.run(perf.stop_command(session, timeout_s=20))
    assert "control: disable enable disable" in stopped.stdout


def test_a_control_word_other_than_enable_or_disable_is_refused() -> None:
    with pytest.raises(ConfigError, match="'stop' is not enable or disable"):
        perf.control_command(PerfSession(cpus=(0,), period=MS), "stop")


def test_a_perf_that_is_gone_cannot_be_switched(fake_perf: Path) -> None:
    (fake_perf / "gone.log").write_text("perf exited\n")
    session = PerfSession(cpus=(0,), period=MS, name="gone")
    with pytest.raises(GuestError, match="did not enable") as caught:
        perf.switch_perf(HostShell(), session, on=True, timeout_s=1)
    assert "perf exited" in caught.value.evidence


def test_a_perf_that_never_acknowledges_is_a_guest_error_with_its_log(fake_perf: Path) -> None:
    session = PerfSession(cpus=(0,), period=MS, name="bad", event="no-such-event")
    with pytest.raises(GuestError, match="did not start") as caught:
        start_perf(HostShell(), session, timeout_s=1)
    assert "event syntax error" in caught.value.evidence


def test_stopping_a_perf_that_is_gone_is_a_guest_error(fake_perf: Path) -> None:
    (fake_perf / "gone.pid").write_text("999999\n")
    with pytest.raises(GuestError, match="did not stop cleanly"):
        stop_perf(HostShell(), PerfSession(cpus=(0,), period=MS, name="gone"), timeout_s=1)


# --- recorded output ----------------------------------------------------------------------


def test_plain_run_counts_samples_per_cpu() -> None:
    counts = parse_perf_output(recorded("plain"), period=10 * MS)
    assert counts.version == "perf version 6.1.192"
    assert counts.samples() == PLAIN_SAMPLES
    assert dict(counts.totals)["SAMPLE"] == sum(PLAIN_SAMPLES.values())
    assert all(c.lost == c.throttles == c.throttled_ns == 0 for c in counts.cpus)


def test_a_window_keeps_the_records_inside_it() -> None:
    first, last = PLAIN_CPU0_FIRST_LAST
    counts = parse_perf_output(recorded("plain"), period=10 * MS, window=(first + 1, last))
    assert counts.cpu(0).samples == PLAIN_SAMPLES[0] - 1
    assert (counts.cpu(0).first_ns or 0) > first
    assert counts.window == (first + 1, last)
    assert parse_perf_output(recorded("plain"), period=10 * MS, window=(0, 1)).samples() == {
        0: 0,
        1: 0,
    }


def test_lost_records_are_summed_per_cpu() -> None:
    counts = parse_perf_output(recorded("lost"), period=MS)
    cpu = counts.cpu(1)
    assert (cpu.samples, cpu.lost, cpu.lost_records) == LOST_COUNTS
    assert dict(counts.totals)["LOST"] == LOST_COUNTS[2]


def test_a_lost_record_counts_where_its_losses_were_not_where_it_was_written() -> None:
    # dt, 8 vCPUs (CI): perf's reader fell behind on CPU 1; its ring took no sample from
    # 142.275 s, and the LOST record came at 151.652 s, after the agent's window ended
    lines = ["[001]   142.273066560:   cycles: ", "[001]   142.275117760:   cycles: ",
             "[001]   151.651595792: PERF_RECORD_LOST lost 2829",
             "[001]   151.651595792:   cycles: ", "[000]   151.700000000:   cycles: ",
             "[000]   151.800000000: PERF_RECORD_LOST lost 7"]  # fmt: skip
    text = "\n".join(["### version", "perf version 6.1.192", "### stats", "Aggregated stats:",
                      "          SAMPLE events:          4", "### script", *lines,
                      "### throttle"])  # fmt: skip
    inside = parse_perf_output(text, period=MS, window=(142_000_000_000, 150_000_000_000))
    assert (inside.cpu(1).samples, inside.cpu(1).lost, inside.cpu(1).lost_records) == (2, 2829, 1)
    assert inside.cpu(0).lost == 0  # lost after its sample at 151.7 s: outside
    # a window after the LOST record keeps the sample written with it, not the losses
    after = parse_perf_output(text, period=MS, window=(151_651_595_792, 152_000_000_000))
    assert (after.cpu(1).samples, after.cpu(1).lost) == (1, 0)
    assert after.cpu(0).lost == 7
    # ending before the last sample that preceded the losses: none of them
    before = parse_perf_output(text, period=MS, window=(142_000_000_000, 142_274_000_000))
    assert (before.cpu(1).samples, before.cpu(1).lost) == (1, 0)


def test_throttles_are_counted_with_the_time_spent_throttled() -> None:
    counts = parse_perf_output(recorded("throttle"), period=100_000)
    assert {c.cpu: c.throttles for c in counts.cpus} == THROTTLES
    assert sum(THROTTLES.values()) == dict(counts.totals)["THROTTLE"]
    assert all(c.throttled_ns > 0 for c in counts.cpus if c.throttles)


def test_throttled_time_is_clipped_to_the_window_and_an_open_throttle_lasts_to_its_end() -> None:
    text = "\n".join(
        [
            "### version", "perf version 6.1.192", "### stats", "Aggregated stats:",
            "          SAMPLE events:          0", "### script", "### throttle",
            "0 1000 0x10 [0x40]: PERF_RECORD_THROTTLE: unhandled!",
            "0 3000 0x50 [0x40]: PERF_RECORD_UNTHROTTLE: unhandled!",
            "0 5000 0x90 [0x40]: PERF_RECORD_THROTTLE: unhandled!",
        ]
    )  # fmt: skip
    assert parse_perf_output(text, period=100).cpu(0).throttled_ns == 2000
    clipped = parse_perf_output(text, period=100, window=(2000, 6000)).cpu(0)
    assert (clipped.throttles, clipped.throttled_ns) == (1, 1000 + 1000)


def test_a_truncated_script_section_is_an_error_not_a_smaller_count() -> None:
    text = recorded("plain")
    cut = text[: text.index("### throttle")].rsplit("\n", 3)[0] + "\n### throttle\n"
    with pytest.raises(GuestError, match="perf script showed"):
        parse_perf_output(cut, period=10 * MS)


def test_a_warning_inside_a_sample_line_is_caught_by_the_count_check() -> None:
    # Recorded with perf's stderr merged into the script section: "Processed 957
    # samples and lost 37.30%!" split one sample line, so perf script showed 599.
    with pytest.raises(GuestError, match="showed 599 samples, perf report --stats counted 600"):
        parse_perf_output(recorded("lost-interleaved"), period=MS)


def test_a_missing_section_is_named() -> None:
    with pytest.raises(GuestError, match="no script, throttle section"):
        parse_perf_output("### version\nperf version 6.1.192\n### stats\n", period=MS)


# --- the host's perf reading a guest's perf.data ------------------------------------------


def frames_of(counts: perf.PerfCounts) -> list[tuple[int, int, list[tuple[int, str]]]]:
    """Every sample as the profile reads it: CPU, time, each frame's address and mapping."""
    return [(s.cpu, s.time_ns, [(f.ip, f.dso) for f in s.frames]) for s in counts.stacks]


@pytest.mark.skipif(shutil.which(perfread.HOST_PERF) is None,
                    reason="no perf on the host (`invoke setup` installs linux-perf)")  # fmt: skip
def test_host_perf_reads_a_guest_perf_data_as_the_guest_perf_printed_it(tmp_path: Path) -> None:
    data = tmp_path / "small.data"
    data.write_bytes(gzip.decompress((LOGS_DIR / "arm64-perf-small.data.gz").read_bytes()))
    printed = gzip.decompress((LOGS_DIR / "arm64-perf-small-guest.txt.gz").read_bytes()).decode()
    session = PerfSession(cpus=(0, 1), period=MS, stacks=True, name="small")
    kept = tmp_path / "read.txt"
    host = read_perf_data(hostshell.HostShell(), session, PerfRead(data, keep=kept))
    guest = parse_perf_output(printed, period=MS, cpus=(0, 1))
    assert host.version.splitlines()[0] == "recorded by perf version 6.1.192"  # the guest's
    assert host.cpus == guest.cpus  # samples, lost, throttles, first and last per CPU
    assert sum(c.samples for c in host.cpus) == 1000
    assert [s[:2] for s in frames_of(host)] == [s[:2] for s in frames_of(guest)]
    # Every frame as the guest's perf read it (kernel addresses, user ones by mapping) but
    # one: on arm64 perf adds the caller of a user-mode leaf from the sampled LR, and
    # decides whether to with DWARF unwinding that the host's perf has only for its own
    # architecture ("unwind: target platform=arm64 is not supported"). Those 54 of the
    # 1000 samples lack that one user frame; the leaf, which PROFILE compares, is the same.
    fewer = 0
    for (_, _, mine), (_, _, theirs) in zip(frames_of(host), frames_of(guest), strict=True):
        assert mine[0] == theirs[0]
        if mine != theirs:
            extra = [i for i in range(len(theirs)) if theirs[:i] + theirs[i + 1 :] == mine]
            assert extra, (mine, theirs)
            assert not theirs[extra[0]][1].startswith("[kernel")  # a user frame
            fewer += 1
    assert fewer == 54
    assert "### script" in kept.read_text()


def test_the_host_read_names_kernel_frames_from_the_guests_kallsyms() -> None:
    command = perfread.report_command(
        "/w/test[dt]/perf-03.data", stacks=True, kallsyms="/w/k s.txt"
    )
    assert "script -i '/w/test[dt]/perf-03.data' --kallsyms '/w/k s.txt' -F cpu,time," in command
    assert "--stats >'/w/test[dt]/perf-03.data.stats'" in command


def test_frames_are_read_only_inside_the_span_asked_and_every_sample_is_kept() -> None:
    printed = gzip.decompress((LOGS_DIR / "arm64-perf-small-guest.txt.gz").read_bytes()).decode()
    every = parse_perf_output(printed, period=MS, cpus=(0, 1))
    times = sorted(s.time_ns for s in every.stacks)
    span = (times[300], times[599])
    some = parse_perf_output(printed, period=MS, cpus=(0, 1), stacks_within=span)
    assert some.cpus == every.cpus  # the counts do not depend on it
    assert [s[:2] for s in frames_of(some)] == [s[:2] for s in frames_of(every)]
    inside = [s for s in every.stacks if span[0] <= s.time_ns <= span[1]]
    assert len(inside) == 300
    assert [s for s in some.stacks if s.frames] == inside  # the same frames there
    assert all(not s.frames for s in some.stacks if s not in inside)
