/* SPDX-License-Identifier: MIT */
/*
 * scale: 1..256 vCPUs per VM: WAIT-broadcast cost, service cost, memory per
 * vCPU. The baseline of each figure is the same figure at 1 vCPU in the
 * same run (the ratio is its growth; 1 at 1 vCPU).
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

static _Atomic uint64_t tally_bytes;
static void *tally_alloc(size_t size, size_t align, void *ctx)
{
	void *p = NULL;
	(void)ctx;
	if (posix_memalign(&p, align, size))
		return NULL;
	atomic_fetch_add(&tally_bytes, size);
	return p;
}
static void tally_free(void *p, size_t size, void *ctx)
{
	(void)ctx;
	atomic_fetch_sub(&tally_bytes, size);
	free(p);
}

/* A kick that makes the vCPU leave the guest at once (an IPI taken
 * instantly), so that the broadcast measures vsched's own cost. */
static void exit_now(struct vsched_vcpu *v, void *c)
{
	(void)c;
	vsched_vcpu_exit(v);
}

static int run_scale(void)
{
	static const unsigned ns[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256 };
	struct vsched_allocator al = { .alloc = tally_alloc, .free = tally_free };
	struct vsched_host_ops ops = { .kick = exit_now };
	double bcast[9], svc[9], mem[9];

	for (unsigned i = 0; i < 9; i++) {
		unsigned n = ns[i];
		struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &ops, .alloc = &al,
						.max_vcpus = 256 };
		struct vsched_request_desc d = { .name = "tlb_flush", .flags = VSCHED_REQ_WAIT };
		struct vsched_vm *vm;
		struct vsched_vcpu *v[256];
		if (vsched_vm_create(&cfg, &vm) || vsched_request_declare(vm, K_A, &d) ||
		    vsched_request_finalize(vm, 0))
			abort();
		uint64_t before = atomic_load(&tally_bytes);
		for (unsigned k = 0; k < n; k++)
			if (vsched_vcpu_create(vm, k, NULL, &v[k]))
				abort();
		mem[i] = (double)(atomic_load(&tally_bytes) - before) / n;
		const int reps = opt_quick ? 200 : 2000;
		double tb = 0, ts = 0;
		for (int r = 0; r < reps; r++) {
			for (unsigned k = 0; k < n; k++)
				vsched_vcpu_enter(v[k]); /* all in the guest */
			uint64_t t0 = now_ns();
			vsched_broadcast(vm, NULL, 0, K_A); /* WAIT: kick all, wait all */
			uint64_t t1 = now_ns();
			for (unsigned k = 0; k < n; k++)
				vsched_service(v[k]);
			uint64_t t2 = now_ns();
			tb += (double)(t1 - t0);
			ts += (double)(t2 - t1) / n;
		}
		bcast[i] = tb / reps;
		svc[i] = ts / reps;
		vsched_vm_destroy(vm);
		if (opt_json) {
			char m[64];
			snprintf(m, sizeof(m), "wait_broadcast_%u_vcpus", n);
			report("scale", m, "ns", "1_vcpu", &bcast[i], &bcast[0], 1);
			snprintf(m, sizeof(m), "service_per_vcpu_%u_vcpus", n);
			report("scale", m, "ns", "1_vcpu", &svc[i], &svc[0], 1);
			snprintf(m, sizeof(m), "memory_per_vcpu_%u_vcpus", n);
			report("scale", m, "bytes", "1_vcpu", &mem[i], &mem[0], 1);
		}
	}
	if (!opt_json) {
		printf("scale    %6s %18s %16s %14s\n", "vCPUs", "WAIT broadcast ns",
		       "service ns/vCPU", "bytes/vCPU");
		for (unsigned i = 0; i < 9; i++)
			printf("scale    %6u %18.0f %16.1f %14.0f\n", ns[i], bcast[i], svc[i], mem[i]);
		printf("scale    growth 1 -> 256 vCPUs: broadcast x%.0f (per vCPU x%.2f), "
		       "service per vCPU x%.2f, memory per vCPU x%.2f\n",
		       bcast[8] / bcast[0], bcast[8] / 256 / bcast[0], svc[8] / svc[0],
		       mem[8] / mem[0]);
	}
	return 0;
}

const struct bench bench_scale = {
	.name = "scale",
	.desc = "1..256 vCPUs: WAIT broadcast, service, memory per vCPU",
	.run = run_scale,
	.in_all = true,
};
