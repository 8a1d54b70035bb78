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
 * - a handler only runs outside guest mode, on a live vCPU;
 * - a kind's name is accepted only when it is an identifier of letters,
 *   digits, '_', '.' and '-' (request.h), whatever its bytes;
 * - extensible structs (VM and waiter configs, timer descriptors, poll
 *   parameters, stats and block results) with a garbage `size`: above
 *   4096 refused with VSCHED_EINVAL, and the library reads and writes only
 *   the caller's struct (the buffer is exactly the struct then: ASan sees
 *   any byte behind it; a size up to 4096 gets a buffer that long, zeroed
 *   past the struct, as a newer caller's would be);
 * - a payload_drop that re-posts the payload to another vCPU during
 *   vsched_vm_destroy() is refused (VSCHED_EDESTROYED: every vCPU is
 *   destroyed before any is freed), and the payload is dropped once;
 * - vsched_vm_destroy() from a host callback (every payload_drop and
 *   every kick callout of a post; a wake callout needs a sleeper, which
 *   this single thread never leaves) is refused with VSCHED_ESTATE and
 *   frees nothing (vm.h): it freed the VM under its caller before;
 * - the public poll policy (poll_init/window/update) on parameters of any
 *   value: init accepts exactly what vsched_vm_set_poll() accepts (the
 *   accepted set becomes the VM's policy), and no window exceeds max_ns;
 * - a timer on a VSCHED_REQ_WAIT kind is refused: vsched_timer_create()
 *   returns VSCHED_EINVAL with a valid descriptor, and makes no timer
 *   (rc < 0) whatever the descriptor's size (timer.h: an expiry never
 *   waits for an acknowledgement). Such kinds (about one in eight, never
 *   with PAYLOAD) are declared but never posted: a single thread's WAIT
 *   post to a vCPU in guest mode would wait for ever;
 * - policy and cancel-policy names round-trip through their parsers, and
 *   err_name, strerror, the profile lookups and timer_report_spurious take
 *   any input.
 * Single-threaded, with a fake clock and a wait that never sleeps.
 */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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
static bool in_vm_destroy, reroute;
static struct vsched_vm *cur_vm; /* for the callbacks' destroy attempts */
static unsigned declared_kinds[8], nkinds;
static bool payload_kind[64];
static bool wait_kind[66];

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

/* A callback may not destroy its VM (vm.h): refused, nothing freed. */
static void destroy_refused(void)
{
	assert(vsched_vm_destroy(cur_vm) == VSCHED_ESTATE);
}

static void fwake(uint32_t *w, void *c)
{
	(void)w, (void)c;
}

