/* SPDX-License-Identifier: MIT */
/*
 * A sleeper's life (init, fini) and the poll policy in force: its own, or
 * its default (a vCPU's VM's, a waiter's profile), refreshed under RCU when
 * it changes (lib/sleeper.h).
 */
#define _GNU_SOURCE /* secure_getenv */
#include <urcu/urcu-bp.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi.h"
#include "mode.h"
#include "contract.h"
#include "sleeper.h"

/*
 * The host's runnable count (lib/sleeper.h, CONTEND_SAMPLE_NS): one
 * read-only O_CLOEXEC fd of /proc/loadavg per process, shared by every
 * sleeper whose params asked for VSCHED_CONTENTION_SAMPLED: opened by the
 * first one to ask, on its owner's thread at the start of its first halt
 * under that policy, or sooner on the thread that gives a vCPU or waiter
 * such a policy of its own (vsched__sleeper_set_poll()); closed by the
 * last such sleeper's fini. VSCHED_CONTENTION_SOURCE names another file
 * of the same format instead (a test and diagnostic hook, read at the
 * open). No /proc, or an open refused: no sampler.
 */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int load_fd = -1;
static unsigned load_users;

/* Take the sleeper's reference (once), opening the fd if it is the
 * process's first. Any thread; the fd under the lock. */
static int load_get(struct vsched__sleeper *s)
{
	int fd;

	pthread_mutex_lock(&load_lock);
	if (!s->ct.ref) {
		s->ct.ref = true;
		if (!load_users++) {
			const char *src = secure_getenv("VSCHED_CONTENTION_SOURCE");
			load_fd = open(src ? src : "/proc/loadavg", O_RDONLY | O_CLOEXEC);
		}
	}
	fd = load_fd;
	pthread_mutex_unlock(&load_lock);
	return fd;
}

/* Drop the sleeper's reference, if any (idempotent); the last closes. */
static void load_put(struct vsched__sleeper *s)
{
	pthread_mutex_lock(&load_lock);
	if (s->ct.ref) {
		s->ct.ref = false;
		if (!--load_users && load_fd >= 0) {
			close(load_fd);
			load_fd = -1;
		}
	}
	pthread_mutex_unlock(&load_lock);
}

/* One sample: more runnable tasks on the host than the VM's CPUs? The 4th
 * field of /proc/loadavg, "R/T", is nr_running() now, the sampling thread
 * included. A read that fails (a seccomp filter's errno) ends the
 * sampling for this sleeper. Owner thread; one pread. */
bool vsched__host_busy(struct vsched__sleeper *s)
{
	char b[128];
	const char *p = b;
	ssize_t n = pread(s->ct.fd, b, sizeof(b) - 1, 0);

	if (n <= 0) {
		s->ct.fd = s->ct.pfd = -1;
		return false;
	}
	b[n] = 0;
	for (int i = 0; i < 3 && p; i++)
		if ((p = strchr(p, ' ')))
			p++;
	return p && strtoul(p, NULL, 10) > s->vm->ncpus;
}

/* New params in force (owner thread, a halt's start): the back-off starts
 * afresh; the sampler runs if they ask for it, its fd taken the first
 * time (an open() here, unless another sleeper or a set_poll has it). */
static void contention_params(struct vsched__sleeper *s)
{
	s->ct.until = s->ct.backoff = s->ct.sampled = 0;
	s->ct.busy = false;
	if (s->params.contention < VSCHED_CONTENTION_SAMPLED) {
		s->ct.fd = -1;
		return;
	}
	if (!s->ct.got) {
		s->ct.got = true;
		s->ct.pfd = load_get(s);
	}
	s->ct.fd = s->ct.pfd;
}

/*
 * Take the policy in force: the sleeper's own when it has one, else its
 * default: the waiter profile for a waiter (which no VM policy changes),
 * the VM's for a vCPU. Its state restarts when the policy changed: the
 * sleeper's own was set or cleared, it took its default for the first
 * time, or the VM's changed while the sleeper follows it. Each
 * pointer is read after its generation (acquire), which its installer bumps
 * after publishing the pointer: a reader that saw a generation finds that
 * policy or a newer one, and a newer one bumps the generation again.
 */
void vsched__refresh_policy(struct vsched__sleeper *s, uint64_t vg, uint64_t og)
{
	struct vsched__poll_cfg cfg, *own;
	bool restart = og != s->own_gen_seen;

	urcu_bp_read_lock();
	own = atomic_load_explicit(&s->own_poll, memory_order_acquire);
	if (own) {
		cfg = *own;
		VSCHED__TSAN_RELEASE(own);
	}
	urcu_bp_read_unlock();
	if (!own && s->waiter_profile) {
		/* vg is the VM's generation, kept only so that the caller's
		 * check stops calling this until the VM's policy changes;
		 * s->poll_gen is 0 before the first refresh only. */
		vsched_poll_defaults_waiter(VSCHED_POLL_ADAPTIVE, &cfg.p);
		restart = restart || s->own_params || !s->poll_gen;
	} else if (!own) {
		vsched__poll_read(s->vm, &cfg);
		restart = restart || s->own_params || cfg.gen != s->poll_gen;
		vg = cfg.gen;
	}
	s->poll_gen = vg;
	s->own_gen_seen = og;
	s->own_params = own != NULL;
	if (restart) {
		s->params = cfg.p;
		vsched_poll_init(&s->params, &s->poll);
		contention_params(s);
	}
}

