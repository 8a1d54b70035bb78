/* SPDX-License-Identifier: MIT */
/*
 * Recipe: a VMM whose halted vCPUs wait on a condition variable under a big
 * lock (QEMU's BQL: qemu_wait_io_event() sleeps in
 * qemu_cond_wait(cpu->halt_cond, &bql) and qemu_cpu_kick() broadcasts it).
 * doc/adopting.md explains it; the test suite builds and runs this file.
 *
 * What changes:
 *   - a device model that raises an interrupt (holding the big lock, as
 *     QEMU's do) posts a vsched request instead of setting a flag and
 *     broadcasting halt_cond;
 *   - a halted vCPU thread drops the big lock, blocks in vsched (poll, then
 *     sleep), takes the lock again and services its requests. The lock is
 *     never held across the block: a poster that needs it would deadlock
 *     against the sleeper, and a sleeping holder would stall every device;
 *   - the cancelled-entry check (vsched_vcpu_enter()) replaces re-reading
 *     cpu->interrupt_request just before KVM_RUN.
 *
 *   - stopping a vCPU is a request too (K_STOP, QEMU's run-state change):
 *     a post ends a block in progress, where vsched_vcpu_kick() would not
 *     (a kick wakes the sleeper only for its has_event to look; with
 *     nothing pending the block sleeps again until its deadline), and a
 *     post that lands before the block is seen by its re-check, so the
 *     wake is never lost and the halt needs no deadline to end.
 *
 * Here the "guest" of each vCPU halts after every interrupt it takes, with
 * no deadline (it has no timer armed), and an I/O thread raises ITERS
 * interrupts on each vCPU, one at a time; the run fails unless every
 * interrupt is taken exactly once and every vCPU stops when asked.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <vsched/vsched.h>

#define NVCPUS 2
#define ITERS 2000
#define K_IRQ 0
#define K_STOP 1

static pthread_mutex_t bql = PTHREAD_MUTEX_INITIALIZER;

struct cpu {
	struct vsched_vcpu *vs;
	pthread_t thread;
	unsigned irqs_taken; /* under the BQL */
	_Atomic unsigned irqs_raised;
	bool stop; /* under the BQL, set by the K_STOP handler */
	int error; /* a vsched call that failed, or 0 */
};

static struct cpu cpus[NVCPUS];

/* The request handler runs on the vCPU's thread, which holds the BQL while
 * it services (as QEMU handles cpu->interrupt_request under it). */
static void take_irq(struct vsched_vcpu *v, unsigned kind,
		     struct vsched_payload *p, void *arg)
{
	struct cpu *c = vsched_vcpu_user(v);

	(void)kind, (void)p, (void)arg;
	c->irqs_taken++;
}

/* Stopping: set under the BQL by the vCPU's own thread, like any request. */
static void take_stop(struct vsched_vcpu *v, unsigned kind,
		      struct vsched_payload *p, void *arg)
{
	struct cpu *c = vsched_vcpu_user(v);

	(void)kind, (void)p, (void)arg;
	c->stop = true;
}

static void *vcpu_thread(void *arg)
{
	struct cpu *c = arg;
	int rc = 0;

	vsched_thread_init();
	pthread_mutex_lock(&bql);
	for (;;) {
		if ((rc = vsched_service(c->vs)) < 0)
			break;
		if (c->stop) /* after the service that may have set it */
			break;
		rc = vsched_vcpu_enter(c->vs);
		if (rc == VSCHED_ENTRY_CANCELLED)
			continue; /* a request came at commit: service it first */
		if (rc < 0)
			break; /* destroyed, or misuse: never spin on it */
		/* Guest code runs here without the BQL (QEMU drops it around
		 * KVM_RUN too); this guest halts at once. */
		pthread_mutex_unlock(&bql);
		vsched_vcpu_exit(c->vs);
		/* HLT: wait for an interrupt (or a stop) with the big lock
		 * dropped. No timer is armed, so no deadline: only a posted
		 * request ends it (or a signal, which loops back here). */
		rc = vsched_vcpu_block(c->vs, VSCHED_DEADLINE_NONE);
		pthread_mutex_lock(&bql);
		if (rc < 0)
			break;
	}
	c->error = rc < 0 ? rc : 0;
	pthread_mutex_unlock(&bql);
	return NULL;
}

