/*
 * profctl - a tiny static guest-side tool that runs a sequence of steps.
 *
 * The harness (harness/agent/profctl.py: the steps; profctl_run.py: a sequence's
 * run) copies it into the guest and drives it
 * over SSH, one invocation per sequence: open the agent's device, issue ioctls,
 * drain its sample stream into a file, poke debugfs control files and start
 * pinned busy loops, all from one process so that file descriptors survive
 * between steps.
 *
 * Each argument is one step, or `-f FILE` reads the steps from FILE, one per
 * line (for sequences longer than an SSH exec request may be: dropbear refuses
 * commands over 9000 bytes). Fields are separated by ':' and only the last
 * field of `write` may itself contain ':' (and spaces):
 *
 *   open:PATH                  open(PATH, O_RDWR)                  -> fd=N
 *   close:FD                   close(FD)                           -> fd=N
 *   ioctl:FD:REQ:SIZE[:HEXIN]  ioctl on a zeroed SIZE-byte buffer,
 *                              pre-filled from HEXIN (REQ: decimal
 *                              or 0x-hex; SIZE 0..4096)            -> rc=N out=HEX
 *   read:FD:PATH:CHUNK         read(FD) in CHUNK-byte reads until
 *                              EOF into PATH (created, truncated)  -> bytes=N reads=N
 *   timeout:SECONDS            later read/wait steps are cut off
 *                              after SECONDS (0: never) by SIGALRM -> seconds=N
 *   write:PATH:TEXT            one write() of TEXT to PATH         -> bytes=N
 *   writefd:FD:TEXT            one write() of TEXT to an open FD   -> bytes=N
 *   cat:PATH                   the whole file, then one "| LINE"
 *                              line per line of it                 -> bytes=N lines=N
 *   spin:CPU:MS                fork a child busy-looping on CPU
 *                              for MS ms (child exits 3 if it
 *                              cannot pin itself)                  -> pid=N cpu=N
 *   exec:CPU:OUT:ARGV          fork a child on CPU that runs the
 *                              program ARGV (space-separated words,
 *                              the first a path) with stdout and
 *                              stderr in OUT (child exits 127 if
 *                              exec fails, 3 if it cannot pin)     -> pid=N cpu=N
 *   wait                       reap every child (spin, readbg,
 *                              exec)                               -> children=N failed=N
 *   sleep:MS                   sleep MS ms                         -> ms=N
 *   pin:CPU                    pin profctl itself to CPU           -> cpu=N
 *   mark:PATH                  create PATH: the host may act now   -> (nothing)
 *   await:PATH                 wait until PATH exists (the host's
 *                              go-ahead), at most `timeout` s      -> waited_ms=N
 *   readbg:FD:PATH:CHUNK[:MS]  `read` in a child sharing FD, while
 *                              later steps run; `wait` reaps it;
 *                              its outcome goes to PATH.status; with
 *                              MS, it sleeps MS ms after each read
 *                              shorter than CHUNK (a reader that
 *                              batches, not one woken per record);
 *                              readers forked by consecutive readbg
 *                              steps wait at a gate that opens as
 *                              the next other step begins, so they
 *                              read at once (racers, not a queue)  -> pid=N
 *   isolate:CPU:PATH           move every user task (every thread of
 *                              every /proc/PID with a non-empty
 *                              cmdline: not a kernel thread) off CPU,
 *                              profctl too; again until a pass moves
 *                              none (a fork during a pass); each
 *                              task's mask before goes to PATH     -> tasks=N moved=N failed=N passes=N
 *                                                                     [first=TID:NAME]
 *   masks:CPU                  every user task whose Cpus_allowed_list
 *                              (/proc/PID/task/TID/status) holds CPU -> tasks=N including=N
 *                                                                     [tids=TID,...] [first=NAME]
 *   restore:CPU:PATH           each task in PATH gets its mask back;
 *                              a user task not in PATH (born after
 *                              isolate) whose mask lacks CPU gets it -> restored=N gone=N born=N failed=N
 *   unload:NAME                delete_module(NAME, O_NONBLOCK): what
 *                              rmmod asks; refused with EAGAIN
 *                              (EWOULDBLOCK) while a file of the
 *                              module is open                      -> (nothing)
 *   repeat:TIMES:COUNT         run the COUNT steps after it TIMES
 *                              times: all but the last run print
 *                              nothing (their failures are counted),
 *                              then this line, then the last run's
 *                              lines as usual (no repeat inside)   -> times=N steps=N failed=N
 *                                                                     [first=OP:ERRNO]
 *
 * Output: exactly one step line per step on stdout, flushed at once (a cat
 * step's "| " lines follow its step line); errno is symbolic (EBUSY, or E<n>):
 *
 *   step=<index> op=<op> ok=1 key=value...
 *   step=<index> op=<op> ok=0 errno=<NAME> [key=value...]
 *
 * A failing step does not stop the sequence (read and wait still report how far
 * they got). All steps are validated before any runs: a usage error prints one
 * line on stderr and exits 2 with nothing on stdout. Otherwise the exit status is 0.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FIELDS 8

enum op { OP_OPEN, OP_CLOSE, OP_IOCTL, OP_READ, OP_TIMEOUT, OP_WRITE,
	  OP_CAT, OP_SPIN, OP_WAIT, OP_SLEEP, OP_PIN, OP_READBG, OP_MARK, OP_AWAIT,
	  OP_WRITEFD, OP_REPEAT, OP_CLOCK, OP_EXEC, OP_ISOLATE, OP_MASKS, OP_RESTORE,
	  OP_UNLOAD, OP_COUNT };

/*
 * Each op's fields after its name, one letter each: p path, t text, f fd,
 * r request, s ioctl size, x hex input, k chunk, S seconds, c cpu, m milliseconds,
 * n a repeat count, K a step count.
 * The first `min` fields are required, the others optional.
 */
