/* SPDX-License-Identifier: MIT */
#include <string.h>
#include <unistd.h>

#include "abi.h"
#include "mode.h"
#include "contract.h"

#define VSCHED__DEFAULT_MAX_VCPUS 256
#define VSCHED__LIMIT_MAX_VCPUS 4096

/* Online CPUs: the contention veto's yardstick. Not the calling thread's
 * affinity, which a VMM often narrows to one CPU before creating the VM. */
static unsigned online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

static void free_vcpu(struct vsched_vm *vm, struct vsched_vcpu *v)
{
	vsched__sleeper_retire(&v->sl);
	vsched__sleeper_fini(&v->sl);
	vsched__drain_payloads(v);
	vsched__timers_fini(v);
	vsched__free(&vm->alloc, v, v->alloc_size);
}

int vsched_vm_create(const struct vsched_vm_config *cfg, struct vsched_vm **out)
{
	struct vsched_vm_config c = { .size = sizeof(c) };
	const struct vsched_allocator *alloc = vsched_default_allocator();
	struct vsched_vm *vm;

	if (!out)
		return VSCHED_EINVAL;
	*out = NULL;
	/* The extensible-struct rule (lib/abi.h). */
	if (cfg && vsched__struct_in(&c, sizeof(c), cfg,
				     VSCHED__SIZE_TO(struct vsched_vm_config, user)))
		return VSCHED_EINVAL;
	if (c.max_vcpus == 0)
		c.max_vcpus = VSCHED__DEFAULT_MAX_VCPUS;
	if (c.max_vcpus > VSCHED__LIMIT_MAX_VCPUS)
		return VSCHED_EINVAL;
	if (c.alloc) {
		if (!c.alloc->alloc || !c.alloc->free)
			return VSCHED_EINVAL;
		alloc = c.alloc;
	}

	vm = vsched__alloc(alloc, sizeof(*vm));
	if (!vm)
		return VSCHED_ENOMEM;
	vm->alloc = *alloc;
	vm->vcpus = vsched__alloc(alloc, c.max_vcpus * sizeof(*vm->vcpus));
	if (!vm->vcpus) {
		vsched__free(alloc, vm, sizeof(*vm));
		return VSCHED_ENOMEM;
	}
	if (c.ops)
		vm->ops = *c.ops;
	if (!vm->ops.wait)
		vm->ops.wait = vsched__futex_wait;
	if (!vm->ops.wake)
		vm->ops.wake = vsched__futex_wake;
	if (!vm->ops.now_ns)
		vm->ops.now_ns = vsched__clock_now;
	vm->user = c.user;
	vm->max_vcpus = c.max_vcpus;
	vm->ncpus = online_cpus();
	memset(vm->table.rank_of, -1, sizeof(vm->table.rank_of));
	pthread_mutex_init(&vm->lock, NULL);
	{
		struct vsched_poll_params dp;
		int rc;
		if (!c.poll) {
			vsched_poll_defaults(VSCHED_POLL_ADAPTIVE,
					     VSCHED__ARCH_POLL_MAX_NS, &dp);
			c.poll = &dp;
		}
		rc = vsched__poll_install(vm, c.poll);
		if (rc) {
			pthread_mutex_destroy(&vm->lock);
			vsched__free(alloc, (void *)vm->vcpus,
				     c.max_vcpus * sizeof(*vm->vcpus));
			vsched__free(alloc, vm, sizeof(*vm));
			return rc;
		}
	}
	*out = vm;
	return 0;
}

