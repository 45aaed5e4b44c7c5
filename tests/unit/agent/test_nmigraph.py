"""C-2's call graph of a built module (issue 44): real objects, compiled by the cross gcc.

The C below is shaped as the agent is: an overflow handler calling the flavour's
producer through the registry's pointer ``pa_fl``, two flavours' ops tables, one
producer that locks and one that does not, and a call through a kernel object's slot.
"""

from __future__ import annotations

import subprocess

import pytest

from harness import arches
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.core import CoreView, check_nmi_safety, judge_core
from harness.agent.oracles.evidence import Injections
from harness.agent.oracles.report import verdict_lines
from harness.agent.truth.nmigraph import Reach, forbidden_kind, nmi_graph
from harness.process import tool_version

MODULE = r"""
struct ops { const char *name; void (*init)(void); void (*produce)(int); };
struct kobj { long pad; void (*cb)(void); };
extern void _raw_spin_lock(void *lock);
extern void *__kmalloc(unsigned long size, int flags);
extern void irq_work_queue(void *work);
static char lock[8];
static __attribute__((noinline)) void fill(int x) { if (x) irq_work_queue(lock); }
static void good_produce(int x) { fill(x); }
static __attribute__((noinline)) void take(void) { _raw_spin_lock(lock); }
static void bad_produce(int x) { if (x) take(); }
static void setup(void) { __kmalloc(8, 0); }
struct ops pa_flavour_good = { "good", setup, good_produce };
struct ops pa_flavour_bad = { "bad", setup, bad_produce };
struct ops *pa_fl;
/* 6.12's struct file_operations: write at offset 16 here, produce's offset above. */
struct fops { void *owner; void (*write)(int); void (*locked)(int); };
static void locked_write(int x) { if (x) take(); }
struct fops pa_debugfs_fops = { 0, fill, locked_write };
struct fops other_fops = { 0, 0, locked_write };
void pa_overflow(int x) { pa_fl->produce(x); }
void through_kernel(struct kobj *k) { k->cb(); }
"""


@pytest.fixture(scope="module")
def module(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    compiler = f"{arches.get('arm64').cross_compile}gcc"
    if not tool_version(compiler):
        pytest.skip(f"{compiler} is not installed")
    out = tmp_path_factory.mktemp("nmigraph")
    (out / "mod.c").write_text(MODULE)
    subprocess.run([compiler, "-O2", "-fno-pic", "-fno-pie", "-mgeneral-regs-only", "-c",
                    "-o", str(out / "mod.o"), str(out / "mod.c")],
                   check=True, timeout=120)  # fmt: skip
    return (out / "mod.o").read_bytes()


def test_a_clean_producer_reaches_no_lock(module: bytes) -> None:
    graph = nmi_graph(module, flavour="good")
    assert graph.forbidden == ()
    assert {"pa_overflow", "good_produce", "fill"} <= set(graph.functions)
    assert "bad_produce" not in graph.functions  # the other flavour's table: left out
    assert "setup" not in graph.functions  # the table's other slot: not what is called
    # another object's function at produce's offset is not pa_fl's (6.12's fops.write)
    assert "locked_write" not in graph.functions
    assert graph.external == ("irq_work_queue",)
    assert graph.unresolved == ()
    assert graph.calls >= 3  # the indirect call, fill's, irq_work_queue's


def test_a_lock_on_the_producer_path_is_named_with_its_path(module: bytes) -> None:
    graph = nmi_graph(module, flavour="bad")
    assert graph.forbidden == (
        Reach(("pa_overflow", "bad_produce", "take", "_raw_spin_lock"), "lock"),
    )
    view = CoreView(AgentSpec(), {0: {"x_producer_calls_nmi": 3}}, None, Injections(),
                    throttling_disabled=True,
                    nmi_graph=graph)  # fmt: skip
    (violation,) = check_nmi_safety(view)
    assert (violation.oracle, violation.cpu) == ("C-2", None)
    assert violation.observed == "_raw_spin_lock via pa_overflow -> bad_produce -> take"


def test_the_graph_is_a_part_of_c2_with_its_count(module: bytes) -> None:
    graph = nmi_graph(module, flavour="good")
    view = CoreView(AgentSpec(), {0: {"x_producer_calls_nmi": 3}}, None, Injections(),
                    throttling_disabled=True,
                    nmi_graph=graph)  # fmt: skip
    judged = [j for j in judge_core(view) if j.oracle == "C-2"]
    assert [j.part for j in judged] == ["", "graph"]
    assert judged[1].n == graph.calls
    line = verdict_lines([], [("C-2", "no lock")], judged=judged)
    assert line.startswith("PASS")
    assert f"graph: n={graph.calls} call sites from pa_overflow" in line


def test_a_call_through_a_kernel_objects_slot_is_unresolved_not_safe(module: bytes) -> None:
    graph = nmi_graph(module, flavour="good", entry="through_kernel")
    assert len(graph.unresolved) == 1
    assert graph.unresolved[0].startswith("through_kernel+0x")
    assert graph.forbidden == ()


@pytest.mark.parametrize(("name", "kind"), [
    ("_raw_spin_lock_irqsave", "lock"), ("queued_spin_lock_slowpath", "lock"),
    ("mutex_lock_interruptible", "lock"), ("down_read", "lock"), ("__wake_up", "lock"),
    ("__kmalloc.constprop.0", "allocator"), ("kmem_cache_alloc_lru", "allocator"),
    ("kfree", "allocator"), ("vmalloc", "allocator"), ("msleep", "sleep"),
    ("__arch_copy_from_user", "sleep"), ("schedule", "sleep"),
    ("irq_work_queue", None), ("copy_from_user_nofault", None),
    ("ktime_get_mono_fast_ns", None), ("memcpy", None), ("downgrade_write", None),
    ("llist_add_batch", None),
])  # fmt: skip
def test_kernel_callees_are_judged_by_name(name: str, kind: str | None) -> None:
    assert forbidden_kind(name) == kind
