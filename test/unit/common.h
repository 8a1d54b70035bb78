/* SPDX-License-Identifier: MIT */
/* Helpers shared by the unit tests: a scripted host (injectable kick, wake,
 * wait and clock) that records what the library asked it to do. */
#ifndef VSCHED_TEST_COMMON_H
#define VSCHED_TEST_COMMON_H

#include <dirent.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>

#include <cmocka.h>

#include <vsched/vsched.h>

struct fake_host {
	unsigned kicks, wakes, waits;
	uint64_t now;
	/* Called from inside wait(): lets a test act "while the vCPU sleeps". */
	int (*on_wait)(struct fake_host *h, uint32_t *word, uint32_t expected,
		       uint64_t deadline);
	/* Called from inside now_ns(): lets a test act "while the vCPU polls". */
	void (*on_clock)(struct fake_host *h);
	struct vsched_vcpu *vcpu;
	void *test;
};

static void fake_kick(struct vsched_vcpu *v, void *ctx)
{
	(void)v;
	((struct fake_host *)ctx)->kicks++;
}

static void fake_wake(uint32_t *word, void *ctx)
{
	(void)word;
	((struct fake_host *)ctx)->wakes++;
}

static int fake_wait(uint32_t *word, uint32_t expected, uint64_t deadline,
		     void *ctx)
{
	struct fake_host *h = ctx;
	h->waits++;
	if (h->on_wait)
		return h->on_wait(h, word, expected, deadline);
	/* Default: time jumps to the deadline. */
	h->now = deadline;
	return -110; /* -ETIMEDOUT */
}

static uint64_t fake_now(void *ctx)
{
	struct fake_host *h = ctx;
	if (h->on_clock)
		h->on_clock(h);
	return h->now;
}

static inline struct vsched_host_ops fake_ops(struct fake_host *h)
{
	struct vsched_host_ops ops = {
		.kick = fake_kick,
		.wake = fake_wake,
		.wait = fake_wait,
		.now_ns = fake_now,
		.ctx = h,
	};
	return ops;
}

/* A VM with these host ops (NULL: the defaults) and poll params. */
static inline struct vsched_vm *make_vm_with(const struct vsched_host_ops *ops,
					     const struct vsched_poll_params *pp)
{
	struct vsched_vm_config cfg = { .size = sizeof(cfg) };
	struct vsched_vm *vm = NULL;
	cfg.ops = ops;
	cfg.poll = pp;
	assert_int_equal(vsched_vm_create(&cfg, &vm), 0);
	return vm;
}

/* A VM's or waiter's test policy (0: never poll; otherwise a fixed window). */
static inline struct vsched_poll_params fixed_or_none(uint64_t poll_ns)
{
	struct vsched_poll_params pp;
	vsched_poll_defaults(poll_ns ? VSCHED_POLL_FIXED : VSCHED_POLL_NONE, poll_ns, &pp);
	return pp;
}

/* make_vm_with() with fixed_or_none(poll_ns). */
static inline struct vsched_vm *make_vm(const struct vsched_host_ops *ops,
					uint64_t poll_ns)
{
	struct vsched_poll_params pp = fixed_or_none(poll_ns);
	return make_vm_with(ops, &pp);
}

static inline void declare(struct vsched_vm *vm, unsigned kind,
			   const char *name, unsigned prio, unsigned flags,
			   vsched_request_fn fn, void *arg, uint64_t may_raise)
{
	struct vsched_request_desc d = {
		.name = name,
		.priority = prio,
		.flags = flags,
		.handler = fn,
		.arg = arg,
		.may_raise = may_raise,
	};
	assert_int_equal(vsched_request_declare(vm, kind, &d), 0);
}

static inline struct vsched_vcpu *make_vcpu(struct vsched_vm *vm, unsigned id)
{
	struct vsched_vcpu *v = NULL;
	assert_int_equal(vsched_vcpu_create(vm, id, NULL, &v), 0);
	return v;
}

/* make_vm_with() with one request kind `kind` ("req") finalized and
 * vCPU 0, returned; the VM in *vm. */
static inline struct vsched_vcpu *vm_req_vcpu(const struct vsched_host_ops *ops,
					      const struct vsched_poll_params *pp,
					      unsigned kind, struct vsched_vm **vm)
{
	*vm = make_vm_with(ops, pp);
	declare(*vm, kind, "req", 1, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(*vm, 0), 0);
	return make_vcpu(*vm, 0);
}

/* A waiter with make_vm()'s policy as its own: a waiter given none takes
 * the waiter profile, whatever its VM's. */
static inline struct vsched_waiter *waiter_with(struct vsched_vm *vm, vsched_cond_fn cond,
						void *arg, uint64_t poll_ns)
{
	struct vsched_poll_params pp = fixed_or_none(poll_ns);
	struct vsched_waiter_config c = { .size = sizeof(c), .cond = cond, .arg = arg, .poll = &pp };
	struct vsched_waiter *w;

	assert_int_equal(vsched_waiter_create_ex(vm, &c, &w), 0);
	return w;
}

/* A waiter on a fresh VM with `cond` and the needs-kick hooks; neither
 * polls. */
static inline struct vsched_waiter *hooked_waiter(struct vsched_vm **vm, bool (*cond)(void *),
					   void (*before)(struct vsched_waiter *, void *),
					   void (*after)(struct vsched_waiter *, void *))
{
	struct vsched_waiter_config c = {
		.size = sizeof(c), .cond = cond, .before_sleep = before, .after_sleep = after,
	};
	struct vsched_poll_params none = fixed_or_none(0);
	struct vsched_waiter *w;

	c.poll = &none;
	*vm = make_vm(NULL, 0);
	assert_int_equal(vsched_request_finalize(*vm, 0), 0);
	assert_int_equal(vsched_waiter_create_ex(*vm, &c, &w), 0);
	return w;
}

/* A seccomp filter on the calling thread (and the children it forks):
 * the `n` syscalls `nr`, exit and exit_group are allowed, any other kills
 * the process. 0, or -1 when the kernel refuses it. */
static inline int allow_only(const int *nr, unsigned n)
{
	struct sock_filter f[2 + 16 + 2 + 2];
	unsigned k = 0, m = n + 2;

	if (n > 16)
		return -1;
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	for (unsigned i = 0; i < m; i++) {
		int x = i < n ? nr[i] : i == n ? SYS_exit_group : SYS_exit;
		/* a match jumps over the rest and the kill, to the allow */
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)x,
						      (unsigned char)(m - i), 0);
	}
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { .len = (unsigned short)k, .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* The fds this process has open (leak checks). */
static inline unsigned open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;
	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Thread `tid`'s state letter in /proc ('S': asleep), '?' if unread. */
static inline char task_state(pid_t tid)
{
	char path[64], buf[512], *p;
	FILE *fp;
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	fp = fopen(path, "r");
	if (!fp)
		return '?';
	p = fgets(buf, sizeof(buf), fp);
	fclose(fp);
	if (!p || !(p = strrchr(buf, ')')))
		return '?';
	return p[2];
}

/* CLOCK_MONOTONIC in ns (the real clock, for tests on the host's). */
static inline uint64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline struct vsched_vcpu_stats stats_of(struct vsched_vcpu *v)
{
	struct vsched_vcpu_stats s = { .size = sizeof(s) };
	assert_int_equal(vsched_vcpu_read_stats(v, &s), 0);
	return s;
}

#endif
