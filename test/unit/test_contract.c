/* SPDX-License-Identifier: MIT */
/*
 * The state contract (lib/contract.h): every call that depends on its
 * object's state, driven in every state the object can be put in. A call
 * the table allows is not refused; a call it forbids is refused with
 * VSCHED_ESTATE (VSCHED_EDESTROYED once destroyed), leaves the state as it
 * was, and the owner thread, asleep or polling, still wakes for the next
 * post. Then the misuse bugs of issue 22, each a test that failed before
 * its fix: a spurious futex return that spun to the deadline, fd_add
 * against a sleeper, destroy of a blocked vCPU, an fd number reused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>

#include "common.h"
/* The table itself, so that the test follows it. */
#include "../../lib/contract.h"

enum { K_REQ = 0, K_NOWAKE = 1 };

static const uint64_t SEC = 1000000000ull;

static uint64_t thread_cpu(clockid_t c)
{
	struct timespec ts;
	assert_int_equal(clock_gettime(c, &ts), 0);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

/* Wait (bounded: 10 s) until `v` shows `mode`. */
static void await_mode(struct vsched_vcpu *v, int mode)
{
	uint64_t end = mono() + 10 * SEC;
	while (vsched_vcpu_mode(v) != mode) {
		if (mono() > end)
			fail_msg("vCPU never reached mode %d (is %d)", mode,
				 vsched_vcpu_mode(v));
		usleep(100);
	}
}

/* ------------------------------------------------------------------ */
/* A vCPU put in each state. */

struct owner {
	struct vsched_vcpu *v;
	_Atomic pid_t tid;
	uint64_t deadline;
	int reason;
	clockid_t cpu;
	uint64_t cpu_ns;
	pthread_t t;
};

static void *owner_block(void *arg)
{
	struct owner *o = arg;
	uint64_t c0;

	pthread_getcpuclockid(pthread_self(), &o->cpu);
	atomic_store(&o->tid, (pid_t)syscall(SYS_gettid));
	c0 = thread_cpu(o->cpu);
	o->reason = vsched_vcpu_block(o->v, o->deadline);
	o->cpu_ns = thread_cpu(o->cpu) - c0;
	return NULL;
}

struct fix {
	struct vsched_vm *vm;
	struct vsched_vcpu *v;
	struct owner o;
	bool blocker;
	int state;
	int efd;
};


static void fix_up(struct fix *f, int state)
{
	struct vsched_poll_params pp;

	memset(f, 0, sizeof(*f));
	f->state = state;
	f->vm = make_vm(NULL, 0);
	declare(f->vm, K_REQ, "req", 1, 0, NULL, NULL, 0);
	declare(f->vm, K_NOWAKE, "nowake", 2, VSCHED_REQ_NO_WAKEUP, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(f->vm, 0), 0);
	f->v = make_vcpu(f->vm, 0);
	f->efd = eventfd(0, EFD_NONBLOCK);
	assert_true(f->efd >= 0);
	switch (state) {
	case VSCHED_MODE_OUTSIDE_GUEST:
		assert_int_equal(vsched_post(f->v, K_NOWAKE), 0); /* pending */
		break;
	case VSCHED_MODE_IN_GUEST:
		assert_int_equal(vsched_vcpu_enter(f->v), 0);
		break;
	case VSCHED_MODE_EXITING_GUEST:
		assert_int_equal(vsched_vcpu_enter(f->v), 0);
		assert_int_equal(vsched_post(f->v, K_REQ), 0); /* kicks, pending */
		break;
	case VSCHED_MODE_POLLING:
	case VSCHED_MODE_BLOCKED:
		vsched_poll_defaults(state == VSCHED_MODE_POLLING ? VSCHED_POLL_FIXED
								  : VSCHED_POLL_NONE,
				     100 * SEC, &pp);
		assert_int_equal(vsched_vcpu_set_poll(f->v, &pp), 0);
		f->o.v = f->v;
		f->o.deadline = VSCHED_DEADLINE_NONE;
		assert_int_equal(pthread_create(&f->o.t, NULL, owner_block, &f->o), 0);
		f->blocker = true;
		await_mode(f->v, state);
		/* BLOCKED is published before the owner's last look: a post
		 * seen by that look would end the block. Asleep in the kernel
		 * first (under qemu-user that look came after the post 1 time
		 * in 40). */
		for (uint64_t end = mono() + 10 * SEC;
		     state == VSCHED_MODE_BLOCKED &&
		     (!atomic_load(&f->o.tid) || task_state(atomic_load(&f->o.tid)) != 'S');) {
			if (mono() > end)
				fail_msg("the owner never slept");
			usleep(1000);
		}
		if (state == VSCHED_MODE_BLOCKED) /* pending, asleep */
			assert_int_equal(vsched_post(f->v, K_NOWAKE), 0);
		break;
	case VSCHED_MODE_DESTROYED:
		assert_int_equal(vsched_post(f->v, K_NOWAKE), 0);
		assert_int_equal(vsched_vcpu_destroy(f->v), 0);
		break;
	}
	assert_int_equal(vsched_vcpu_mode(f->v), state);
}

/* The owner, if asleep or polling, still wakes for a post; a destroyed
 * vCPU stays destroyed and refuses posts. */
static void fix_down(struct fix *f)
{
	if (f->blocker) {
		assert_int_equal(vsched_post(f->v, K_REQ), 0);
		assert_int_equal(pthread_join(f->o.t, NULL), 0);
		assert_int_equal(f->o.reason, VSCHED_WAKE_REQUEST);
		assert_int_equal(vsched_vcpu_mode(f->v), VSCHED_MODE_OUTSIDE_GUEST);
	}
	if (f->state == VSCHED_MODE_DESTROYED) {
		assert_int_equal(vsched_vcpu_mode(f->v), VSCHED_MODE_DESTROYED);
		assert_int_equal(vsched_post(f->v, K_REQ), VSCHED_EDESTROYED);
	}
	close(f->efd);
	assert_int_equal(vsched_vm_destroy(f->vm), 0);
}

struct call {
	enum vsched__call id;
	int (*fn)(struct fix *f);
};

static int c_enter(struct fix *f) { return vsched_vcpu_enter(f->v); }
static int c_exit(struct fix *f) { return vsched_vcpu_exit(f->v); }
static int c_service(struct fix *f) { return vsched_service(f->v); }
static int c_block(struct fix *f) { return vsched_vcpu_block(f->v, 0); }
static int c_fd_add(struct fix *f)
{
	return vsched_vcpu_fd_add(f->v, f->efd, EPOLLIN, 1);
}
static int c_fd_del(struct fix *f) { return vsched_vcpu_fd_del(f->v, f->efd); }
static int c_set_poll(struct fix *f)
{
	struct vsched_poll_params pp;
	/* The policy in force again, so that a poller keeps polling. */
	vsched_poll_defaults(f->state == VSCHED_MODE_POLLING ? VSCHED_POLL_FIXED
							     : VSCHED_POLL_NONE,
			     100 * SEC, &pp);
	return vsched_vcpu_set_poll(f->v, &pp);
}
static int c_guest_poll(struct fix *f)
{
	return vsched_vcpu_set_guest_poll(f->v, true);
}
static int c_kick(struct fix *f) { return vsched_vcpu_kick(f->v); }
static int c_fire(struct fix *f) { return vsched_vcpu_fire_timers(f->v); }
static int c_post(struct fix *f) { return vsched_post(f->v, K_NOWAKE); }
static int c_destroy(struct fix *f) { return vsched_vcpu_destroy(f->v); }

static const struct call vcpu_calls[] = {
	{ VSCHED__C_VCPU_ENTER, c_enter },
	{ VSCHED__C_VCPU_EXIT, c_exit },
	{ VSCHED__C_SERVICE, c_service },
	{ VSCHED__C_VCPU_BLOCK, c_block },
	{ VSCHED__C_VCPU_FD_ADD, c_fd_add },
	{ VSCHED__C_VCPU_FD_DEL, c_fd_del },
	{ VSCHED__C_VCPU_SET_POLL, c_set_poll },
	{ VSCHED__C_VCPU_SET_GUEST_POLL, c_guest_poll },
	{ VSCHED__C_VCPU_KICK, c_kick },
	{ VSCHED__C_VCPU_FIRE_TIMERS, c_fire },
	{ VSCHED__C_POST, c_post },
	{ VSCHED__C_VCPU_DESTROY, c_destroy },
};

static const char *call_name(enum vsched__call c)
{
	static const char *const names[] = {
#define NAME(call, name, st) [VSCHED__C_##call] = name,
		VSCHED__CONTRACT(NAME)
#undef NAME
	};
	return names[c];
}

/* The state a successful call leaves the vCPU in, where the test must
 * put it back to tear down. */
static void after_allowed(struct fix *f, enum vsched__call c, int rc)
{
	if (c == VSCHED__C_VCPU_ENTER && rc == 0)
		assert_int_equal(vsched_vcpu_exit(f->v), 0);
	if (c == VSCHED__C_VCPU_EXIT && rc == 0)
		assert_int_equal(vsched_vcpu_mode(f->v), VSCHED_MODE_OUTSIDE_GUEST);
	if (c == VSCHED__C_VCPU_DESTROY && rc == 0)
		f->state = VSCHED_MODE_DESTROYED;
	if (f->state == VSCHED_MODE_IN_GUEST || f->state == VSCHED_MODE_EXITING_GUEST)
		vsched_vcpu_exit(f->v); /* may be out already */
}

static void test_vcpu_every_call_every_state(void **state)
{
	(void)state;
	for (int st = VSCHED_MODE_OUTSIDE_GUEST; st <= VSCHED_MODE_DESTROYED; st++) {
		for (size_t i = 0; i < sizeof(vcpu_calls) / sizeof(vcpu_calls[0]); i++) {
			const struct call *c = &vcpu_calls[i];
			struct fix f;
			bool allowed = (vsched__call_states(c->id) >> st) & 1u;
			int rc;

			fix_up(&f, st);
			rc = c->fn(&f);
			/* Nothing pending in these: vsched_service() is then
			 * one load and returns 0 in any state (nothing done,
			 * nothing to refuse). */
			if (c->id == VSCHED__C_SERVICE &&
			    (st == VSCHED_MODE_IN_GUEST || st == VSCHED_MODE_POLLING))
				allowed = rc == 0;
			if (allowed) {
				if (rc == VSCHED_ESTATE || rc == VSCHED_EDESTROYED)
					fail_msg("%s in mode %d: refused (%d), the table allows it",
						 call_name(c->id), st, rc);
				after_allowed(&f, c->id, rc);
			} else {
				int want = st == VSCHED_MODE_DESTROYED ? VSCHED_EDESTROYED
								       : VSCHED_ESTATE;
				if (rc != want)
					fail_msg("%s in mode %d: returned %d, want %d",
						 call_name(c->id), st, rc, want);
				/* Refused: nothing moved. */
				assert_int_equal(vsched_vcpu_mode(f.v), st);
				if (st == VSCHED_MODE_IN_GUEST || st == VSCHED_MODE_EXITING_GUEST)
					assert_int_equal(vsched_vcpu_exit(f.v), 0);
			}
			fix_down(&f);
		}
	}
}

/* ------------------------------------------------------------------ */
/* A waiter in each of its states. */

struct wfix {
	struct vsched_vm *vm;
	struct vsched_waiter *w;
	_Atomic int go, looks, sleeps;
	_Atomic pid_t tid;
	int reason;
	pthread_t t;
	bool waiting;
	int efd;
};

static bool w_cond(void *arg)
{
	struct wfix *f = arg;
	atomic_fetch_add(&f->looks, 1);
	return atomic_load(&f->go) != 0;
}

static void w_before(struct vsched_waiter *w, void *arg)
{
	(void)w;
	atomic_fetch_add(&((struct wfix *)arg)->sleeps, 1);
}

static void w_after(struct vsched_waiter *w, void *arg)
{
	(void)w, (void)arg;
}

static void *w_thread(void *arg)
{
	struct wfix *f = arg;
	atomic_store(&f->tid, (pid_t)syscall(SYS_gettid));
	f->reason = vsched_waiter_wait(f->w, VSCHED_DEADLINE_NONE, NULL);
	return NULL;
}

/* A waiter idle (OUTSIDE_GUEST), polling (its condition looked at again
 * and again in a 100 s window) or asleep (its before_sleep hook ran and
 * its thread sleeps in the kernel). */
static void wfix_up(struct wfix *f, int st)
{
	struct vsched_poll_params pp;
	struct vsched_waiter_config c = {
		.size = sizeof(c), .cond = w_cond, .arg = f,
		.before_sleep = w_before, .after_sleep = w_after, .hook_arg = f,
		.poll = &pp,
	};
	uint64_t end = mono() + 10 * SEC;

	memset(f, 0, sizeof(*f));
	f->vm = make_vm(NULL, 0);
	assert_int_equal(vsched_request_finalize(f->vm, 0), 0);
	vsched_poll_defaults(st == VSCHED_MODE_POLLING ? VSCHED_POLL_FIXED
						       : VSCHED_POLL_NONE,
			     100 * SEC, &pp);
	assert_int_equal(vsched_waiter_create_ex(f->vm, &c, &f->w), 0);
	f->efd = eventfd(0, EFD_NONBLOCK);
	if (st == VSCHED_MODE_OUTSIDE_GUEST)
		return;
	assert_int_equal(pthread_create(&f->t, NULL, w_thread, f), 0);
	f->waiting = true;
	for (;;) {
		pid_t tid = atomic_load(&f->tid);
		if (st == VSCHED_MODE_POLLING && atomic_load(&f->looks) > 100)
			break;
		if (st == VSCHED_MODE_BLOCKED && atomic_load(&f->sleeps) &&
		    tid && task_state(tid) == 'S')
			break;
		if (mono() > end)
			fail_msg("the waiter never reached state %d", st);
		usleep(1000);
	}
}

static void wfix_down(struct wfix *f, bool destroyed)
{
	if (f->waiting) {
		atomic_store(&f->go, 1);
		assert_true(vsched_waiter_kick(f->w) >= 0);
		assert_int_equal(pthread_join(f->t, NULL), 0);
		assert_int_equal(f->reason, VSCHED_WAKE_REQUEST);
	}
	if (!destroyed)
		assert_int_equal(vsched_waiter_destroy(f->w), 0);
	close(f->efd);
	assert_int_equal(vsched_vm_destroy(f->vm), 0);
}

static void test_waiter_every_call_every_state(void **state)
{
	static const int states[] = { VSCHED_MODE_OUTSIDE_GUEST, VSCHED_MODE_POLLING,
				      VSCHED_MODE_BLOCKED };
	static const enum vsched__call calls[] = {
		VSCHED__C_WAITER_WAIT, VSCHED__C_WAITER_FD_ADD, VSCHED__C_WAITER_FD_DEL,
		VSCHED__C_WAITER_SET_POLL, VSCHED__C_WAITER_KICK,
		VSCHED__C_WAITER_DESTROY,
	};
	(void)state;
	for (size_t si = 0; si < 3; si++) {
		for (size_t ci = 0; ci < sizeof(calls) / sizeof(calls[0]); ci++) {
			int st = states[si], rc = 0;
			enum vsched__call id = calls[ci];
			bool allowed = (vsched__call_states(id) >> st) & 1u;
			struct vsched_poll_params pp;
			struct wfix f;

			wfix_up(&f, st);
			vsched_poll_defaults(st == VSCHED_MODE_POLLING ? VSCHED_POLL_FIXED
								       : VSCHED_POLL_NONE,
					     100 * SEC, &pp);
			switch (id) {
			case VSCHED__C_WAITER_WAIT:
				rc = vsched_waiter_wait(f.w, 0, NULL);
				break;
			case VSCHED__C_WAITER_FD_ADD:
				rc = vsched_waiter_fd_add(f.w, f.efd, EPOLLIN, 1);
				break;
			case VSCHED__C_WAITER_FD_DEL:
				rc = vsched_waiter_fd_del(f.w, f.efd);
				break;
			case VSCHED__C_WAITER_SET_POLL:
				rc = vsched_waiter_set_poll(f.w, &pp);
				break;
			case VSCHED__C_WAITER_KICK:
				rc = vsched_waiter_kick(f.w);
				break;
			default:
				rc = vsched_waiter_destroy(f.w);
				break;
			}
			if (allowed && rc == VSCHED_ESTATE)
				fail_msg("%s, waiter in mode %d: refused, the table allows it",
					 call_name(id), st);
			if (!allowed && rc != VSCHED_ESTATE)
				fail_msg("%s, waiter in mode %d: returned %d, want VSCHED_ESTATE",
					 call_name(id), st, rc);
			wfix_down(&f, id == VSCHED__C_WAITER_DESTROY && rc == 0);
		}
	}
}

/* ------------------------------------------------------------------ */
/* The bugs. */

static struct vsched_vcpu *plain_vcpu(struct vsched_vm **vm)
{
	*vm = make_vm(NULL, 0); /* the real futex and clock; never polls */
	declare(*vm, K_REQ, "req", 1, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(*vm, 0), 0);
	return make_vcpu(*vm, 0);
}

/* /proc state of a thread: 'S' asleep in the kernel, 'R' running. */
struct sleeper {
	struct owner o;
	_Atomic pid_t tid;
};

static void *sleeper_thread(void *arg)
{
	struct sleeper *s = arg;
	atomic_store(&s->tid, (pid_t)syscall(SYS_gettid));
	return owner_block(&s->o);
}

/* Wait (bounded) until the sleeper is asleep in the kernel on its word. */
static void await_asleep(struct sleeper *s, uint64_t spurious)
{
	uint64_t end = mono() + 10 * SEC;
	for (;;) {
		struct vsched_vcpu_stats st = stats_of(s->o.v);
		pid_t tid = atomic_load(&s->tid);
		if (tid && vsched_vcpu_mode(s->o.v) == VSCHED_MODE_BLOCKED &&
		    st.spurious_wakeups >= spurious && task_state(tid) == 'S')
			return;
		if (mono() > end)
			fail_msg("the sleeper never slept again (spurious %llu, state %c)",
				 (unsigned long long)st.spurious_wakeups,
				 tid ? task_state(tid) : '?');
		usleep(1000);
	}
}

static void on_usr1(int sig) { (void)sig; }

/* Issue 22, bug 1: a FUTEX_WAKE with the word unchanged (a late wake of an
 * earlier halt) made the timed sleep spin on the CPU to its deadline, and a
 * signal meanwhile went unreported. Now it sleeps again, counted as
 * spurious, and the signal ends it as VSCHED_WAKE_SIGNAL. */
static void test_spurious_futex_return_sleeps_again(void **state)
{
	struct vsched_vm *vm;
	struct sigaction sa = { .sa_handler = on_usr1 }; /* no SA_RESTART */
	struct sleeper s = { 0 };
	(void)state;

	sigaction(SIGUSR1, &sa, NULL);
	s.o.v = plain_vcpu(&vm);
	s.o.deadline = vsched_now_ns(vm) + 3 * SEC;
	assert_int_equal(pthread_create(&s.o.t, NULL, sleeper_thread, &s), 0);
	await_asleep(&s, 0);
	/* The spurious return: nobody moved the word. */
	syscall(SYS_futex, (uint32_t *)&((struct vsched_vcpu_hot *)(void *)s.o.v)->mode,
		FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
	/* Asleep again, with the return counted (before the fix: running,
	 * 'R', until the deadline, and never counted). */
	await_asleep(&s, 1);
	pthread_kill(s.o.t, SIGUSR1);
	assert_int_equal(pthread_join(s.o.t, NULL), 0);
	assert_int_equal(s.o.reason, VSCHED_WAKE_SIGNAL);
	/* It burnt no more than a small part of the sleep (3 s; before the
	 * fix it spun through the rest). */
	if (s.o.cpu_ns > SEC / 2)
		fail_msg("the sleep used %llu ns of CPU", (unsigned long long)s.o.cpu_ns);
	assert_int_equal(vsched_vm_destroy(vm), 0);
}

/* Issue 22, bug 2: fd_add from another thread while the vCPU slept on its
 * futex switched the wakers to an eventfd nobody slept on; the next post
 * was seen only at the deadline. Now it is refused, and the post wakes. */
static void test_fd_add_against_sleeper(void **state)
{
	struct vsched_vm *vm;
	struct sleeper s = { 0 };
	int efd = eventfd(0, EFD_NONBLOCK);
	(void)state;

	s.o.v = plain_vcpu(&vm);
	s.o.deadline = VSCHED_DEADLINE_NONE;
	assert_int_equal(pthread_create(&s.o.t, NULL, sleeper_thread, &s), 0);
	await_asleep(&s, 0);
	assert_int_equal(vsched_vcpu_fd_add(s.o.v, efd, EPOLLIN, 7), VSCHED_ESTATE);
	assert_int_equal(vsched_vcpu_fd_del(s.o.v, efd), VSCHED_ESTATE);
	assert_int_equal(vsched_post(s.o.v, K_REQ), 0);
	assert_int_equal(pthread_join(s.o.t, NULL), 0);
	assert_int_equal(s.o.reason, VSCHED_WAKE_REQUEST);
	/* Back on its own thread, outside the block: accepted. */
	assert_int_equal(vsched_service(s.o.v), 1);
	assert_int_equal(vsched_vcpu_fd_add(s.o.v, efd, EPOLLIN, 7), 0);
	close(efd);
	assert_int_equal(vsched_vm_destroy(vm), 0);
}

/* Issue 22, bug 3: destroying a BLOCKED vCPU succeeded and the sleeper
 * brought it back to life (posts to it succeeded afterwards). Now the
 * destroy is refused, the sleeper wakes for the next post, and a destroy
 * after its return holds. */
static void test_destroy_against_sleeper(void **state)
{
	struct vsched_vm *vm;
	struct sleeper s = { 0 };
	(void)state;

	s.o.v = plain_vcpu(&vm);
	s.o.deadline = VSCHED_DEADLINE_NONE;
	assert_int_equal(pthread_create(&s.o.t, NULL, sleeper_thread, &s), 0);
	await_asleep(&s, 0);
	assert_int_equal(vsched_vcpu_destroy(s.o.v), VSCHED_ESTATE);
	assert_int_equal(vsched_vcpu_mode(s.o.v), VSCHED_MODE_BLOCKED);
	assert_int_equal(vsched_post(s.o.v, K_REQ), 0);
	assert_int_equal(pthread_join(s.o.t, NULL), 0);
	assert_int_equal(s.o.reason, VSCHED_WAKE_REQUEST);
	assert_int_equal(vsched_service(s.o.v), 1);
	assert_int_equal(vsched_vcpu_destroy(s.o.v), 0);
	assert_int_equal(vsched_vcpu_mode(s.o.v), VSCHED_MODE_DESTROYED);
	assert_int_equal(vsched_post(s.o.v, K_REQ), VSCHED_EDESTROYED);
	assert_int_equal(vsched_vcpu_block(s.o.v, 0), VSCHED_EDESTROYED);
	assert_int_equal(vsched_vcpu_mode(s.o.v), VSCHED_MODE_DESTROYED);
	assert_int_equal(vsched_vm_destroy(vm), 0);
}

/* Issue 22 (risk): an fd closed, its number reused by a new file and added
 * again took a second slot; fd_del then freed both and counted one, so
 * the engine went on checking fds it no longer had. */
static void test_fd_number_reused(void **state)
{
	struct vsched_vm *vm;
	struct vsched_block_result res = { .size = sizeof(res) };
	struct vsched_vcpu *v;
	int a, b;
	(void)state;

	v = plain_vcpu(&vm);
	a = eventfd(0, EFD_NONBLOCK);
	assert_int_equal(vsched_vcpu_fd_add(v, a, EPOLLIN, 1), 0);
	close(a); /* epoll drops it with its last reference */
	b = eventfd(0, EFD_NONBLOCK);
	assert_int_equal(b, a); /* the lowest free number */
	assert_int_equal(vsched_vcpu_fd_add(v, b, EPOLLIN, 2), 0);
	assert_int_equal(vsched_vcpu_fd_del(v, b), 0);
	/* No fd left: a passed deadline makes no check of the fds. */
	assert_int_equal(vsched_vcpu_block_ex(v, 0, &res), VSCHED_WAKE_DEADLINE);
	assert_int_equal(res.fd_checks, 0);
	/* And a new one is seen with its own tag. */
	assert_int_equal(vsched_vcpu_fd_add(v, b, EPOLLIN, 3), 0);
	assert_int_equal(eventfd_write(b, 1), 0);
	assert_int_equal(vsched_vcpu_block_ex(v, 0, &res), VSCHED_WAKE_FD);
	assert_int_equal(res.nready, 1);
	assert_int_equal(res.tags[0], 3);
	close(b);
	assert_int_equal(vsched_vm_destroy(vm), 0);
}

/* Session 29's wait-path hunt (helper-82): a vCPU's fd_add on another
 * thread (outside its context, block.h) that had passed its check when
 * the vCPU's block started grew the fd tables under the sleep: the kernel
 * then wrote the freed event array (glibc abort). Both sides checked a
 * plain flag. Now both claim it by exchange: the block that starts while
 * the fd_add is inside its table growth (held there by the allocator) is
 * refused, VSCHED_ESTATE, and the fd_add completes. */
static sem_t growing, grow_go;
static _Atomic bool gate_alloc;
static void *gated_alloc(size_t size, size_t align, void *ctx)
{
	void *p = NULL;
	(void)ctx;
	if (atomic_exchange(&gate_alloc, false)) {
		sem_post(&growing);
		while (sem_wait(&grow_go))
			;
	}
	return posix_memalign(&p, align, size) ? NULL : p;
}

static void plain_free(void *p, size_t size, void *ctx)
{
	(void)size, (void)ctx;
	free(p);
}

struct adder {
	struct vsched_vcpu *v;
	int fd, rc;
};

static void *adder_thread(void *arg)
{
	struct adder *a = arg;
	a->rc = vsched_vcpu_fd_add(a->v, a->fd, EPOLLIN, 5);
	return NULL;
}

static void test_bug_fd_add_growth_against_block(void **state)
{
	struct vsched_allocator al = { .alloc = gated_alloc, .free = plain_free };
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .alloc = &al };
	struct adder a = { .fd = eventfd(0, EFD_NONBLOCK) };
	struct vsched_vm *vm;
	pthread_t t;
	(void)state;

	assert_true(a.fd >= 0);
	assert_int_equal(sem_init(&growing, 0, 0), 0);
	assert_int_equal(sem_init(&grow_go, 0, 0), 0);
	assert_int_equal(vsched_vm_create(&cfg, &vm), 0);
	declare(vm, K_REQ, "req", 1, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	a.v = make_vcpu(vm, 0);
	atomic_store(&gate_alloc, true);
	assert_int_equal(pthread_create(&t, NULL, adder_thread, &a), 0);
	while (sem_wait(&growing))
		;
	/* The fd_add is inside its growth: this thread is the vCPU's. */
	assert_int_equal(vsched_vcpu_block(a.v, vsched_now_ns(vm) + 1000000), VSCHED_ESTATE);
	sem_post(&grow_go);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(a.rc, 0);
	/* Done: the block goes in, and the fd wakes it. */
	assert_int_equal(eventfd_write(a.fd, 1), 0);
	struct vsched_block_result res = { .size = sizeof(res) };
	assert_int_equal(vsched_vcpu_block_ex(a.v, VSCHED_DEADLINE_NONE, &res), VSCHED_WAKE_FD);
	assert_int_equal(res.nready, 1);
	assert_int_equal(res.tags[0], 5);
	assert_int_equal(vsched_vm_destroy(vm), 0);
	close(a.fd);
	sem_destroy(&growing);
	sem_destroy(&grow_go);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vcpu_every_call_every_state),
		cmocka_unit_test(test_waiter_every_call_every_state),
		cmocka_unit_test(test_spurious_futex_return_sleeps_again),
		cmocka_unit_test(test_fd_add_against_sleeper),
		cmocka_unit_test(test_destroy_against_sleeper),
		cmocka_unit_test(test_fd_number_reused),
		cmocka_unit_test(test_bug_fd_add_growth_against_block),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
