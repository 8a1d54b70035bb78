/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: bytes become a sequence of public-API calls (a request
 * table, vCPUs, timers, posts with and without payloads, service, commit,
 * exit, block with tiny deadlines, timer arm/disarm, policy swaps, stats,
 * broadcasts, vCPU destroy), with invariants checked after every call:
 * - each call returns 0, a positive result or a documented negative errno;
 * - per kind, posted = serviced + coalesced + pending (vsched's counters);
 * - every payload is delivered or dropped exactly once, never twice, and
 *   none is left over when the VM is destroyed;
 * - a handler only runs outside guest mode, on a live vCPU.
 * Single-threaded, with a fake clock and a wait that never sleeps.
 */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vsched/vsched.h>

#define NV 4
#define NP 32

struct input {
	const uint8_t *d;
	size_t n, i;
};

static unsigned take(struct input *in)
{
	return in->i < in->n ? in->d[in->i++] : 0;
}

struct node {
	struct vsched_payload p;
	int state; /* 0 free, 1 posted, 2 delivered or dropped */
};

static struct node nodes[NP];
static uint64_t now;
static struct vsched_vcpu *vcpus[NV];
static bool dead[NV];
static struct vsched_timer *timers[NV];
static unsigned declared_kinds[8], nkinds;
static bool payload_kind[64];

static uint64_t fnow(void *c)
{
	(void)c;
	return now += 7;
}

static int fwait(uint32_t *w, uint32_t e, uint64_t dl, void *c)
{
	(void)w, (void)e, (void)c;
	if (dl != UINT64_MAX && now < dl)
		now = dl;
	return -110; /* time runs out at once */
}

static void fwake(uint32_t *w, void *c)
{
	(void)w, (void)c;
}

static void handler(struct vsched_vcpu *v, unsigned kind, struct vsched_payload *p,
		    void *arg)
{
	(void)arg;
	int m = vsched_vcpu_mode(v);
	assert(m == VSCHED_MODE_OUTSIDE_GUEST);
	assert(!payload_kind[kind] == !p);
	if (p) {
		struct node *nd = (struct node *)p;
		assert(nd->state == 1); /* exactly once */
		nd->state = 2;
	}
}

static void drop(struct vsched_vcpu *v, unsigned kind, struct vsched_payload *p, void *c)
{
	(void)v, (void)kind, (void)c;
	struct node *nd = (struct node *)p;
	assert(nd->state == 1);
	nd->state = 2;
}

static bool valid_rc(int rc)
{
	if (rc >= 0)
		return true;
	return strcmp(vsched_strerror(rc), "unknown vsched error") != 0;
}

static void check_counters(struct vsched_vcpu *v)
{
	struct vsched_vcpu_stats s = { .size = sizeof(s) };
	assert(vsched_vcpu_read_stats(v, &s) == 0);
	for (unsigned k = 0; k < 64; k++) {
		uint64_t extra = s.kind[k].posted - s.kind[k].serviced - s.kind[k].coalesced;
		assert(extra <= 1); /* the pending bit */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size, 0 };
	struct vsched_host_ops ops = { .wait = fwait, .wake = fwake, .now_ns = fnow,
				       .payload_drop = drop };
	struct vsched_poll_params pp;
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &ops, .poll = &pp,
					.max_vcpus = NV };
	struct vsched_vm *vm;
	int rc;

	memset(nodes, 0, sizeof(nodes));
	memset(vcpus, 0, sizeof(vcpus));
	memset(dead, 0, sizeof(dead));
	memset(timers, 0, sizeof(timers));
	memset(payload_kind, 0, sizeof(payload_kind));
	nkinds = 0;
	now = 1000;
	vsched_poll_defaults(take(&in) % 4, 200 + take(&in) * 10, &pp);
	if (vsched_vm_create(&cfg, &vm))
		return 0;

	/* The table: up to 8 kinds, random numbers, priorities, raises. */
	unsigned want = 1 + take(&in) % 8;
	for (unsigned j = 0; j < want; j++) {
		unsigned kind = take(&in) % 64;
		struct vsched_request_desc d = {
			.name = "k",
			.priority = take(&in) % 8,
			.flags = (take(&in) & 1 ? VSCHED_REQ_NO_WAKEUP : 0),
			.handler = handler,
		};
		if (take(&in) % 4 == 0)
			d.flags |= VSCHED_REQ_PAYLOAD;
		if (nkinds && take(&in) % 2)
			d.may_raise = VSCHED_KIND_BIT(declared_kinds[take(&in) % nkinds]);
		rc = vsched_request_declare(vm, kind, &d);
		assert(valid_rc(rc));
		if (rc == 0) {
			declared_kinds[nkinds++] = kind;
			payload_kind[kind] = d.flags & VSCHED_REQ_PAYLOAD;
		}
	}
	rc = vsched_request_finalize(vm, 0);
	assert(valid_rc(rc));
	if (rc)
		rc = vsched_request_finalize(vm, VSCHED_FINALIZE_ALLOW_LATE_RAISE);
	if (rc) { /* a cycle: nothing more to do with this table */
		vsched_vm_destroy(vm);
		return 0;
	}
	for (unsigned v = 0; v < NV; v++) {
		assert(vsched_vcpu_create(vm, v, NULL, &vcpus[v]) == 0);
		unsigned k = declared_kinds[take(&in) % nkinds];
		if (!payload_kind[k]) {
			struct vsched_timer_desc td = { .size = sizeof(td), .kind = k,
							.semantics = take(&in) % 3,
							.cancel = take(&in) % 3 };
			rc = vsched_timer_create(vcpus[v], &td, &timers[v]);
			assert(valid_rc(rc));
		}
	}

	while (in.i < in.n) {
		unsigned op = take(&in) % 14, vi = take(&in) % NV;
		struct vsched_vcpu *v = vcpus[vi];
		unsigned kind = take(&in) % 66; /* includes out of range */
		switch (op) {
		case 0:
		case 1:
			rc = vsched_post(v, kind);
			assert(valid_rc(rc));
			break;
		case 2: {
			struct node *nd = &nodes[take(&in) % NP];
			if (nd->state == 1)
				break; /* still ours to post? no: in flight */
			nd->state = 1;
			rc = vsched_post_payload(v, kind, &nd->p);
			assert(valid_rc(rc));
			if (rc)
				nd->state = 0; /* failed: still the caller's */
			break;
		}
		case 3:
		case 4:
			rc = vsched_service(v);
			assert(valid_rc(rc));
			break;
		case 5:
			rc = vsched_vcpu_enter(v);
			assert(valid_rc(rc));
			break;
		case 6:
			rc = vsched_vcpu_exit(v);
			assert(valid_rc(rc));
			break;
		case 7:
			rc = vsched_vcpu_block(v, now + take(&in) * 3);
			assert(valid_rc(rc));
			break;
		case 8:
			if (timers[vi]) {
				rc = vsched_timer_arm(timers[vi], take(&in) % 2 ? now + take(&in) : 0);
				assert(valid_rc(rc));
			}
			break;
		case 9: {
			struct vsched_poll_params p;
			vsched_poll_defaults(take(&in) % 4, take(&in) * 100, &p);
			assert(vsched_vm_set_poll(vm, &p) == 0);
			break;
		}
		case 10:
			rc = vsched_broadcast(vm, NULL, 0, kind);
			assert(valid_rc(rc));
			break;
		case 11:
			if (take(&in) % 8 == 0 && !dead[vi]) {
				/* only from outside the guest, as documented */
				if (vsched_vcpu_mode(v) == VSCHED_MODE_IN_GUEST ||
				    vsched_vcpu_mode(v) == VSCHED_MODE_EXITING_GUEST)
					vsched_vcpu_exit(v);
				assert(vsched_vcpu_destroy(v) == 0);
				dead[vi] = true;
			}
			break;
		case 12:
			rc = vsched_vcpu_fire_timers(v);
			assert(valid_rc(rc));
			break;
		default:
			now += take(&in) * 100;
			break;
		}
		check_counters(v);
	}
	/* Leave guest mode, service what is left, destroy: every payload is
	 * delivered or dropped exactly once. */
	for (unsigned v = 0; v < NV; v++) {
		if (dead[v])
			continue;
		int m = vsched_vcpu_mode(vcpus[v]);
		if (m == VSCHED_MODE_IN_GUEST || m == VSCHED_MODE_EXITING_GUEST)
			vsched_vcpu_exit(vcpus[v]);
		vsched_service(vcpus[v]);
	}
	vsched_vm_destroy(vm);
	for (unsigned i = 0; i < NP; i++)
		assert(nodes[i].state != 1);
	return 0;
}