static const struct { const char *name, *fields; int min; } OPS[OP_COUNT] = {
	[OP_OPEN] = { "open", "p", 1 },       [OP_CLOSE] = { "close", "f", 1 },
	[OP_IOCTL] = { "ioctl", "frsx", 3 },  [OP_READ] = { "read", "fpk", 3 },
	[OP_TIMEOUT] = { "timeout", "S", 1 }, [OP_WRITE] = { "write", "pt", 2 },
	[OP_CAT] = { "cat", "p", 1 },         [OP_SPIN] = { "spin", "cm", 2 },
	[OP_WAIT] = { "wait", "", 0 },        [OP_SLEEP] = { "sleep", "m", 1 },
	[OP_PIN] = { "pin", "c", 1 },         [OP_READBG] = { "readbg", "fpkm", 3 },
	[OP_MARK] = { "mark", "p", 1 },       [OP_AWAIT] = { "await", "p", 1 },
	[OP_WRITEFD] = { "writefd", "ft", 1 }, [OP_REPEAT] = { "repeat", "nK", 2 },
	[OP_CLOCK] = { "clock", "", 0 },     [OP_EXEC] = { "exec", "cpt", 3 },
	[OP_ISOLATE] = { "isolate", "cp", 2 }, [OP_MASKS] = { "masks", "c", 1 },
	[OP_RESTORE] = { "restore", "cp", 2 },
	[OP_UNLOAD] = { "unload", "p", 1 },
};

/* Upper bounds of the numeric field kinds (keep in step with profctl.py). */
static unsigned long field_max(char kind)
{
	switch (kind) {
	case 'f': return 1048575;        /* fs.nr_open's ceiling */
	case 's': return 4096;
	case 'k': return 16UL << 20;
	case 'S': return 86400;
	case 'c': return CPU_SETSIZE - 1;
	case 'm': return 86400000;
	case 'n': return 10000000;
	case 'K': return 4096;
	default: return ULONG_MAX;       /* 'r' */
	}
}

struct step {
	enum op op;
	const char *path;     /* open, read, write, cat */
	const char *text;     /* write: TEXT; ioctl: HEXIN (maybe "") */
	unsigned long num[3]; /* the numeric fields, in order */
};

static const struct { int code; const char *name; } ERRNOS[] = {
#define E(x) { x, #x }
	E(EPERM), E(ENOENT), E(ESRCH), E(EINTR), E(EIO), E(ENXIO), E(E2BIG),
	E(ENOEXEC), E(EBADF), E(ECHILD), E(EAGAIN), E(ENOMEM), E(EACCES),
	E(EFAULT), E(EBUSY), E(EEXIST), E(EXDEV), E(ENODEV), E(ENOTDIR),
	E(EISDIR), E(EINVAL), E(ENFILE), E(EMFILE), E(ENOTTY), E(EFBIG),
	E(ENOSPC), E(ESPIPE), E(EROFS), E(EPIPE), E(ERANGE), E(EDEADLK),
	E(ENAMETOOLONG), E(ENOSYS), E(ENODATA), E(EOVERFLOW), E(EOPNOTSUPP),
	E(ETIMEDOUT), E(EALREADY), E(EINPROGRESS), E(ECANCELED), E(EMSGSIZE),
	E(ENOBUFS), E(ESHUTDOWN), E(ENOLINK), E(EPROTO), E(EBADMSG),
	E(EPROTONOSUPPORT),
#undef E
};

/* Inside a repeat's silent runs: lines go to /dev/null, failures are counted here. */
static int quiet;
static unsigned long quiet_failed;
static char quiet_first[48];

static volatile sig_atomic_t alarm_fired;
static unsigned int timeout_s;

static const char *errno_name(int code)
{
	static char fallback[16];

	for (size_t i = 0; i < sizeof(ERRNOS) / sizeof(ERRNOS[0]); i++)
		if (ERRNOS[i].code == code)
			return ERRNOS[i].name;
	snprintf(fallback, sizeof(fallback), "E%d", code);
	return fallback;
}

/* Starts a step line; the caller adds " key=value"s, then calls end_line(). */
static void begin_line(int index, enum op op, int err)
{
	printf("step=%d op=%s ok=%d", index, OPS[op].name, err == 0);
	if (err)
		printf(" errno=%s", errno_name(err));
	if (err && quiet && !quiet_failed++)
		snprintf(quiet_first, sizeof(quiet_first), "%s:%s", OPS[op].name, errno_name(err));
}

