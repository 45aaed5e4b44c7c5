// SPDX-License-Identifier: GPL-2.0
/*
 * truth: profbench's ground-truth workload, whose functions, call path and
 * instruction mix the harness knows from this binary's symbol table
 * (harness/agent/truth/build.py builds it static, non-PIE, with frame records
 * in every function, leaf ones too, and keeps it unstripped).
 *
 *   truth chain CPU MS   main -> outer -> middle -> leaf for MS ms; leaf spins
 *                        LEAF_ITERATIONS iterations and calls nothing, middle
 *                        reads the clock (a raw syscall, no vDSO) between calls
 *   truth zero CPU MS    a second thread, pinned to CPU too (as mix's), runs
 *                        work -> zero: read(2)s of /dev/zero, ZERO_BLOCK
 *                        bytes each, into a buffer touched before the phase; the
 *                        kernel's time lies in its user-copy loop (arm64:
 *                        __arch_clear_user), reached through read_zero, and is a
 *                        thread's whose tid is not its pid (WITNESS tells a
 *                        kernel sample's tgid from its tid)
 *   truth mix CPU MS     a second thread, pinned to CPU too, runs mix while main
 *                        waits for it (tid != pid: WHO tells a tgid from a tid);
 *                        mix -> hot(3 * s), cold(s), again, with s drawn
 *                        from [SLICE / 2, 3 * SLICE / 2) each round (no period
 *                        a regular sampling clock could alias with); hot and cold
 *                        have the same loop body, so hot runs 3/4 of their
 *                        instructions in every window longer than a few rounds
 *   truth lanes CPU MS L one thread per CPU of the comma list L (at most
 *                        LANES_MAX), each created by main from its CPU (main
 *                        moves there first, so the thread never runs anywhere
 *                        else: glibc pins a thread with an affinity attribute
 *                        only after it started), thread k spinning in its own
 *                        function lanek (lane0, lane1, ...) while main waits
 *                        for them on CPU; each
 *                        prints "lane=k lane_tid=N lane_cpu=N" before it spins
 *                        (WHO: a sample in lanek carries that tid, on that CPU)
 *
 * Built with -fno-ipa-icf so hot and cold stay two functions.
 *
 * It pins itself to CPU, then prints "pid=N tid=N cpu=N kind=K" before the work
 * (tid: the thread that does it) and "calls=N iterations=N rounds=N faults=N
 * begin_ns=N end_ns=N" after it (calls: leaf calls, each one return to middle and
 * one clock syscall, or zero's reads, each one read and one clock syscall; faults: the kernel's count of the working thread's page
 * faults during the work itself, outer's or mix's call, from getrusage; begin_ns
 * and end_ns: CLOCK_MONOTONIC just before that call and just after it returned,
 * the phase's span on the clock the agents stamp samples with), one line each,
 * flushed; then main prints "life_faults=N": every page fault of the process
 * since profctl forked it (getrusage RUSAGE_SELF: exec does not reset it).
 * Exit status: 0 done, 2 usage, 3 could not pin.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LEAF_ITERATIONS (1UL << 22)
#define MIX_SLICE (1UL << 12)
#define MIX_ROUNDS_PER_CLOCK 256
#define ZERO_BLOCK (1UL << 20)
#define LANES_MAX 8
#define LANE_SPIN (1UL << 16)
#define TRUTH_FN __attribute__((noinline, noclone, used))

volatile unsigned long truth_sink;
unsigned long truth_calls, truth_rounds;

/* The spin: no call, no syscall; its frame record links it to middle. */
TRUTH_FN void leaf(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		truth_sink += i;
}

/* hot and cold: the same body; the 3:1 mix is in how many iterations each gets. */
TRUTH_FN void hot(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		truth_sink += i;
}

TRUTH_FN void cold(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		truth_sink += i;
}

/* CLOCK_MONOTONIC through the syscall itself: a vDSO PC would lie outside our text. */
TRUTH_FN long long now_ns(void)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