/* The kick host callback: the vCPU is in "guest mode" only between enter
 * and exit above, where it never stays long; a real VMM signals the thread
 * (vsched_kvm_kick()). */
static void kick(struct vsched_vcpu *v, void *ctx)
{
	(void)v, (void)ctx;
}

int main(void)
{
	struct vsched_host_ops ops = { .kick = kick };
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &ops };
	struct vsched_request_desc irq = { .name = "irq", .priority = 0,
					   .handler = take_irq };
	struct vsched_request_desc stop = { .name = "stop", .priority = 1,
					    .handler = take_stop };
	struct vsched_vm *vm;
	int rc, fails = 0;

	if ((rc = vsched_vm_create(&cfg, &vm)) != 0 ||
	    (rc = vsched_request_declare(vm, K_IRQ, &irq)) != 0 ||
	    (rc = vsched_request_declare(vm, K_STOP, &stop)) != 0 ||
	    (rc = vsched_request_finalize(vm, 0)) != 0) {
		fprintf(stderr, "bql: setup: %s\n", vsched_strerror(rc));
		return 1;
	}
	for (unsigned i = 0; i < NVCPUS; i++) {
		if ((rc = vsched_vcpu_create(vm, i, &cpus[i], &cpus[i].vs)) != 0) {
			fprintf(stderr, "bql: vcpu: %s\n", vsched_strerror(rc));
			return 1;
		}
		if ((rc = pthread_create(&cpus[i].thread, NULL, vcpu_thread,
					 &cpus[i])) != 0) {
			fprintf(stderr, "bql: thread: %s\n", vsched_strerror(-rc));
			return 1;
		}
	}
	/* The I/O thread (here: main) raises interrupts under the BQL, as a
	 * device model does, and waits for each to be taken. */
	for (unsigned n = 0; n < ITERS; n++) {
		for (unsigned i = 0; i < NVCPUS; i++) {
			pthread_mutex_lock(&bql);
			rc = vsched_post(cpus[i].vs, K_IRQ);
			if (rc == 0)
				atomic_fetch_add(&cpus[i].irqs_raised, 1);
			pthread_mutex_unlock(&bql);
			if (rc != 0) {
				fprintf(stderr, "bql: raise: %s\n", vsched_strerror(rc));
				return 1;
			}
		}
		for (unsigned i = 0; i < NVCPUS; i++) {
			unsigned taken;

			do {
				pthread_mutex_lock(&bql);
				taken = cpus[i].irqs_taken;
				pthread_mutex_unlock(&bql);
				/* Let the vCPU thread take the lock: where one
				 * thread runs at a time (one CPU, valgrind) this
				 * loop would otherwise starve it. */
				if (taken < n + 1)
					sched_yield();
			} while (taken < n + 1);
		}
	}
	for (unsigned i = 0; i < NVCPUS; i++) {
		/* A request, not a flag and a kick: the post wakes the block
		 * (or is seen by its re-check), the kick would not. */
		if ((rc = vsched_post(cpus[i].vs, K_STOP)) < 0) {
			fprintf(stderr, "bql: stop: %s\n", vsched_strerror(rc));
			return 1;
		}
		pthread_join(cpus[i].thread, NULL);
		if (cpus[i].error) {
			fprintf(stderr, "bql: vCPU %u: %s\n", i,
				vsched_strerror(cpus[i].error));
			fails++;
		}
		if (cpus[i].irqs_taken != atomic_load(&cpus[i].irqs_raised)) {
			fprintf(stderr, "bql: vCPU %u took %u of %u interrupts\n", i,
				cpus[i].irqs_taken, atomic_load(&cpus[i].irqs_raised));
			fails++;
		}
	}
	vsched_vm_destroy(vm);
	printf("bql: %u vCPUs, %u interrupts each, raised under the big lock and "
	       "taken once each: %s\n", NVCPUS, ITERS, fails ? "FAIL" : "PASS");
	return fails ? 1 : 0;
}
