/* SPDX-License-Identifier: MIT */
/*
 * Recipe: a unikernel monitor (Solo5 hvt style). doc/adopting.md explains
 * it; the test suite builds and runs this file.
 *
 * 1. The vCPU's "poll" hypercall: wait until one of the guest's network
 *    fds is readable or the guest's timeout passes, where a timeout of 0
 *    means "check once". The monitor registers every fd with vsched once
 *    (vsched_vcpu_fd_add(), no limit on how many), and the hypercall is one
 *    vsched_vcpu_block_ex() with a relative timeout and a ready array of
 *    the monitor's own size. The poll window watches the fds too.
 * 2. The virtio I/O thread: a vsched waiter on the guest's ring, with the
 *    guest's notification (here an eventfd standing in for KVM's
 *    ioeventfd) as a wake source, and virtio's notification suppression
 *    done by the waiter's hooks: the needs-kick flag is armed only right
 *    before the thread sleeps and cleared when it wakes, never while it
 *    polls.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <vsched/vsched.h>

#define NTAPS 40    /* more than any fixed limit vsched once had (32) */
#define PACKETS 2000

static int fail(const char *what, int rc)
{
	fprintf(stderr, "unikernel: %s: %s\n", what, vsched_strerror(rc));
	return 1;
}

/* ---- 1. the poll hypercall ---- */

/* The guest's solo5_yield(timeout, &ready_set): 1 when an fd is ready
 * (its bits in *ready), 0 at the timeout. */
static int hypercall_poll(struct vsched_vcpu *v, uint64_t timeout_ns,
			  uint64_t *ready)
{
	uint64_t tags[64];
	struct vsched_block_result res = { .size = sizeof(res),
					   .ready_tags = tags,
					   .ready_cap = 64 };
	uint64_t deadline = vsched_deadline_in(vsched_vcpu_vm(v), timeout_ns);

	for (;;) {
		int rc = vsched_vcpu_block_ex(v, deadline, &res);

		if (rc < 0)
			return rc;
		if (rc == VSCHED_WAKE_FD) {
			*ready = 0;
			for (unsigned i = 0; i < res.nready; i++)
				*ready |= UINT64_C(1) << tags[i];
			return 1;
		}
		if (rc == VSCHED_WAKE_DEADLINE)
			return 0;
		/* A request (the monitor's own: none here) or a signal:
		 * service it and go on waiting. */
		vsched_service(v);
	}
}

static int run_poll_recipe(void)
{
	struct vsched_vm *vm;
	struct vsched_vcpu *v;
	int taps[NTAPS][2], rc, bad = 0;
	uint64_t ready = 0;
	char b = 'x';

	if ((rc = vsched_vm_create(NULL, &vm)) || (rc = vsched_request_finalize(vm, 0)) ||
	    (rc = vsched_vcpu_create(vm, 0, NULL, &v)))
		return fail("setup", rc);
	for (unsigned i = 0; i < NTAPS; i++) {
		if (pipe(taps[i]))
			return fail("pipe", -errno);
		if ((rc = vsched_vcpu_fd_add(v, taps[i][0], EPOLLIN, i)))
			return fail("fd_add", rc);
	}
	/* Nothing ready: "check once" returns at once, a short timeout at
	 * its deadline. */
	bad += hypercall_poll(v, 0, &ready) != 0;
	bad += hypercall_poll(v, 2000000, &ready) != 0;
	/* Two taps readable: check-once reports both, as does a wait. */
	if (write(taps[7][1], &b, 1) != 1 || write(taps[39][1], &b, 1) != 1)
		return fail("write", -errno);
	bad += hypercall_poll(v, 0, &ready) != 1 ||
	       ready != ((UINT64_C(1) << 7) | (UINT64_C(1) << 39));
	ready = 0;
	bad += hypercall_poll(v, VSCHED_DEADLINE_NONE, &ready) != 1 ||
	       ready != ((UINT64_C(1) << 7) | (UINT64_C(1) << 39));
	for (unsigned i = 0; i < NTAPS; i++) {
		close(taps[i][0]);
		close(taps[i][1]);
	}
	vsched_vcpu_destroy(v);
	vsched_vm_destroy(vm);
	printf("unikernel: poll hypercall over %d fds (check once, timeout, "
	       "ready set): %s\n", NTAPS, bad ? "FAIL" : "PASS");
	return bad != 0;
}

/* ---- 2. the virtio I/O thread ---- */

struct ring {
	_Alignas(64) _Atomic uint64_t avail;  /* guest-written */
	_Alignas(64) _Atomic uint64_t used;   /* I/O-thread-written */
	_Atomic bool needs_kick;              /* VRING_USED_F_NO_NOTIFY, inverted */
	int ioeventfd;
	unsigned kicks;                       /* guest side */
	unsigned sleeps_armed;                /* I/O side */
};