TRUTH_FN void middle(long long end_ns)
{
	while (now_ns() < end_ns) {
		leaf(LEAF_ITERATIONS);
		truth_calls++;
	}
}

TRUTH_FN void outer(long long end_ns)
{
	middle(end_ns);
	truth_sink++;	/* keeps middle's call from becoming a tail call */
}

static char zero_buf[ZERO_BLOCK];

/* Kernel time in a known place: the kernel zeroes ZERO_BLOCK bytes of ours per call. */
TRUTH_FN void zero(long long end_ns, int fd)
{
	while (now_ns() < end_ns) {
		if (read(fd, zero_buf, ZERO_BLOCK) != (ssize_t)ZERO_BLOCK)
			break;
		truth_calls++;
	}
	truth_sink++;
}

TRUTH_FN void mix(long long end_ns)
{
	unsigned long state = 0x9e3779b97f4a7c15UL, s;

	while (now_ns() < end_ns) {
		for (int k = 0; k < MIX_ROUNDS_PER_CLOCK; k++) {
			state ^= state << 13, state ^= state >> 7, state ^= state << 17;
			s = MIX_SLICE / 2 + state % MIX_SLICE;
			hot(3 * s);
			cold(s);
		}
		truth_rounds += MIX_ROUNDS_PER_CLOCK;
	}
	truth_sink++;
}

/* lane0 .. lane7: one function per thread, so a sample's PC names its thread. */
static volatile unsigned long lane_sink[LANES_MAX];
#define TRUTH_LANE(k)							\
TRUTH_FN void lane##k(long long end_ns)					\
{									\
	while (now_ns() < end_ns)					\
		for (unsigned long i = 0; i < LANE_SPIN; i++)		\
			lane_sink[k] += i;				\
}
TRUTH_LANE(0) TRUTH_LANE(1) TRUTH_LANE(2) TRUTH_LANE(3)
TRUTH_LANE(4) TRUTH_LANE(5) TRUTH_LANE(6) TRUTH_LANE(7)
static void (*const lane_fns[LANES_MAX])(long long) = {
	lane0, lane1, lane2, lane3, lane4, lane5, lane6, lane7,
};

struct truth_lane {
	unsigned long k, cpu;
	long long end_ns;
};

TRUTH_FN void *lane_main(void *arg)
{
	const struct truth_lane *l = arg;

	printf("lane=%lu lane_tid=%ld lane_cpu=%lu\n", l->k, (long)syscall(SYS_gettid), l->cpu);
	fflush(stdout);
	lane_fns[l->k](l->end_ns);
	return NULL;
}

/* Pins the calling thread to ``cpu``; 0 or -1. */
static int pin(unsigned long cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -1 : 0;
}

/* lanes: a thread per CPU of ``list``, each created from its CPU; 0 or -1. */
static int lanes(const char *list, unsigned long home, unsigned long ms, long long *begin_ns,
		 long long *end_ns)
{
	struct truth_lane l[LANES_MAX];
	pthread_t thread[LANES_MAX];
	unsigned long n = 0, k;
	char *end;

	*begin_ns = now_ns();
	while (*list && n < LANES_MAX) {
		l[n].k = n;
		l[n].cpu = strtoul(list, &end, 10);
		l[n].end_ns = *begin_ns + (long long)ms * 1000000LL;
		if (end == list || l[n].cpu >= CPU_SETSIZE)
			return -1;
		list = *end == ',' ? end + 1 : end;
		n++;
	}
	for (k = 0; k < n; k++)	/* the new thread inherits main's one CPU */
		if (pin(l[k].cpu) || pthread_create(&thread[k], NULL, lane_main, &l[k]))
			return -1;
	if (pin(home))
		return -1;
	for (k = 0; k < n; k++)
		pthread_join(thread[k], NULL);
	*end_ns = now_ns();
	return 0;
}