int vsched_vm_destroy(struct vsched_vm *vm)
{
	struct vsched_allocator alloc;

	if (!vm)
		return VSCHED_EINVAL;
	/* A waiter keeps using its VM (its allocator and host ops; its
	 * engine reads the VM's poll generation) until
	 * vsched_waiter_destroy(): refused, nothing freed.
	 * Acquire: pairs with that destroy's release of the count. */
	if (atomic_load_explicit(&vm->nwaiters, memory_order_acquire))
		return VSCHED_ESTATE;
	/* Nor while the timer service's run() is active (it walks the
	 * vCPUs' timers): refused, nothing freed. */
	if (vsched__timers_service_running(vm))
		return VSCHED_ESTATE;
	/* Nor while a vCPU's thread is inside vsched_vcpu_block() (asleep,
	 * polling or in a hook), as vsched_vcpu_destroy() refuses: freed, it
	 * would sleep on freed memory, and the post that wakes it would
	 * write there. Nor while one is inside vsched_service() (a handler
	 * calling this would free the vCPU under its own pass). A check,
	 * not a lock (the contract forbids the race): it catches the VMM
	 * that forgot to stop its vCPU threads. Nor while one is in the
	 * guest (IN_GUEST or EXITING_GUEST, as vsched_vcpu_destroy()
	 * refuses): its thread's exit would write the freed word. */
	for (unsigned i = 0; i < vm->max_vcpus; i++) {
		struct vsched_vcpu *v = atomic_load(&vm->vcpus[i]);
		if (v && (atomic_load_explicit(&v->sl.in_engine, memory_order_relaxed) ||
			  atomic_load_explicit(&v->in_service, memory_order_relaxed) ||
			  vsched__allowed(VSCHED__C_VCPU_DESTROY,
					  atomic_load_explicit(&v->mode, memory_order_relaxed))))
			return VSCHED_ESTATE;
	}
	/* A destroyed vCPU's pass too: a hot-unplug handler destroyed its
	 * own vCPU, then called this. */
	for (struct vsched_vcpu *v = vm->graveyard; v; v = v->next_dead)
		if (atomic_load_explicit(&v->in_service, memory_order_relaxed))
			return VSCHED_ESTATE;
	/* Nor from a host callback (vm.h): a payload_drop (of a vCPU's
	 * destroy, or of this call's own drain), or a kick or wake callout
	 * of a poster, which a vCPU's callout count shows. Checks, as above:
	 * from the callback's own thread they turn a free under it into a
	 * refusal. */
	if (atomic_load_explicit(&vm->in_drop, memory_order_relaxed))
		return VSCHED_ESTATE;
	for (unsigned i = 0; i < vm->max_vcpus; i++) {
		struct vsched_vcpu *v = atomic_load(&vm->vcpus[i]);
		if (v && atomic_load_explicit(&v->sl.callouts, memory_order_relaxed))
			return VSCHED_ESTATE;
	}
	/* The timer service first (it walks the vCPUs' timers): a service
	 * still attached is destroyed with its VM. */
	vsched__timers_free(vm);
	/* Every vCPU refuses posts before any is freed, and the undelivered
	 * payloads go back while every vCPU's memory is still there: a
	 * payload_drop callback that posts (re-routes a payload to another
	 * vCPU) gets VSCHED_EDESTROYED, never a freed vCPU. No other thread
	 * is inside a call (the contract above), so plain stores do. */
	for (unsigned i = 0; i < vm->max_vcpus; i++) {
		struct vsched_vcpu *v = atomic_load(&vm->vcpus[i]);
		if (!v)
			continue;
		atomic_store(&v->mode, vsched__mode_with(atomic_load(&v->mode),
							 VSCHED_MODE_DESTROYED));
		for (unsigned k = 0; k < VSCHED_MAX_KINDS; k++)
			atomic_store_explicit(&v->post_rank[k], -1,
					      memory_order_relaxed);
	}
	for (unsigned i = 0; i < vm->max_vcpus; i++) {
		struct vsched_vcpu *v = atomic_load(&vm->vcpus[i]);
		if (v)
			vsched__drain_payloads(v);
	}
	for (struct vsched_vcpu *v = vm->graveyard; v; v = v->next_dead)
		vsched__drain_payloads(v);
	for (unsigned i = 0; i < vm->max_vcpus; i++) {
		struct vsched_vcpu *v = atomic_load(&vm->vcpus[i]);
		if (v)
			free_vcpu(vm, v);
	}
	while (vm->graveyard) {
		struct vsched_vcpu *v = vm->graveyard;
		vm->graveyard = v->next_dead;
		free_vcpu(vm, v);
	}
	vsched__poll_release(vm);
	pthread_mutex_destroy(&vm->lock);
	alloc = vm->alloc;
	vsched__free(&alloc, (void *)vm->vcpus,
		     vm->max_vcpus * sizeof(*vm->vcpus));
	vsched__free(&alloc, vm, sizeof(*vm));
	return 0;
}

void *vsched_vm_user(const struct vsched_vm *vm)
{
	return vm ? vm->user : NULL;
}

uint64_t vsched_now_ns(const struct vsched_vm *vm)
{
	return vm ? vm->ops.now_ns(vm->ops.ctx) : 0;
}

uint64_t vsched_deadline_in(const struct vsched_vm *vm, uint64_t timeout_ns)
{
	uint64_t now;

	if (!vm || timeout_ns == VSCHED_DEADLINE_NONE)
		return VSCHED_DEADLINE_NONE;
	now = vm->ops.now_ns(vm->ops.ctx);
	/* Saturate: a timeout past the clock's end never wraps into the past. */
	return timeout_ns >= VSCHED_DEADLINE_NONE - now ? VSCHED_DEADLINE_NONE
							 : now + timeout_ns;
}