static void end_line(void)
{
	putchar('\n');
	fflush(stdout);
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 32;
	return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* A plain unsigned number (also 0x-hex when hex_ok) no larger than max: 0, else -1. */
static int parse_num(const char *s, int hex_ok, unsigned long max, unsigned long *out)
{
	int base = hex_ok && s[0] == '0' && (s[1] | 32) == 'x' ? 16 : 10;
	char *end;

	s += base == 16 ? 2 : 0;
	for (const char *p = s; *p; p++)  /* strtoul alone would take signs and spaces */
		if (hex_digit(*p) < 0 || hex_digit(*p) >= base)
			return -1;
	if (!*s)
		return -1;
	errno = 0;
	*out = strtoul(s, &end, base);
	return (errno || *end || *out > max) ? -1 : 0;
}

/* Stores one field of kind `kind`; NULL, else what is wrong with it. */
static const char *parse_field(char kind, const char *value, struct step *st, int *nums)
{
	size_t len = strlen(value);
	unsigned long *num;

	if (kind == 'p' || kind == 't') {
		*(kind == 'p' ? &st->path : &st->text) = value;
		return kind == 'p' && !len ? "empty path" : NULL;
	}
	if (kind == 'x') {
		st->text = value;
		for (size_t i = 0; i < len; i++)
			if (hex_digit(value[i]) < 0)
				return "HEXIN is not hex";
		return len % 2 ? "HEXIN has an odd number of digits"
			: len / 2 > st->num[2] ? "HEXIN is longer than SIZE" : NULL;
	}
	num = &st->num[(*nums)++];
	if (parse_num(value, kind == 'r', field_max(kind), num))
		return "not a number in range";
	return kind == 'k' && *num == 0 ? "CHUNK must be at least 1" : NULL;
}

/* Fills st from arg; NULL on success, else what is wrong with it. */
static const char *parse_step(const char *arg, struct step *st)
{
	char *f[MAX_FIELDS], *colon;
	size_t name_len = strcspn(arg, ":");
	int n = 1, op, nums = 0, max_fields;

	for (op = 0; op < OP_COUNT; op++)
		if (strlen(OPS[op].name) == name_len && !strncmp(arg, OPS[op].name, name_len))
			break;
	if (op == OP_COUNT)
		return "unknown op";
	*st = (struct step){ .op = (enum op)op, .text = "" };
	max_fields = 1 + (int)strlen(OPS[op].fields);
	if (!(f[0] = strdup(arg)))
		return "out of memory";
	/* write's TEXT keeps its ':'s; for other ops, extra fields show up as such */
	while (n < (op == OP_WRITE || op == OP_WRITEFD ? max_fields : MAX_FIELDS) &&
	       (colon = strchr(f[n - 1], ':')) != NULL) {
		*colon = '\0';
		f[n++] = colon + 1;
	}
	if (n - 1 < OPS[op].min || n > max_fields)
		return "wrong number of fields";
	for (int i = 1; i < n; i++) {
		const char *why = parse_field(OPS[op].fields[i - 1], f[i], st, &nums);
		if (why)
			return why;
	}
	return NULL;
}

static void on_alarm(int sig)
{
	(void)sig;
	alarm_fired = 1;
}

/*
 * Arms (seconds > 0) or disarms (0) the timeout of a blocking step. After the
 * first SIGALRM the timer repeats every second, so a signal that lands between
 * the alarm_fired check and the blocking call delays the step instead of hanging it.
 */
static void set_timer(unsigned int seconds)
{
	struct itimerval timer = { { seconds ? 1 : 0, 0 }, { (time_t)seconds, 0 } };

	alarm_fired = 0;
	setitimer(ITIMER_REAL, &timer, NULL);
}

/* ---- isolate, masks, restore: one CPU for the harness's tasks alone ------ */

/* Whether a CPU list ("0-3,5", as the kernel prints one) holds cpu; list is cut up. */
static int list_holds(char *list, unsigned long cpu)
{
	char *range, *save = NULL;
	int found = 0;

	for (range = strtok_r(list, ", \t\n", &save); range && !found;
	     range = strtok_r(NULL, ", \t\n", &save)) {
		char *dash = strchr(range, '-');
		unsigned long low = strtoul(range, NULL, 10);
		unsigned long high = dash ? strtoul(dash + 1, NULL, 10) : low;

		found = low <= cpu && cpu <= high;
	}
	return found;
}

/*
 * Whether spin and exec fork where profctl is (the child pins itself): cpu is
 * online but not in profctl's mask, as after `isolate`. Otherwise they fork from
 * cpu (and fail as before on a CPU that is not online).
 */
static int isolated_from(unsigned long cpu, const cpu_set_t *mine)
{
	char online[4096] = "";
	FILE *f;

	if (cpu >= CPU_SETSIZE || CPU_ISSET(cpu, mine))
		return 0;
	if ((f = fopen("/sys/devices/system/cpu/online", "r")) == NULL)
		return 0;
	if (!fgets(online, sizeof(online), f))
		online[0] = '\0';
	fclose(f);
	return list_holds(online, cpu);
}

static int pin_to(unsigned long cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? errno : 0;
}

/* Writes all of buf to fd (a regular file: short writes are rare); 0 or an errno. */
static int write_all(int fd, const char *buf, size_t len)
{
	for (ssize_t done; len; buf += done, len -= (size_t)done)
		if ((done = write(fd, buf, len)) < 0)
			return errno;
	return 0;
}

static void do_open(int i, const struct step *st)
{
	int fd = open(st->path, O_RDWR);

	begin_line(i, st->op, fd < 0 ? errno : 0);
	if (fd >= 0)
		printf(" fd=%d", fd);
	end_line();
}

static void do_close(int i, const struct step *st)
{
	begin_line(i, st->op, close((int)st->num[0]) ? errno : 0);
	printf(" fd=%lu", st->num[0]);
	end_line();
}

static void do_ioctl(int i, const struct step *st)
{
	unsigned char buf[4096] = { 0 };
	size_t size = st->num[2];
	int rc;

	for (size_t k = 0; st->text[2 * k]; k++)
		buf[k] = (unsigned char)(hex_digit(st->text[2 * k]) << 4 |
					 hex_digit(st->text[2 * k + 1]));
	rc = ioctl((int)st->num[0], st->num[1], size ? (void *)buf : NULL);
	begin_line(i, st->op, rc < 0 ? errno : 0);
	if (rc >= 0)
		printf(" rc=%d out=", rc);
	for (size_t k = 0; rc >= 0 && k < size; k++)
		printf("%02x", buf[k]);
	end_line();
}

/*
 * Read `fd` to EOF (or a failure) into a new file `path`; 0 or an errno. After a
 * read shorter than `chunk`, sleep `pause_ms` (0: read again at once); SIGALRM
 * cuts the sleep short like a read.
 */
static int read_loop(int fd, const char *path, size_t chunk, unsigned int pause_ms,
		     unsigned long long *total, unsigned long long *reads)
{
	struct timespec pause = { pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L };
	char *buf = malloc(chunk);
	int out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int err = out < 0 ? errno : !buf ? ENOMEM : 0;
	ssize_t got;

	set_timer(timeout_s);
	while (!err) {
		if (alarm_fired) {
			err = EINTR;
			break;
		}
		got = read(fd, buf, chunk);
		if (got <= 0) {
			err = got ? errno : 0;
			break;
		}
		(*reads)++;
		*total += (unsigned long long)got;
		err = write_all(out, buf, (size_t)got);
		if (!err && pause_ms && (size_t)got < chunk)
			nanosleep(&pause, NULL);
	}
	set_timer(0);
	if (out >= 0 && close(out) && !err)
		err = errno;
	free(buf);
	return err;
}

static void do_read(int i, const struct step *st)
{
	unsigned long long total = 0, reads = 0;
	int err = read_loop((int)st->num[0], st->path, st->num[1], 0, &total, &reads);

	begin_line(i, st->op, err);
	printf(" bytes=%llu reads=%llu", total, reads);
	end_line();
}

/*
 * The readers' gate: a pipe whose write end only profctl itself holds while
 * consecutive readbg steps fork their children. Each child waits for its EOF,
 * which comes when `open_gate` closes that end as the next other step begins:
 * the readers start together instead of one fork apart (a fork takes longer
 * under TCG than the windows racing readers are meant to hit).
 */
static int gate[2] = { -1, -1 };

static void open_gate(void)
{
	if (gate[1] >= 0)
		close(gate[1]);
	if (gate[0] >= 0)
		close(gate[0]);
	gate[0] = gate[1] = -1;
}

/* In a readbg child: let go of the write end, then wait until profctl lets go of its own. */
static void wait_at_gate(void)
{
	char byte;

	if (gate[0] < 0)
		return;
	close(gate[1]);
	while (read(gate[0], &byte, 1) < 0 && errno == EINTR)
		;
	close(gate[0]);
}

/*
 * A reader in a child sharing the descriptor, so it reads the same open while
 * later steps go on. It stops as `read` does (EOF, failure, or the timeout);
 * its outcome goes to PATH.status as "bytes=N reads=N errno=NAME".
 */
static void do_readbg(int i, const struct step *st)
{
	unsigned long long total = 0, reads = 0;
	char status[4096];
	FILE *out;
	pid_t pid;
	int err, null;

	fflush(stdout);
	if (gate[1] < 0 && pipe2(gate, O_CLOEXEC))
		gate[0] = gate[1] = -1;  /* no gate: the readers start as they are forked */
	pid = fork();
	if (pid == 0) {
		null = open("/dev/null", O_RDWR);  /* let go of the SSH session's pipes */
		dup2(null, 0), dup2(null, 1), dup2(null, 2);
		wait_at_gate();
		err = read_loop((int)st->num[0], st->path, st->num[1], (unsigned int)st->num[2],
				&total, &reads);
		snprintf(status, sizeof(status), "%s.status", st->path);
		out = fopen(status, "w");
		if (out) {
			fprintf(out, "bytes=%llu reads=%llu errno=%s\n", total, reads,
				err ? errno_name(err) : "0");
			fclose(out);
		}
		_exit(0);
	}
	begin_line(i, st->op, pid < 0 ? errno : 0);
	if (pid > 0)
		printf(" pid=%d", (int)pid);
	end_line();
}

static void do_timeout(int i, const struct step *st)
{
	struct sigaction sa = { .sa_handler = on_alarm };  /* no SA_RESTART: read() fails */

	sigemptyset(&sa.sa_mask);
	timeout_s = (unsigned int)st->num[0];
	begin_line(i, st->op, sigaction(SIGALRM, &sa, NULL) ? errno : 0);
	printf(" seconds=%u", timeout_s);
	end_line();
}

static void do_write(int i, const struct step *st)
{
	int fd = open(st->path, O_WRONLY);
	ssize_t done = fd < 0 ? -1 : write(fd, st->text, strlen(st->text));
	int err = done < 0 ? errno : 0;

	if (fd >= 0 && close(fd) && !err)
		err = errno;
	begin_line(i, st->op, err);
	if (!err)
		printf(" bytes=%zd", done);
	end_line();
}

/* One write() of TEXT (maybe empty) to an open descriptor. */
static void do_writefd(int i, const struct step *st)
{
	ssize_t done = write((int)st->num[0], st->text, strlen(st->text));

	begin_line(i, st->op, done < 0 ? errno : 0);
	if (done >= 0)
		printf(" bytes=%zd", done);
	end_line();
}

static void do_cat(int i, const struct step *st)
{
	char block[4096], *data = NULL;
	size_t len = 0, lines = 0, start = 0, got;
	FILE *in = fopen(st->path, "r"), *mem = open_memstream(&data, &len);
	int err = !in ? errno : !mem ? ENOMEM : 0;

	while (!err && (got = fread(block, 1, sizeof(block), in)) > 0)
		fwrite(block, 1, got, mem);
	if (!err && ferror(in))
		err = errno;
	if (in)
		fclose(in);
	if (mem)
		fclose(mem);  /* sets data and len */
	for (size_t k = 0; k < len; k++)
		lines += data[k] == '\n' || k == len - 1;  /* an unterminated last line counts */
	begin_line(i, st->op, err);
	if (!err)
		printf(" bytes=%zu lines=%zu", len, lines);
	putchar('\n');
	while (!err && start < len) {
		char *nl = memchr(data + start, '\n', len - start);
		size_t stop = nl ? (size_t)(nl - data) : len;

		printf("| %.*s\n", (int)(stop - start), data + start);
		start = stop + 1;
	}
	fflush(stdout);
	free(data);
}

static long long now_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec * 1000LL + now.tv_nsec / 1000000;
}