struct truth_work {
	unsigned long cpu, ms;
	const char *kind;
};

/* The work itself, in the calling thread: its lines name that thread's tid. */
TRUTH_FN void *work(void *arg)
{
	const struct truth_work *w = arg;
	struct rusage before, after;
	long long begin_ns, end_ns;
	int fd = -1;

	printf("pid=%d tid=%ld cpu=%lu kind=%s\n", (int)getpid(), (long)syscall(SYS_gettid),
	       w->cpu, w->kind);
	fflush(stdout);
	if (w->kind[0] == 'z') {	/* the phase neither faults the buffer in nor opens */
		memset(zero_buf, 1, sizeof(zero_buf));
		fd = open("/dev/zero", O_RDONLY);
		if (fd < 0)
			return NULL;
	}
	getrusage(RUSAGE_THREAD, &before);
	begin_ns = now_ns();
	end_ns = begin_ns + (long long)w->ms * 1000000LL;
	if (w->kind[0] == 'c')
		outer(end_ns);
	else if (w->kind[0] == 'z')
		zero(end_ns, fd);
	else
		mix(end_ns);
	end_ns = now_ns();
	getrusage(RUSAGE_THREAD, &after);
	printf("calls=%lu iterations=%lu rounds=%lu faults=%ld begin_ns=%lld end_ns=%lld\n",
	       truth_calls, truth_calls * LEAF_ITERATIONS, truth_rounds,
	       after.ru_minflt + after.ru_majflt - before.ru_minflt - before.ru_majflt, begin_ns,
	       end_ns);
	fflush(stdout);
	if (fd >= 0)
		close(fd);
	return NULL;
}

TRUTH_FN int main(int argc, char **argv)
{
	struct truth_work w;
	struct rusage life;
	pthread_attr_t attr;
	pthread_t thread;
	cpu_set_t set;

	long long begin_ns, end_ns;

	if (argc == 5 && !strcmp(argv[1], "lanes")) {
		w.cpu = strtoul(argv[2], NULL, 10);
		if (w.cpu >= CPU_SETSIZE || pin(w.cpu))
			return 3;
		printf("pid=%d tid=%d cpu=%lu kind=lanes\n", (int)getpid(), (int)getpid(), w.cpu);
		fflush(stdout);
		if (lanes(argv[4], w.cpu, strtoul(argv[3], NULL, 10), &begin_ns, &end_ns))
			return 3;
		getrusage(RUSAGE_SELF, &life);
		printf("calls=0 iterations=0 rounds=0 faults=0 begin_ns=%lld end_ns=%lld\n"
		       "life_faults=%ld\n", begin_ns, end_ns, life.ru_minflt + life.ru_majflt);
		fflush(stdout);
		return 0;
	}
	if (argc != 4 || (strcmp(argv[1], "chain") && strcmp(argv[1], "mix") &&
			  strcmp(argv[1], "zero"))) {
		fprintf(stderr, "usage: truth chain|mix|zero CPU MS | truth lanes CPU MS L\n");
		return 2;
	}
	w.kind = argv[1];
	w.cpu = strtoul(argv[2], NULL, 10);
	w.ms = strtoul(argv[3], NULL, 10);
	CPU_ZERO(&set);
	CPU_SET(w.cpu, &set);
	if (w.cpu >= CPU_SETSIZE || sched_setaffinity(0, sizeof(set), &set))
		return 3;
	if (w.kind[0] == 'c') {
		work(&w);
	} else if (pthread_attr_init(&attr) ||
		   pthread_attr_setaffinity_np(&attr, sizeof(set), &set) ||
		   pthread_create(&thread, &attr, work, &w) || pthread_join(thread, NULL)) {
		/* mix, zero: a thread of its own, pinned before it runs, while main joins */
		return 3;
	}
	getrusage(RUSAGE_SELF, &life);
	printf("life_faults=%ld\n", life.ru_minflt + life.ru_majflt);
	fflush(stdout);
	return 0;
}
