"""The kernel's function_graph text as calls under the NMI entry (harness.agent.truth.nmitrace)."""

from __future__ import annotations

from harness.agent.truth.nmitrace import arm_command, collect_command, nmi_trace

HEADER = """# tracer: function_graph
#
# CPU  DURATION                  FUNCTION CALLS
# |     |   |                     |   |   |   |
"""

CLEAN = (
    HEADER
    + """\
 0)               |  pa_overflow [profagent]() {
 0)   0.875 us    |    ktime_get_mono_fast_ns();
 0)               |    pa_produce [profagent]() {
 0)   1.250 us    |      dt_produce [profagent]();
 0)   4.000 us    |    }
 0) + 12.125 us   |  }
"""
)

LOCKED = (
    HEADER
    + """\
 1)               |  pa_overflow [profagent]() {
 0)               |  pa_overflow [profagent]() {
 1)               |    pa_produce [profagent]() {
 0)   0.875 us    |    ktime_get_mono_fast_ns();
 1)               |      pa_mutant_locked [profagent]() {
 1)   0.500 us    |        _raw_spin_lock();
 1)   0.250 us    |        _raw_spin_unlock();
 1)   2.000 us    |      }
 1)   4.000 us    |    }
 0)   3.000 us    |  }
 1) + 10.000 us   |  }
 1)   ==========> |
 1)   0.300 us    |  kmalloc_trace();
"""
)


def test_a_clean_handler_reaches_nothing_forbidden() -> None:
    trace = nmi_trace(CLEAN)
    assert (trace.entries, trace.calls, trace.forbidden, trace.lost) == (1, 3, (), False)


def test_a_lock_below_the_entry_is_named_with_its_path_on_its_own_cpu() -> None:
    trace = nmi_trace(LOCKED)
    assert trace.entries == 2
    assert [str(r) for r in trace.forbidden] == [
        "lock _raw_spin_lock via pa_overflow -> pa_produce -> pa_mutant_locked"
    ]


def test_a_call_outside_the_entry_is_not_the_handlers() -> None:
    assert nmi_trace(LOCKED).calls == 5  # the kmalloc after the handler returned is not


def test_an_overrun_ring_says_its_counts_are_a_floor() -> None:
    assert nmi_trace(CLEAN + "overrun: 0\noverrun: 0\n").lost is False
    assert nmi_trace(CLEAN + "overrun: 0\noverrun: 17\n").lost is True


def test_the_guest_commands_start_at_the_entry_and_stop_the_tracer() -> None:
    assert "echo pa_overflow > /sys/kernel/tracing/set_graph_function" in arm_command()
    assert "function_graph > /sys/kernel/tracing/current_tracer" in arm_command()
    assert collect_command().startswith("echo 0 > /sys/kernel/tracing/tracing_on")
