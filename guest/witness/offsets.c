// SPDX-License-Identifier: GPL-2.0
/*
 * The offsets the emulator's witness reads guest memory with (harness/vm/witness).
 *
 * Compiled to assembly only, against the guest kernel's own build tree, the way the
 * kernel makes its asm-offsets.h: each OFFSET/DEFINE leaves a "->NAME value" line in
 * offsets.s that harness/vm/witness/offsets.py reads. Never linked into the agent, so
 * the witness takes no layout from the code it judges.
 */
#include <linux/kbuild.h>
#include <linux/sched.h>
#include <linux/mm_types.h>
#include <linux/thread_info.h>
#include <linux/preempt.h>
#include <linux/perf_event.h>
#include <asm/ptrace.h>
#include <asm/processor.h>

void witness_offsets(void);

void witness_offsets(void)
{
	/* current (SP_EL0 at EL1): its pid (the thread id), tgid, stack, preempt count */
	OFFSET(TASK_PID, task_struct, pid);
	OFFSET(TASK_TGID, task_struct, tgid);
	OFFSET(TASK_STACK, task_struct, stack);
	OFFSET(TASK_PREEMPT_COUNT, task_struct, thread_info.preempt_count);
	/* whether it has a user context to walk: its mm, and PF_KTHREAD in its flags */
	OFFSET(TASK_MM, task_struct, mm);
	OFFSET(TASK_FLAGS, task_struct, flags);
	DEFINE(PF_KTHREAD_BITS, PF_KTHREAD);
	/* its mm's page table, which TTBR0_EL1 must hold for its user stack to be its own */
	OFFSET(MM_PGD, mm_struct, pgd);
	/* the overflowing event (x0): its count, updated before the handler is called */
	OFFSET(EVENT_COUNT, perf_event, count);
	/* the interrupted context, as the kernel saved it */
	OFFSET(REGS_FP, pt_regs, regs[29]);
	OFFSET(REGS_SP, pt_regs, sp);
	OFFSET(REGS_PC, pt_regs, pc);
	OFFSET(REGS_PSTATE, pt_regs, pstate);
	OFFSET(REGS_PMR_SAVE, pt_regs, pmr_save);
	DEFINE(REGS_SIZE, sizeof(struct pt_regs));
	/* what those fields mean */
	DEFINE(THREAD_SIZE_BYTES, THREAD_SIZE);
	DEFINE(TASK_SIZE_USER, TASK_SIZE_MAX);	/* 6.12: TASK_SIZE_64 is a runtime value (vabits_actual) */
	DEFINE(NMI_MASK_BITS, NMI_MASK);
	DEFINE(PSR_I, PSR_I_BIT);
	DEFINE(PSR_MODE_MASK_BITS, PSR_MODE_MASK);
	DEFINE(PSR_MODE_EL0T, PSR_MODE_EL0t);
	DEFINE(PRIO_IRQON, GIC_PRIO_IRQON);
}