static void fkick(struct vsched_vcpu *v, void *c)
{
	(void)v, (void)c;
	destroy_refused();
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

static bool valid_rc(int rc)
{
	if (rc >= 0)
		return true;
	return strcmp(vsched_strerror(rc), "unknown vsched error") != 0;
}

static bool never(void *arg)
{
	(void)arg;
	return false;
}

static void drop(struct vsched_vcpu *v, unsigned kind, struct vsched_payload *p, void *c)
{
	(void)c;
	struct node *nd = (struct node *)p;
	assert(nd->state == 1);
	destroy_refused();
	if (reroute) {
		/* re-post to the next vCPU: during vm_destroy always refused */
		unsigned i = 0;
		while (i < NV && vcpus[i] != v)
			i++;
		int rc = vsched_post_payload(vcpus[(i + 1) % NV], kind, p);
		assert(!in_vm_destroy || rc == VSCHED_EDESTROYED);
		if (rc == 0)
			return; /* in flight again */
	}
	nd->state = 2;
}

/* request.h: letters, digits, '_', '.', '-'; not empty. */
static bool ident(const char *n)
{
	if (!n[0])
		return false;
	for (; *n; n++)
		if (!((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') ||
		      (*n >= '0' && *n <= '9') || *n == '_' || *n == '.' || *n == '-'))
			return false;
	return true;
}

/* An extensible struct of `ours` bytes whose caller claims `size`: a
 * buffer of `size` bytes (zeroed past ours) when it is plausible, else of
 * exactly `ours` (the rest of the claim is garbage: nothing may touch it). */
static void *sized(const void *src, size_t ours, size_t size)
{
	size_t n = size > ours && size <= 4096 ? size : ours;
	unsigned char *b = calloc(1, n);
	assert(b);
	memcpy(b, src, ours);
	memcpy(b, &size, sizeof(size));
	return b;
}

static size_t garbage_size(struct input *in, size_t ours)
{
	static const size_t tbl[] = { 0, 1, 7, 8, 4095, 4096, 4097, 8192, 1u << 20,
				      SIZE_MAX, SIZE_MAX / 2, 0x80000000u };
	unsigned k = take(in) % 16;
	if (k < 12)
		return tbl[k];
	if (k == 12)
		return ours - 1 - take(in) % 8;
	if (k == 13)
		return ours + take(in) % 64;
	return ours;
}

/* One call with a garbage size; rc < 0 above 4096 (VSCHED_EINVAL, or a
 * state refusal that comes first). */
static void garbage_call(struct input *in, struct vsched_vm *vm, unsigned vi,
			 const struct vsched_host_ops *ops)
{
	unsigned which = take(in) % 7;
	struct vsched_vcpu *v = vcpus[vi];
	int rc = 0;
	size_t size;
	switch (which) {
	case 0: {
		struct vsched_vm_config c = { .ops = ops, .max_vcpus = 2 };
		size = garbage_size(in, sizeof(c));
		void *b = sized(&c, sizeof(c), size);
		struct vsched_vm *vm2 = NULL;
		rc = vsched_vm_create(b, &vm2);
		if (rc == 0)
			assert(vsched_vm_destroy(vm2) == 0);
		free(b);
		break;
	}
	case 1: {
		struct vsched_vcpu_stats st;
		memset(&st, 0, sizeof(st));
		size = garbage_size(in, sizeof(st));
		void *b = sized(&st, sizeof(st), size);
		rc = vsched_vcpu_read_stats(v, b);
		free(b);
		break;
	}
	case 2: {
		struct vsched_block_result r;
		memset(&r, 0, sizeof(r));
		size = garbage_size(in, sizeof(r));
		void *b = sized(&r, sizeof(r), size);
		if (vsched_vcpu_mode(v) == VSCHED_MODE_OUTSIDE_GUEST)
			rc = vsched_vcpu_block_ex(v, now, b);
		else
			rc = -1;
		free(b);
		break;
	}
	case 3: {
		struct vsched_timer_desc d = { .kind = declared_kinds[take(in) % nkinds] };
		size = garbage_size(in, sizeof(d));
		void *b = sized(&d, sizeof(d), size);
		struct vsched_timer *t = NULL;
		rc = vsched_timer_create(v, b, &t); /* a timer made stays the vCPU's */
		if (wait_kind[d.kind])
			assert(rc < 0 && !t); /* no timer of a WAIT kind */
		free(b);
		break;
	}
	case 4: {
		struct vsched_waiter_config c = { .cond = never };
		size = garbage_size(in, sizeof(c));
		void *b = sized(&c, sizeof(c), size);
		struct vsched_waiter *w = NULL;
		rc = vsched_waiter_create_ex(vm, b, &w);
		if (rc == 0)
			assert(vsched_waiter_destroy(w) == 0);
		free(b);
		break;
	}
	default: {
		struct vsched_poll_params p;
		vsched_poll_defaults(take(in) % 4, 1000, &p);
		size = garbage_size(in, sizeof(p));
		void *b = sized(&p, sizeof(p), size);
		rc = which == 5 ? vsched_vm_set_poll(vm, b) : vsched_vcpu_set_poll(v, b);
		free(b);
		break;
	}
	}
	assert(valid_rc(rc));
	if (size > 4096)
		assert(rc < 0);
}


/* A 64-bit value: small, an extreme, or eight bytes of the input. */
static uint64_t take64(struct input *in)
{
	static const uint64_t ext[8] = { 0, 1, UINT64_MAX, UINT64_MAX / 2,
					 UINT64_C(1) << 63, UINT64_C(1) << 32,
					 UINT64_MAX - 1, 1000000000 };
	unsigned k = take(in) % 4;
	uint64_t x = 0;
	if (k == 0)
		return (uint64_t)take(in) * 1000;
	if (k == 1)
		return ext[take(in) % 8];
	for (unsigned i = 0; i < 8; i++)
		x = x << 8 | take(in);
	return x;
}

/* The public poll policy (poll.h: pure functions) on parameters of the
 * input's bytes, any of them out of range, and halts of any length:
 * vsched_poll_init() accepts exactly what vsched_vm_set_poll() accepts;
 * every window is at most max_ns ("longest window"); every return code is
 * documented; UBSan sees the arithmetic. An accepted set is then the VM's
 * policy, so the blocks that follow run the engine with it. */
static void poll_replay(struct input *in, struct vsched_vm *vm)
{
	struct vsched_poll_params p;
	struct vsched_poll_state st;
	unsigned policy = take(in) % 5;
	int rc, rc2;

	if (vsched_poll_defaults(policy, take64(in), &p))
		vsched_poll_defaults(0, 1000, &p), p.policy = policy;
	unsigned mask = take(in) | take(in) << 8;
	if (mask & 1)
		p.grow = take(in) % 2 ? take(in) : (unsigned)take64(in);
	if (mask & 2)
		p.shrink = take(in) % 2 ? take(in) : (unsigned)take64(in);
	if (mask & 4)
		p.grow_start_ns = take64(in);
	if (mask & 8)
		p.wake_cost_ns = take64(in);
	if (mask & 16)
		p.latency_weight = take(in) % 2 ? take(in) : (unsigned)take64(in);
	if (mask & 32)
		p.decay_shift = take(in) % 2 ? take(in) % 70 : (unsigned)take64(in);
	if (mask & 64)
		p.sleep_cpu_ns = take64(in);
	if (mask & 128)
		p.spin_pct = take(in) % 2 ? take(in) : (unsigned)take64(in);
	if (mask & 256)
		p.cpu_budget_pct = take(in) % 2 ? take(in) * 50 : (unsigned)take64(in);
	if (mask & 512)
		p.contention = take(in) % 4;
	if (mask & 1024)
		p.max_ns = take64(in);
	rc = vsched_poll_init(&p, &st);
	assert(valid_rc(rc));
	rc2 = vsched_vm_set_poll(vm, &p);
	assert(valid_rc(rc2));
	assert((rc == 0) == (rc2 == 0)); /* one rule for both */
	if (rc)
		return;
	for (unsigned n = take(in) % 48; n--;) {
		uint64_t w = vsched_poll_window(&p, &st);
		assert(w <= p.max_ns);
		unsigned how = take(in);
		uint64_t win = how & 1 ? w : take64(in);
		uint64_t halt = how & 2 ? take64(in) : (uint64_t)take(in) << (take(in) % 40);
		rc = vsched_poll_update(&p, &st, win, halt, how & 4);
		assert(valid_rc(rc));
	}
}

/* Names and parsers (any bytes): a name a parser accepts names what it
 * returned; err_name and is_own_error of any int; the profile lookups;
 * vsched_timer_report_spurious() of any cost (the vCPU's thread: this
 * one), also on a destroyed vCPU's timer. */
static void names(struct input *in, unsigned vi)
{
	char s[17];
	unsigned len = take(in) % 17;
	for (unsigned c = 0; c < len; c++)
		s[c] = (char)take(in);
	s[len < 16 ? len : 16] = 0;
	int r = vsched_poll_policy_parse(s);
	assert(r == VSCHED_EINVAL || (r >= 0 && vsched_poll_policy_name((unsigned)r) &&
				      !strcmp(vsched_poll_policy_name((unsigned)r), s)));
	r = vsched_cancel_policy_parse(s);
	assert(r == VSCHED_EINVAL || (r >= 0 && vsched_cancel_policy_name((unsigned)r) &&
				      !strcmp(vsched_cancel_policy_name((unsigned)r), s)));
	const struct vsched_profile *pr = vsched_profile_get(take(in) % 2 ? s : NULL);
	if (pr) {
		r = vsched_profile_find(pr, s);
		assert(r >= 0 || r == VSCHED_ERANGE);
	}
	int e = (int)(take(in) << 24 | take(in) << 16 | take(in) << 8 | take(in));
	const char *en = vsched_err_name(e);
	assert(en && vsched_strerror(e));
	if (vsched_is_own_error(e))
		assert(strcmp(vsched_strerror(e), "unknown vsched error") != 0 ||
		       !strcmp(en, "UNKNOWN"));
	if (timers[vi]) {
		r = vsched_timer_report_spurious(timers[vi], take64(in));
		assert(valid_rc(r));
	}
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
				       .kick = fkick, .payload_drop = drop };
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
	memset(wait_kind, 0, sizeof(wait_kind));
	nkinds = 0;
	now = 1000;
	reroute = false;
	vsched_poll_defaults(take(&in) % 4, 200 + take(&in) * 10, &pp);
	if (vsched_vm_create(&cfg, &vm))
		return 0;
	cur_vm = vm;

	/* The table: up to 8 kinds, random numbers, priorities, raises. */
	unsigned want = 1 + take(&in) % 8;
	for (unsigned j = 0; j < want; j++) {
		unsigned kind = take(&in) % 64;
		char name[12];
		/* one name per kind number: names are unique in a VM */
		snprintf(name, sizeof(name), "k%u", kind);
		/* a byte above 0xf0: a name of the input's bytes */
		if (in.i < in.n && in.d[in.i] >= 0xf0) {
			unsigned len = take(&in) % 10;
			for (unsigned c = 0; c < len; c++)
				name[c] = (char)take(&in);
			name[len] = 0;
		}
		unsigned fb = take(&in);
		struct vsched_request_desc d = {
			.name = name,
			.priority = take(&in) % 8,
			.flags = (fb & 1 ? VSCHED_REQ_NO_WAKEUP : 0) |
				 (fb & 2 ? VSCHED_REQ_RERAISE : 0),
			.handler = handler,
		};
		unsigned pb = take(&in);
		if (pb % 4 == 0)
			d.flags |= VSCHED_REQ_PAYLOAD;
		/* else bits 2-4 of that byte all set: a WAIT kind */
		else if ((pb & 0x1c) == 0x1c)
			d.flags |= VSCHED_REQ_WAIT;
		if (nkinds && take(&in) % 2)
			d.may_raise = VSCHED_KIND_BIT(declared_kinds[take(&in) % nkinds]);
		/* A self-edge: a cycle unless RERAISE declares it. */
		if (take(&in) % 4 == 0)
			d.may_raise |= VSCHED_KIND_BIT(kind);
		rc = vsched_request_declare(vm, kind, &d);
		assert(valid_rc(rc));
		if (!ident(name))
			assert(rc == VSCHED_EINVAL);
		if (rc == 0) {
			declared_kinds[nkinds++] = kind;
			payload_kind[kind] = d.flags & VSCHED_REQ_PAYLOAD;
			wait_kind[kind] = d.flags & VSCHED_REQ_WAIT;
		}
	}
	if (!nkinds) { /* every name refused */
		vsched_vm_destroy(vm);
		return 0;
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
			if (wait_kind[k]) /* timer.h: neither PAYLOAD nor WAIT */
				assert(rc == VSCHED_EINVAL && !timers[v]);
		}
	}

	while (in.i < in.n) {
		/* bytes 0xe0 and above: the calls added later (garbage sizes,
		 * the re-routing payload_drop; 0xfc and above the poll policy
		 * replay, names and parsers) */
		unsigned op = take(&in), vi = take(&in) % NV;
		op = op >= 0xfc ? 16 + op % 2 : op >= 0xe0 ? 14 + op % 2 : op % 14;
		struct vsched_vcpu *v = vcpus[vi];
		unsigned kind = take(&in) % 66; /* includes out of range */
		if (wait_kind[kind] && (op <= 2 || op == 10))
			continue; /* a WAIT post could wait for ever (above) */
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
		case 14:
			garbage_call(&in, vm, vi, &ops);
			break;
		case 15:
			reroute = !reroute;
			break;
		case 16:
			poll_replay(&in, vm);
			break;
		case 17:
			names(&in, vi);
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
	in_vm_destroy = true;
	vsched_vm_destroy(vm);
	in_vm_destroy = false;
	for (unsigned i = 0; i < NP; i++)
		assert(nodes[i].state != 1);
	return 0;
}
