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
 * Here the "guest" of each vCPU halts after every interrupt it takes and
 * an I/O thread raises ITERS interrupts on each vCPU, one at a time; the
 * run fails unless every interrupt is taken exactly once.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <vsched/vsched.h>

#define NVCPUS 2
#define ITERS 2000
#define K_IRQ 0

static pthread_mutex_t bql = PTHREAD_MUTEX_INITIALIZER;

struct cpu {
	struct vsched_vcpu *vs;
	pthread_t thread;
	unsigned irqs_taken; /* under the BQL */
	_Atomic unsigned irqs_raised;
	_Atomic bool stop;
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

static void *vcpu_thread(void *arg)
{
	struct cpu *c = arg;

	vsched_thread_init();
	pthread_mutex_lock(&bql);
	while (!atomic_load(&c->stop)) {
		vsched_service(c->vs);
		if (vsched_vcpu_enter(c->vs) != 0)
			continue; /* a request came at commit: service it first */
		/* Guest code runs here without the BQL (QEMU drops it around
		 * KVM_RUN too); this guest halts at once. */
		pthread_mutex_unlock(&bql);
		vsched_vcpu_exit(c->vs);
		/* HLT: wait for an interrupt with the big lock dropped. */
		vsched_vcpu_block(c->vs, vsched_deadline_in(vsched_vcpu_vm(c->vs),
							    100000000));
		pthread_mutex_lock(&bql);
	}
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
	struct vsched_vm *vm;
	int rc, fails = 0;

	if ((rc = vsched_vm_create(&cfg, &vm)) != 0 ||
	    (rc = vsched_request_declare(vm, K_IRQ, &irq)) != 0 ||
	    (rc = vsched_request_finalize(vm, 0)) != 0) {
		fprintf(stderr, "bql: setup: %s\n", vsched_strerror(rc));
		return 1;
	}
	for (unsigned i = 0; i < NVCPUS; i++) {
		if ((rc = vsched_vcpu_create(vm, i, &cpus[i], &cpus[i].vs)) != 0) {
			fprintf(stderr, "bql: vcpu: %s\n", vsched_strerror(rc));
			return 1;
		}
		pthread_create(&cpus[i].thread, NULL, vcpu_thread, &cpus[i]);
	}
	/* The I/O thread (here: main) raises interrupts under the BQL, as a
	 * device model does, and waits for each to be taken. */
	for (unsigned n = 0; n < ITERS; n++) {
		for (unsigned i = 0; i < NVCPUS; i++) {
			pthread_mutex_lock(&bql);
			vsched_post(cpus[i].vs, K_IRQ);
			atomic_fetch_add(&cpus[i].irqs_raised, 1);
			pthread_mutex_unlock(&bql);
		}
		for (unsigned i = 0; i < NVCPUS; i++) {
			unsigned taken;

			do {
				pthread_mutex_lock(&bql);
				taken = cpus[i].irqs_taken;
				pthread_mutex_unlock(&bql);
			} while (taken < n + 1);
		}
	}
	for (unsigned i = 0; i < NVCPUS; i++) {
		atomic_store(&cpus[i].stop, true);
		vsched_vcpu_kick(cpus[i].vs);
		pthread_join(cpus[i].thread, NULL);
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