/*
 * The busy loop itself, entered only once its child is pinned: PLACE judges the
 * samples whose PC lies here (harness: `elfsyms.symbol_span(..., "spin_loop")`), not
 * the child's start, which runs where profctl runs until pin_to returns.
 */
static __attribute__((noinline)) void spin_loop(long long ms)
{
	volatile unsigned long counter = 0;

	for (long long end = now_ms() + ms; now_ms() < end;)
		for (int k = 0; k < 1000; k++)
			counter++;
}

/* Spin's child: user-space work only, on one CPU, for NUM[1] ms. */
static void spin_child(const struct step *st)
{
	/* Hold neither the SSH session's pipes nor the agent's device open. */
	closefrom(0);
	if (pin_to(st->num[0]))
		_exit(3);
	spin_loop((long long)st->num[1]);
	_exit(0);
}

/* Exec's child: OUT as stdout and stderr, nothing else open, then ARGV. */
static void exec_child(const struct step *st)
{
	char *argv[16], *words = strdup(st->text), *save = NULL;
	int argc = 0, out, null;

	null = open("/dev/null", O_RDONLY);
	out = open(st->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (!words || null < 0 || out < 0 || pin_to(st->num[0]))
		_exit(3);
	dup2(null, 0), dup2(out, 1), dup2(out, 2);
	closefrom(3);
	for (char *w = strtok_r(words, " ", &save); w && argc < 15; w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	argv[argc] = NULL;
	if (argc)
		execv(argv[0], argv);
	_exit(127);
}

/*
 * Spin and exec: CHILD in a process on CPU NUM[0], its pid printed. Forked from that
 * CPU, so the child is never anywhere else: pinning only in the child would let its
 * first instructions run (and be sampled) on whichever CPU fork() chose. Not when
 * `isolate` moved profctl off that CPU: profctl's own code must not run there, the
 * child pins itself.
 */
static void fork_on_cpu(int i, const struct step *st, void (*child)(const struct step *))
{
	cpu_set_t mine;
	pid_t pid;
	int err;

	if (sched_getaffinity(0, sizeof(mine), &mine) ||
	    (!isolated_from(st->num[0], &mine) && (err = pin_to(st->num[0])))) {
		begin_line(i, st->op, errno);
		end_line();
		return;
	}
	fflush(stdout);  /* the child must not inherit buffered output */
	pid = fork();
	if (pid == 0)
		child(st);  /* never returns */
	err = pid < 0 ? errno : 0;
	sched_setaffinity(0, sizeof(mine), &mine);
	begin_line(i, st->op, err);
	if (pid > 0)
		printf(" pid=%d cpu=%lu", (int)pid, st->num[0]);
	end_line();
}

static void do_spin(int i, const struct step *st)
{
	fork_on_cpu(i, st, spin_child);
}

static void do_exec(int i, const struct step *st)
{
	fork_on_cpu(i, st, exec_child);
}

static void do_wait(int i, const struct step *st)
{
	int children = 0, failed = 0, err = 0, status;

	set_timer(timeout_s);
	while (!err) {
		if (alarm_fired) {
			err = EINTR;
			break;
		}
		if (waitpid(-1, &status, 0) < 0) {
			err = errno == ECHILD ? 0 : errno;
			break;
		}
		children++;
		failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	set_timer(0);
	begin_line(i, st->op, err);
	printf(" children=%d failed=%d", children, failed);
	end_line();
}

static void do_sleep(int i, const struct step *st)
{
	struct timespec left = { (time_t)(st->num[0] / 1000), (long)(st->num[0] % 1000) * 1000000 };
	int rc;

	while ((rc = nanosleep(&left, &left)) != 0 && errno == EINTR)
		;
	begin_line(i, st->op, rc ? errno : 0);
	printf(" ms=%lu", st->num[0]);
	end_line();
}

/* Create PATH (empty): tells the host that the sequence reached this point. */
static void do_mark(int i, const struct step *st)
{
	int fd = open(st->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int err = fd < 0 ? errno : 0;

	if (fd >= 0 && close(fd))
		err = errno;
	begin_line(i, st->op, err);
	end_line();
}

/* Wait until PATH exists (the host's go-ahead), polling every 10 ms, for at most
 * the `timeout` seconds (60 without one). */
static void do_await(int i, const struct step *st)
{
	struct timespec tick = { 0, 10 * 1000000 };
	unsigned long waited_ms = 0, limit_ms = (timeout_s ? timeout_s : 60) * 1000UL;
	int err = 0;

	while (access(st->path, F_OK) != 0) {
		if (waited_ms >= limit_ms) {
			err = ETIMEDOUT;
			break;
		}
		nanosleep(&tick, NULL);
		waited_ms += 10;
	}
	begin_line(i, st->op, err);
	printf(" waited_ms=%lu", waited_ms);
	end_line();
}

static void do_pin(int i, const struct step *st)
{
	begin_line(i, st->op, pin_to(st->num[0]));
	printf(" cpu=%lu", st->num[0]);
	end_line();
}

/* The guest's CLOCK_MONOTONIC, in ns: brackets the steps around it in guest time. */
static void do_clock(int i, const struct step *st)
{
	struct timespec now;
	int err = clock_gettime(CLOCK_MONOTONIC, &now) ? errno : 0;

	begin_line(i, st->op, err);
	if (!err)
		printf(" ns=%lld", now.tv_sec * 1000000000LL + now.tv_nsec);
	end_line();
}


/*
 * delete_module(2) as rmmod calls it, without waiting: a module whose files are open
 * must refuse (EAGAIN), one nobody holds goes. The module name is the step's path field.
 */
static void do_unload(int i, const struct step *st)
{
	long rc = syscall(SYS_delete_module, st->path, O_NONBLOCK);

	begin_line(i, st->op, rc ? errno : 0);
	end_line();
}

#define MAX_SAVED 4096

/* Calls fn(pid, tid, arg) for every thread of every user task: a /proc/PID whose
 * cmdline is not empty (kernel threads and zombies have none). */
static void for_user_tasks(void (*fn)(const char *pid, pid_t tid, void *arg), void *arg)
{
	DIR *proc = opendir("/proc"), *tasks;
	struct dirent *p, *t;
	char path[300], c;
	int fd;
	ssize_t got;

	while (proc && (p = readdir(proc)) != NULL) {
		if (!isdigit((unsigned char)p->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", p->d_name);
		fd = open(path, O_RDONLY);
		got = fd < 0 ? 0 : read(fd, &c, 1);
		if (fd >= 0)
			close(fd);
		snprintf(path, sizeof(path), "/proc/%s/task", p->d_name);
		if (got != 1 || (tasks = opendir(path)) == NULL)
			continue;
		while ((t = readdir(tasks)) != NULL)
			if (isdigit((unsigned char)t->d_name[0]))
				fn(p->d_name, (pid_t)atoi(t->d_name), arg);
		closedir(tasks);
	}
	if (proc)
		closedir(proc);
}

/* The task's name (status "Name:"), with anything but [A-Za-z0-9._-] as '_'. */
static void task_name(const char *pid, pid_t tid, char *out, size_t size)
{
	char path[300], line[256];
	FILE *f;

	snprintf(out, size, "?");
	snprintf(path, sizeof(path), "/proc/%s/task/%d/status", pid, (int)tid);
	if ((f = fopen(path, "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Name:", 5)) {
			char *name = line + 5 + strspn(line + 5, " \t");

			name[strcspn(name, "\n")] = '\0';
			for (char *k = name; *k; k++)
				if (!isalnum((unsigned char)*k) && !strchr("._-", *k))
					*k = '_';
			snprintf(out, size, "%s", *name ? name : "?");
			break;
		}
	fclose(f);
}

struct isolation {
	unsigned long cpu;
	FILE *save;		/* isolate: every task's mask before */
	int tasks, moved, failed, pass_moved;
	char first[64];		/* the first task that could not be moved */
	pid_t tids[MAX_SAVED];	/* restore: the tasks PATH names, and their masks */
	cpu_set_t masks[MAX_SAVED];
	int saved, restored, gone, born;
	char list[256];		/* masks: the tids whose mask holds the CPU */
};

static void isolate_task(const char *pid, pid_t tid, void *arg)
{
	struct isolation *iso = arg;
	cpu_set_t set;

	int seen = 0;

	if (sched_getaffinity(tid, sizeof(set), &set))
		return;		/* gone since the walk listed it */
	iso->tasks++;
	for (int k = 0; k < iso->saved && !seen; k++)
		seen = iso->tids[k] == tid;
	if (!seen && iso->saved < MAX_SAVED) {	/* its mask before, once: restore's */
		iso->tids[iso->saved++] = tid;
		fprintf(iso->save, "%d", (int)tid);
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &set))
				fprintf(iso->save, " %d", c);
		fputc('\n', iso->save);
	}
	if (!CPU_ISSET(iso->cpu, &set))
		return;		/* off the CPU already (moved in an earlier pass) */
	CPU_CLR(iso->cpu, &set);
	if (CPU_COUNT(&set) && !sched_setaffinity(tid, sizeof(set), &set)) {
		iso->moved++;
		iso->pass_moved++;
	} else if (!iso->failed++) {
		int at = snprintf(iso->first, sizeof(iso->first), "%d:", (int)tid);

		task_name(pid, tid, iso->first + at, sizeof(iso->first) - (size_t)at);
	}
}

static void do_isolate(int i, const struct step *st)
{
	struct isolation *iso = calloc(1, sizeof(*iso));
	int passes = 0, err = !iso ? ENOMEM : 0;

	if (iso && (iso->save = fopen(st->path, "w")) == NULL)
		err = errno;
	while (!err && passes < 8) {
		iso->cpu = st->num[0];
		iso->tasks = iso->failed = iso->pass_moved = 0;
		passes++;
		for_user_tasks(isolate_task, iso);
		if (!iso->pass_moved)
			break;
	}
	if (iso && iso->save && fclose(iso->save) && !err)
		err = errno;
	begin_line(i, st->op, err);
	if (!err)
		printf(" tasks=%d moved=%d failed=%d passes=%d", iso->tasks, iso->moved,
		       iso->failed, passes);
	if (!err && iso->failed)
		printf(" first=%s", iso->first);
	end_line();
	free(iso);
}

/* 1 if the task's Cpus_allowed_list holds cpu, 0 if not, -1 if unreadable. */
static int allowed_on(const char *pid, pid_t tid, unsigned long cpu)
{
	char path[300], line[4096];
	int found = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/task/%d/status", pid, (int)tid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (found < 0 && fgets(line, sizeof(line), f))
		if (!strncmp(line, "Cpus_allowed_list:", strlen("Cpus_allowed_list:")))
			found = list_holds(line + strlen("Cpus_allowed_list:"), cpu);
	fclose(f);
	return found;
}

static void mask_task(const char *pid, pid_t tid, void *arg)
{
	struct isolation *iso = arg;
	size_t at = strlen(iso->list);

	int on = allowed_on(pid, tid, iso->cpu);

	if (on < 0)
		return;		/* gone since the walk listed it */
	iso->tasks++;
	if (!on)
		return;
	if (!iso->moved++)
		task_name(pid, tid, iso->first, sizeof(iso->first));
	if (at + 12 < sizeof(iso->list))
		snprintf(iso->list + at, sizeof(iso->list) - at, "%s%d", at ? "," : "", (int)tid);
}

static void do_masks(int i, const struct step *st)
{
	struct isolation *iso = calloc(1, sizeof(*iso));

	begin_line(i, st->op, iso ? 0 : ENOMEM);
	if (iso) {
		iso->cpu = st->num[0];
		for_user_tasks(mask_task, iso);
		printf(" tasks=%d including=%d", iso->tasks, iso->moved);
		if (iso->moved)
			printf(" tids=%s first=%s", iso->list, iso->first);
	}
	end_line();
	free(iso);
}

static void restore_born(const char *pid, pid_t tid, void *arg)
{
	struct isolation *iso = arg;
	cpu_set_t set;

	(void)pid;
	for (int k = 0; k < iso->saved; k++)
		if (iso->tids[k] == tid)
			return;
	if (sched_getaffinity(tid, sizeof(set), &set) || CPU_ISSET(iso->cpu, &set))
		return;
	CPU_SET(iso->cpu, &set);
	if (sched_setaffinity(tid, sizeof(set), &set))
		iso->failed++;
	else
		iso->born++;
}

/* PATH's lines ("TID CPU CPU ..."), as isolate wrote them; 0 or an errno. */
static int read_saved(const char *path, struct isolation *iso)
{
	FILE *f = fopen(path, "r");
	char line[8192], *word, *save;

	if (!f)
		return errno;
	while (iso->saved < MAX_SAVED && fgets(line, sizeof(line), f)) {
		if ((word = strtok_r(line, " \n", &save)) == NULL)
			continue;
		iso->tids[iso->saved] = (pid_t)atoi(word);
		CPU_ZERO(&iso->masks[iso->saved]);
		while ((word = strtok_r(NULL, " \n", &save)) != NULL)
			if (atoi(word) >= 0 && atoi(word) < CPU_SETSIZE)
				CPU_SET(atoi(word), &iso->masks[iso->saved]);
		iso->saved++;
	}
	fclose(f);
	return 0;
}

static void do_restore(int i, const struct step *st)
{
	struct isolation *iso = calloc(1, sizeof(*iso));
	int err = iso ? read_saved(st->path, iso) : ENOMEM;

	for (int k = 0; !err && k < iso->saved; k++) {
		if (!sched_setaffinity(iso->tids[k], sizeof(cpu_set_t), &iso->masks[k]))
			iso->restored++;
		else if (errno == ESRCH)
			iso->gone++;
		else
			iso->failed++;
	}
	if (!err) {
		iso->cpu = st->num[0];
		for_user_tasks(restore_born, iso);
	}
	begin_line(i, st->op, err);
	if (!err)
		printf(" restored=%d gone=%d born=%d failed=%d", iso->restored, iso->gone,
		       iso->born, iso->failed);
	end_line();
	free(iso);
}

static void (*const RUN[OP_COUNT])(int, const struct step *) = {
	[OP_OPEN] = do_open, [OP_CLOSE] = do_close,     [OP_IOCTL] = do_ioctl,
	[OP_READ] = do_read, [OP_TIMEOUT] = do_timeout, [OP_WRITE] = do_write,
	[OP_CAT] = do_cat,   [OP_SPIN] = do_spin,       [OP_WAIT] = do_wait,
	[OP_SLEEP] = do_sleep, [OP_PIN] = do_pin, [OP_READBG] = do_readbg,
	[OP_MARK] = do_mark, [OP_AWAIT] = do_await, [OP_WRITEFD] = do_writefd,
	[OP_CLOCK] = do_clock, [OP_EXEC] = do_exec, [OP_ISOLATE] = do_isolate,
	[OP_MASKS] = do_masks, [OP_RESTORE] = do_restore, [OP_UNLOAD] = do_unload,
	[OP_REPEAT] = NULL,	/* main() runs it: do_repeat */
};

/* One step; any step but readbg first opens the readers' gate. */
static void run_step(int i, const struct step *st)
{
	if (st->op != OP_READBG)
		open_gate();
	RUN[st->op](i, st);
}

/* repeat:TIMES:COUNT at `index`: TIMES - 1 silent runs, its line, one printed run. */
static void do_repeat(int index, const struct step *steps)
{
	unsigned long times = steps[index].num[0], count = steps[index].num[1];
	int saved, null;

	fflush(stdout);
	/* High descriptors: the repeated steps' opens number as they would alone. */
	saved = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 1000);
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0) {
		int high = fcntl(null, F_DUPFD_CLOEXEC, 1000);

		close(null);
		null = high;
	}
	quiet = 1;
	quiet_failed = 0;
	if (saved >= 0 && null >= 0 && dup2(null, STDOUT_FILENO) >= 0) {
		for (unsigned long t = 1; t < times; t++)
			for (unsigned long k = 1; k <= count; k++)
				run_step(index + (int)k, &steps[index + k]);
		fflush(stdout);
		dup2(saved, STDOUT_FILENO);
	}
	quiet = 0;
	if (null >= 0)
		close(null);
	if (saved >= 0)
		close(saved);
	begin_line(index, OP_REPEAT, saved < 0 || null < 0 ? errno : 0);
	printf(" times=%lu steps=%lu failed=%lu", times, count, quiet_failed);
	if (quiet_failed)
		printf(" first=%s", quiet_first);
	end_line();
	for (unsigned long k = 1; k <= count; k++)
		run_step(index + (int)k, &steps[index + k]);
}

/* The steps of `-f FILE`, one per line, as an argv (argv[0] kept); NULL: unreadable. */
static char **read_steps(const char *path, char *argv0, int *argc)
{
	FILE *f = fopen(path, "r");
	char **list = NULL, *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int n = 1;

	if (!f)
		return NULL;
	list = calloc(1, sizeof(*list));
	while (list && (len = getline(&line, &cap, f)) >= 0) {
		char **grown = realloc(list, (size_t)(n + 1) * sizeof(*list));

		if (!grown) {
			free(list);
			list = NULL;
			break;
		}
		list = grown;
		if (len > 0 && line[len - 1] == '\n')
			line[len - 1] = '\0';
		list[n++] = strdup(line);
	}
	free(line);
	fclose(f);
	if (list) {
		list[0] = argv0;
		*argc = n;
	}
	return list;
}

int main(int argc, char **argv)
{
	struct step *steps;

	if (argc == 3 && strcmp(argv[1], "-f") == 0) {
		const char *path = argv[2];

		argv = read_steps(path, argv[0], &argc);
		if (!argv) {
			fprintf(stderr, "profctl: cannot read steps from %s\n", path);
			return 2;
		}
	}
	steps = calloc((size_t)argc, sizeof(*steps));

	if (argc < 2 || !steps) {
		fprintf(stderr, "usage: profctl STEP... (the step language: see profctl.c)\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		const char *why = parse_step(argv[i], &steps[i - 1]);

		if (!why && steps[i - 1].op == OP_REPEAT)
			why = (unsigned long)(argc - 1 - i) < steps[i - 1].num[1]
				? "COUNT runs past the last step" : NULL;
		if (!why && steps[i - 1].op == OP_REPEAT && steps[i - 1].num[0] == 0)
			why = "TIMES must be at least 1";
		if (!why && steps[i - 1].op == OP_REPEAT && steps[i - 1].num[1] == 0)
			why = "COUNT must be at least 1";
		if (why) {
			fprintf(stderr, "profctl: step %d (%s): %s\n", i - 1, argv[i], why);
			return 2;
		}
	}
	for (int i = 0; i < argc - 1; i++)
		for (unsigned long k = 1; steps[i].op == OP_REPEAT && k <= steps[i].num[1]; k++)
			if (steps[i + k].op == OP_REPEAT) {
				fprintf(stderr, "profctl: step %d (%s): a repeat inside a repeat\n",
					i, argv[i + 1]);
				return 2;
			}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < argc - 1; i++) {
		if (steps[i].op == OP_REPEAT) {
			open_gate();
			do_repeat(i, steps);
			i += (int)steps[i].num[1];
		} else {
			run_step(i, &steps[i]);
		}
	}
	open_gate();
	return 0;
}