int vsched__sleeper_set_poll(struct vsched__sleeper *s,
			     const struct vsched_poll_params *p)
{
	struct vsched__poll_cfg *cfg = NULL, *old;
	struct vsched_poll_params n;

	if (p) {
		if (!vsched__poll_params_ok(p, &n))
			return VSCHED_EINVAL;
		cfg = vsched__alloc(&s->vm->alloc, sizeof(*cfg));
		if (!cfg)
			return VSCHED_ENOMEM;
		cfg->p = n;
		cfg->gen = 0;
		/* The sampler's fd, opened here, on the caller's thread (ahead
		 * of a seccomp filter), rather than at the owner's next halt. */
		if (n.contention >= VSCHED_CONTENTION_SAMPLED)
			load_get(s);
	}
	old = atomic_exchange_explicit(&s->own_poll, cfg, memory_order_seq_cst);
	/* After the pointer (see vsched__refresh_policy()). */
	atomic_fetch_add_explicit(&s->own_gen, 1, memory_order_release);
	if (old) {
		urcu_bp_synchronize_rcu();
		VSCHED__TSAN_ACQUIRE(old); /* the readers' releases, for TSan */
		vsched__free(&s->vm->alloc, old, sizeof(*old));
	}
	return 0;
}

int vsched_vcpu_set_poll(struct vsched_vcpu *v,
			 const struct vsched_poll_params *p)
{
	int rc;

	if (!v)
		return VSCHED_EINVAL;
	if ((rc = vsched__vcpu_allowed(v, VSCHED__C_VCPU_SET_POLL)))
		return rc;
	rc = vsched__sleeper_set_poll(&v->sl, p);
	/* A destroy that raced this call after its check may have finished
	 * the sleeper before our policy went in: take it back (whichever of
	 * the two exchanges gets a policy frees it; the owner has stopped,
	 * so no reader holds it). */
	if (!rc && vsched__mode_of(atomic_load_explicit(&v->mode, memory_order_seq_cst)) ==
			   VSCHED_MODE_DESTROYED) {
		struct vsched__poll_cfg *own = atomic_exchange_explicit(
			&v->sl.own_poll, NULL, memory_order_acq_rel);
		if (own)
			vsched__free(&v->vm->alloc, own, sizeof(*own));
		load_put(&v->sl); /* the same for the sampler's fd */
		return VSCHED_EDESTROYED;
	}
	return rc;
}

void vsched__sleeper_init(struct vsched__sleeper *s, struct vsched_vm *vm,
			  _Atomic uint32_t *word)
{
	s->vm = vm;
	s->word = word;
	s->os = (struct vsched__os_set)VSCHED__OS_SET_INIT;
	s->tfd_at = TFD_UNKNOWN;
	s->wake_cost_ns = VSCHED_POLL_WAKE_COST_NS;
	/* The host-contention back-off: as the params in force ask
	 * (contention_params()). */
	s->ct.fd = s->ct.pfd = -1;
}

/* Idempotent: a destroyed vCPU is finished again with its VM. */
void vsched__sleeper_fini(struct vsched__sleeper *s)
{
	struct vsched__poll_cfg *own;

	load_put(s);
	s->ct.fd = s->ct.pfd = -1;
	vsched__os_set_close(&s->os);
	for (unsigned i = 0; i < s->nslots; i++)
		if (s->rfd_of[i] >= 0)
			close(s->rfd_of[i]); /* a doorbell's own dup (lib/fds.c) */
	vsched__free_fd_tables(s);
	/* Acquire: a set_poll that raced the destroy published its policy
	 * with a release (it takes its own back if it saw DESTROYED after). */
	own = atomic_exchange_explicit(&s->own_poll, NULL, memory_order_acq_rel);
	if (own)
		vsched__free(&s->vm->alloc, own, sizeof(*own));
}

/* The previous halt's lesson (account()), taken at this halt's start,
 * before the policy is refreshed and this halt's window is chosen: the
 * policy learns every halt, in order, with the parameters it ran under,
 * and none of its work sits between "a reason to run" and the return. */
void vsched__learn(struct vsched__sleeper *s, int id)
{
	(void)id; /* the trace's only */
	uint64_t before = s->poll.window_ns;

	s->lesson_pending = false;
	if (!s->params.sleep_cpu_ns || !s->params.wake_cost_ns) {
		/* measured here (SLEEP_SAMPLE, vsched__learn_wake_cost()) */
		struct vsched_poll_params p = s->params;
		if (!p.sleep_cpu_ns)
			p.sleep_cpu_ns = vsched__measured_sleep_cpu(s);
		/* This halt's own wakeup where it was timed: its length
		 * less that is when the wake came (on a loaded host a
		 * sleeping wakeup varies from 10 to 100 us), else the
		 * EWMA. */
		if (!p.wake_cost_ns)
			p.wake_cost_ns = s->lesson_wake_ns ? s->lesson_wake_ns
							   : s->wake_cost_ns;
		vsched__poll_update(&p, &s->poll, s->lesson_window,
				    s->lesson_halt_ns, s->lesson_valid);
	} else {
		vsched__poll_update(&s->params, &s->poll, s->lesson_window,
				    s->lesson_halt_ns, s->lesson_valid);
	}
	if (s->poll.window_ns != before)
		VSCHED__TRACE3(window_change, id, before, s->poll.window_ns);
}

int vsched_vcpu_set_guest_poll(struct vsched_vcpu *v, bool allow)
{
	int rc;

	if (!v)
		return VSCHED_EINVAL;
	if ((rc = vsched__vcpu_allowed(v, VSCHED__C_VCPU_SET_GUEST_POLL)))
		return rc;
	atomic_store_explicit(&v->sl.guest_poll_off, !allow, memory_order_relaxed);
	return 0;
}