static bool ring_has_work(void *arg)
{
	struct ring *r = arg;

	return atomic_load_explicit(&r->avail, memory_order_acquire) !=
	       atomic_load_explicit(&r->used, memory_order_relaxed);
}

/* The hooks: suppression off only while the I/O thread really sleeps. */
static void arm_notify(struct vsched_waiter *w, void *arg)
{
	struct ring *r = arg;

	(void)w;
	atomic_store_explicit(&r->needs_kick, true, memory_order_relaxed);
	r->sleeps_armed++;
}

static void disarm_notify(struct vsched_waiter *w, void *arg)
{
	struct ring *r = arg;

	(void)w;
	atomic_store_explicit(&r->needs_kick, false, memory_order_relaxed);
}

/* The guest's driver: publish, full barrier, notify only when asked (the
 * barrier pairs with the engine's after before_sleep). */
static void *guest(void *arg)
{
	struct ring *r = arg;
	uint64_t one = 1;

	for (unsigned i = 0; i < PACKETS; i++) {
		while (atomic_load(&r->avail) - atomic_load(&r->used) >= 8)
			; /* the ring is full: wait for the device */
		atomic_fetch_add_explicit(&r->avail, 1, memory_order_seq_cst);
		if (atomic_load_explicit(&r->needs_kick, memory_order_seq_cst)) {
			r->kicks++;
			if (write(r->ioeventfd, &one, sizeof(one)) != sizeof(one))
				abort();
		}
		if (i % 64 == 63)
			usleep(200); /* bursts, then a pause the thread sleeps in */
	}
	return NULL;
}

/* The I/O thread's loop: serve the ring until `n` buffers are used. 0, or
 * 1 after a failed wait or a lost notification (test_adoptrev calls it). */
static int io_serve(struct vsched_vm *vm, struct vsched_waiter *w,
		    struct ring *r, uint64_t n)
{
	while (atomic_load(&r->used) < n) {
		/* A watchdog deadline: a lost notification fails the run
		 * instead of hanging it. */
		int rc = vsched_waiter_wait(w, vsched_deadline_in(vm, 2000000000),
					    NULL);

		if (rc < 0) /* a sleep that failed: retrying would spin */
			return fail("wait", rc);
		if (rc == VSCHED_WAKE_DEADLINE && !ring_has_work(r)) {
			fprintf(stderr, "unikernel: I/O thread starved at %llu of %llu\n",
				(unsigned long long)atomic_load(&r->used),
				(unsigned long long)n);
			return 1;
		}
		/* VSCHED_WAKE_REQUEST: the ring has buffers; VSCHED_WAKE_SIGNAL:
		 * look anyway. A doorbell is never reported ready (only one
		 * that hung up, which an eventfd cannot). */
		while (ring_has_work(r)) /* process every available buffer */
			atomic_fetch_add_explicit(&r->used, 1, memory_order_release);
	}
	return 0;
}

static int run_io_recipe(void)
{
	struct ring r = { .ioeventfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) };
	struct vsched_waiter_config cfg = {
		.size = sizeof(cfg), .cond = ring_has_work, .arg = &r,
		.before_sleep = arm_notify, .after_sleep = disarm_notify,
		.hook_arg = &r,
		/* no .poll: a waiter's default, the I/O thread's profile */
	};
	struct vsched_waiter *w;
	struct vsched_vm *vm;
	pthread_t g;
	int rc;

	if (r.ioeventfd < 0)
		return fail("eventfd", -errno);
	/* The ioeventfd is a doorbell: the guest writes it only while the
	 * thread sleeps (needs_kick armed), so the poll window never checks
	 * it and vsched never reads it (nor do we: doc/adopting.md). */
	if ((rc = vsched_vm_create(NULL, &vm)) || (rc = vsched_request_finalize(vm, 0)) ||
	    (rc = vsched_waiter_create_ex(vm, &cfg, &w)) ||
	    (rc = vsched_waiter_fd_add(w, r.ioeventfd,
				       EPOLLIN | VSCHED_FD_DOORBELL, 0)))
		return fail("setup", rc);
	if ((rc = pthread_create(&g, NULL, guest, &r)) != 0)
		return fail("pthread_create", -rc);
	if ((rc = io_serve(vm, w, &r, PACKETS)) != 0)
		return rc;
	pthread_join(g, NULL);
	vsched_waiter_destroy(w);
	vsched_vm_destroy(vm);
	close(r.ioeventfd);
	printf("unikernel: virtio I/O thread, %d buffers, %u guest notifications "
	       "(armed for %u sleeps): PASS\n", PACKETS, r.kicks, r.sleeps_armed);
	return 0;
}

int main(void)
{
	return run_poll_recipe() | run_io_recipe();
}
