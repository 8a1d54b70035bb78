/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for libvsched-kvm's halt-polling governor
 * (<vsched/kvmgov.h>, lib/host/kvmgov.c). The input is a sequence of
 * operations on
 * - four stats fd contents (vCPU fd i reads content i % 4): built from a
 *   compact description laid out as KVM_GET_STATS_FD's api.rst describes
 *   (fields present or missing, of the right shape or not, name sizes,
 *   layouts), replaced by raw bytes, patched, truncated, their counters
 *   advanced as KVM's kvm_vcpu_halt() does or set anywhere (backwards);
 * - a fake KVM (the governor's injectable ops): KVM_CHECK_EXTENSION's and
 *   KVM_GET_STATS_FD's results, KVM_ENABLE_CAP failing from the n-th call,
 *   preads that fail, come back short or empty from the n-th call;
 * - two governor slots: create with 0 to UINT_MAX vCPUs and odd configs
 *   (sizes, tails, poll parameters, hysteresis, rates, forced sums, the
 *   VMM's own stats fds, the ticking thread), ticks on a fake clock that
 *   jumps and goes backwards, cap overrides, stats reads and writes with
 *   odd sizes and formats, destroy, and calls on an empty slot (NULL).
 * Checked after every call: the return code is 0, a documented success
 * or a documented negative code with a vsched_strerror() text; every cap
 * set through the ops is at most UINT32_MAX and, from the policy, at most
 * the policy's max_ns; the counters agree with what the fake KVM saw
 * (samples, cap changes, set errors, the cap in force, halts = polled +
 * slept); a tick that returns IDLE read nothing, one that returns CHANGED
 * set the cap once; a tick on the caller's clock (no thread) is IDLE
 * exactly when interval_ns has not passed since the last tick that was
 * not (none yet: never IDLE), a clock that stepped back below that tick
 * restarting the interval from the step (kvmgov.h, 91172bf); a decision
 * (the `decisions` count rose) changes the cap (CHANGED) only
 * min_change_ns or more after the last change (a tick's or set_cap's), and
 * is held by the rate bound (`held_rate` rose) only sooner, the last
 * change taken back to the decision's clock when that stepped back below
 * it; a config whose samples_per_tick is above VSCHED_KVM_GOV_MAX_SAMPLES
 * is refused at create (VSCHED_EINVAL); a governor reads and closes only fds it opened, each
 * once, and has closed them all when create fails or destroy returns (the
 * VMM's own fds too: the process's open fds are counted). ASan's leak
 * check and UBSan run on top.
 *
 * FUZZ_KVMGOV_SEEDS=dir ./fuzz_kvmgov writes the seed inputs of
 * test/fuzz/corpus_kvmgov/ into dir and exits.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vsched/error.h>
#include <vsched/kvmgov.h>
#include <vsched/poll.h>
#include <vsched/profile.h>
#include <vsched/stats.h>

#define NC 4		    /* stats contents */
#define MAXC 32768	    /* bytes of one */
#define NSLOT 2		    /* governors alive at once */
#define MAXV 4096	    /* the API's vCPU limit */
#define FAKE_FD (1 << 20)   /* fake stats fds: FAKE_FD + sequence */
#define NFAKE 16384	    /* fake fds per input */
#define NREAL 1024	    /* real fd numbers tracked */
#define SEC 1000000000ull

static bool trace; /* FUZZ_KVMGOV_TRACE set: each call and its result */

struct input {
	const uint8_t *d;
	size_t n, i;
};

static unsigned take8(struct input *in)
{
	return in->i < in->n ? in->d[in->i++] : 0;
}

static unsigned take16(struct input *in)
{
	return take8(in) | take8(in) << 8;
}

static uint64_t take64(struct input *in)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)take8(in) << (8 * i);
	return v;
}

/* ---- the stats contents ---- */

static struct content {
	uint8_t b[MAXC];
	size_t len;
} cont[NC];

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

#define T_CUMUL 0x0
#define T_LINEAR 0x3
#define T_LOG 0x4
#define U_NONE 0x00
#define U_SEC 0x20

enum {
	S_HIST_SUCC, S_HIST_FAIL, S_HIST_WAIT, S_SUCC_NS, S_FAIL_NS, S_WAIT_NS,
	S_SUCC_N, S_ATT_N, S_INV_N, S_WAKEUP_N, S_BLOCKING, S_EXITS, S_NNAMES
};

static const char *const names[S_NNAMES] = {
	"halt_poll_success_hist", "halt_poll_fail_hist", "halt_wait_hist",
	"halt_poll_success_ns", "halt_poll_fail_ns", "halt_wait_ns",
	"halt_successful_poll", "halt_attempted_poll", "halt_poll_invalid",
	"halt_wakeup", "blocking", "exits",
};

struct sdesc {
	const char *name;
	uint32_t flags;
	int16_t exponent;
	uint16_t size;
	uint32_t off;
};

/*
 * A stats fd's contents from a compact description (6 bytes):
 * mask (16 bits): bits 0-9 the governor's fields present, 10-11 the
 * unrelated ones, 12 reversed order, 13 data before the descriptors, 14
 * the first field twice, 15 header flags and the id string non-zero;
 * bad: field bad % 16 gets wrong shape or offset bad >> 4; hist: buckets
 * of the histograms (0: 32); ns: the name size; init: values non-zero.
 */
static void synth(struct content *c, struct input *in)
{
	static const uint32_t name_sizes[16] = { 48, 48, 48, 48, 23, 22, 24, 1,
						 64, 1024, 1025, 0, 47, 32, 16, 128 };
	unsigned mask = take16(in), bad = take8(in), hist = take8(in);
	uint32_t ns = name_sizes[take8(in) % 16], dsz = 16 + ns, off = 0;
	unsigned init = take8(in);
	struct sdesc d[S_NNAMES + 1];
	unsigned n = 0;
	uint32_t desc_at, data_at, data_len;
	size_t len;

	hist = hist ? hist % 70 : 32;
	for (unsigned i = 0; i < S_NNAMES; i++) {
		unsigned k = mask & (1u << 12) ? S_NNAMES - 1 - i : i;
		struct sdesc *x = &d[n];

		if (k < 10 ? !(mask & (1u << k)) : !(mask & (1u << (k == S_BLOCKING ? 10 : 11))))
			continue;
		x->name = names[k];
		if (k <= S_HIST_WAIT)
			*x = (struct sdesc){ names[k], T_LOG | U_SEC, -9, (uint16_t)hist, 0 };
		else if (k <= S_WAIT_NS)
			*x = (struct sdesc){ names[k], T_CUMUL | U_SEC, -9, 1, 0 };
		else
			*x = (struct sdesc){ names[k], T_CUMUL | U_NONE, 0, 1, 0 };
		n++;
	}
	if (mask & (1u << 14) && n)
		d[n++] = d[0];
	for (unsigned i = 0; i < n; i++) {
		d[i].off = off;
		off += d[i].size * 8u;
	}
	if (bad % 16 < n) {
		struct sdesc *x = &d[bad % 16];

		switch (bad >> 4) {
		case 1: x->flags = (x->flags & ~0xFu) | T_LINEAR; break;
		case 2: x->flags ^= U_SEC; break;
		case 3: x->exponent = x->exponent ? 0 : -6; break;
		case 4: x->size = 0; break;
		case 5: x->size = 65; break;
		case 6: x->size = x->size == 1 ? 2 : 1; break;
		case 7: x->flags |= 0x100; break; /* base POW2 */
		case 8: x->off += 4; break;
		case 9: x->off = 0x7ffffff8; break;
		case 10: x->off = (1u << 20) - x->size * 8u; break;
		case 11: x->off = 0; break; /* overlaps the first */
		case 12: x->size = 64; break;
		default: break;
		}
	}
	data_len = off;
	if (mask & (1u << 13)) {
		data_at = 24 + ns;
		desc_at = data_at + data_len;
	} else {
		desc_at = 24 + ns;
		data_at = desc_at + n * dsz;
	}
	len = (size_t)data_at + data_len;
	if (len > MAXC)
		len = MAXC;
	memset(c->b, 0, MAXC);
	c->len = len;
	put32(c->b + 4, ns);
	put32(c->b + 8, n);
	put32(c->b + 12, 24);
	put32(c->b + 16, desc_at);
	put32(c->b + 20, data_at);
	if (mask & (1u << 15)) {
		put32(c->b, 0xffffffff);
		if (24 + ns <= MAXC)
			memset(c->b + 24, 'k', ns);
	} else if (ns && 24 + ns <= MAXC) {
		snprintf((char *)c->b + 24, ns, "kvm-4242/vcpu-0");
	}
	for (unsigned i = 0; i < n; i++) {
		size_t at = desc_at + (size_t)i * dsz;

		if (at + dsz > MAXC)
			break;
		put32(c->b + at, d[i].flags);
		memcpy(c->b + at + 4, &d[i].exponent, 2);
		memcpy(c->b + at + 6, &d[i].size, 2);
		put32(c->b + at + 8, d[i].off);
		put32(c->b + at + 12, 0);
		strncpy((char *)c->b + at + 16, d[i].name, ns); /* no NUL if short */
	}
	if (init)
		for (size_t i = data_at; i < len; i++)
			c->b[i] = (uint8_t)(init * (i + 1));
}

/* Where value `idx` of statistic `name` lies in content c (the first such
 * descriptor), as the governor would find it; false where the layout does
 * not say. */
static bool locate(const struct content *c, const char *name, unsigned idx,
		   size_t *at)
{
	uint32_t ns, nd, desc_at, data_at;

	if (c->len < 24)
		return false;
	ns = get32(c->b + 4);
	nd = get32(c->b + 8);
	desc_at = get32(c->b + 16);
	data_at = get32(c->b + 20);
	if (!ns || ns > 2048)
		return false;
	for (uint32_t i = 0; i < nd; i++) {
		uint64_t p = desc_at + (uint64_t)i * (16 + ns);
		uint16_t size;
		uint64_t v;

		if (p + 16 + ns > c->len)
			return false;
		if (strnlen((const char *)c->b + p + 16, ns) == ns ||
		    strcmp((const char *)c->b + p + 16, name))
			continue;
		memcpy(&size, c->b + p + 6, 2);
		if (!size)
			return false;
		if (idx >= size)
			idx = size - 1;
		v = data_at + (uint64_t)get32(c->b + p + 8) + idx * 8ull;
		if (v + 8 > c->len)
			return false;
		*at = v;
		return true;
	}
	return false;
}

static void add(struct content *c, const char *name, unsigned idx, uint64_t v)
{
	size_t at;
	uint64_t x;

	if (!locate(c, name, idx, &at))
		return;
	memcpy(&x, c->b + at, 8);
	x += v;
	memcpy(c->b + at, &x, 8);
}

/* KVM_STATS_LOG_HIST_UPDATE: bucket fls64(ns) (clamped by locate()). */
static unsigned bucket(uint64_t ns)
{
	return ns ? 64u - (unsigned)__builtin_clzll(ns) : 0;
}

/* A duration or a count from one byte: small, powers of two, the edges. */
static uint64_t val(unsigned b)
{
	if (b == 255)
		return UINT64_MAX;
	if (b == 254)
		return UINT32_MAX;
	if (b == 253)
		return 1ull << 63;
	return (uint64_t)(b & 7) << (b >> 3);
}

/* ---- the fake KVM ---- */

static const int errnos[8] = { -EIO, -EAGAIN, -EINVAL, -EFAULT, -ENOTTY,
			       -EPERM, -EINTR, -ENODEV };

static bool injected(int rc)
{
	for (unsigned i = 0; i < 8; i++)
		if (rc == errnos[i])
			return true;
	return false;
}

/* Where an ops call is routed: the governor's slot. */
struct slot {
	struct vsched_kvm_gov *g;
	unsigned idx;
	unsigned nv;
	bool threaded;
	uint64_t bound;		/* the policy's max_ns, at most UINT32_MAX */
	uint64_t sets_ok, sets_fail, sets_ok_decision, sets_fail_decision;
	uint64_t samples;	/* ticks that should have read */
	uint64_t cap;		/* the cap in force, UINT64_MAX: KVM's */
	unsigned open;		/* stats fds it holds */
	/* The interval and rate bound's model (not threaded): */
	uint64_t interval, min_change, last_tick, last_change;
	bool sampled_once, changed_once;
};

static struct slot slots[NSLOT];
static struct slot *creating; /* the slot a create is filling */

static struct {
	int check_rc;		/* KVM_CHECK_EXTENSION's result */
	int stats_rc;		/* KVM_GET_STATS_FD's error, from call stats_after */
	unsigned stats_after;
	int set_rc;		/* KVM_ENABLE_CAP's error, from call set_after */
	unsigned set_after;
	unsigned pread_kind;	/* 0 none, 1 error, 2 short, 3 empty, 4 one byte more asked than read */
	int pread_rc;
	unsigned pread_after, pread_times;
	unsigned cut;
	/* During one API call. */
	bool override;
	unsigned call_preads, call_sets, call_sets_ok;
} K;

/* The fds: fake ones (FAKE_FD + sequence) and real duplicates of the
 * VMM's own (real fd numbers). State 0 never seen, 1 open, 2 closed. */
static struct fdent {
	uint8_t state, cont;
	struct slot *owner;
} fakes[NFAKE], reals[NREAL];
static unsigned nfakes;
static int base_fd[NC];
static ino_t base_ino[NC];

static struct fdent *lookup(int fd)
{
	if (fd >= FAKE_FD && fd < FAKE_FD + (int)nfakes)
		return &fakes[fd - FAKE_FD];
	if (fd >= 0 && fd < NREAL)
		return &reals[fd];
	return NULL;
}

static int f_check(void *ctx, int vm_fd)
{
	(void)ctx;
	assert(vm_fd >= 0);
	return K.check_rc;
}

static int f_set(void *ctx, int vm_fd, uint64_t ns)
{
	struct slot *s = ctx;

	assert(vm_fd >= 0);
	/* KVM's cap is 32 bits; the policy's window at most its max_ns. */
	assert(ns <= UINT32_MAX);
	if (!K.override)
		assert(ns <= s->bound);
	K.call_sets++;
	if (K.set_after)
		K.set_after--;
	else if (K.set_rc) {
		s->sets_fail++;
		s->sets_fail_decision += !K.override;
		return K.set_rc;
	}
	K.call_sets_ok++;
	s->sets_ok++;
	s->sets_ok_decision += !K.override;
	s->cap = ns;
	return 0;
}

static int f_stats_fd(void *ctx, int vcpu_fd)
{
	struct fdent *e;

	(void)ctx;
	assert(creating && vcpu_fd >= 0);
	if (K.stats_after)
		K.stats_after--;
	else if (K.stats_rc)
		return K.stats_rc;
	if (nfakes == NFAKE)
		return -EMFILE;
	e = &fakes[nfakes];
	e->state = 1;
	e->cont = (uint8_t)(vcpu_fd % NC);
	e->owner = creating;
	creating->open++;
	return FAKE_FD + (int)nfakes++;
}

static ssize_t f_pread(void *ctx, int fd, void *buf, size_t len, uint64_t off)
{
	struct fdent *e = lookup(fd);
	const struct content *c;
	size_t n;

	(void)ctx;
	assert(e);
	if (fd < FAKE_FD && e->state != 1) {
		/* A duplicate of one of the VMM's own, first seen. */
		struct stat st;
		unsigned i;

		assert(creating && fstat(fd, &st) == 0);
		for (i = 0; i < NC && st.st_ino != base_ino[i]; i++)
			;
		assert(i < NC);
		e->state = 1;
		e->cont = (uint8_t)i;
		e->owner = creating;
		creating->open++;
	}
	assert(e->state == 1); /* never a closed fd */
	memset(buf, 0xa5, len); /* the whole buffer must be the governor's */
	K.call_preads++;
	if (K.pread_kind && !K.pread_after && K.pread_times) {
		if (K.pread_times != 255)
			K.pread_times--;
		switch (K.pread_kind) {
		case 1:
			return K.pread_rc;
		case 3:
			return 0;
		default:
			break;
		}
	} else if (K.pread_after) {
		K.pread_after--;
	}
	c = &cont[e->cont];
	n = off >= c->len ? 0 : c->len - (size_t)off;
	if (n > len)
		n = len;
	if (K.pread_kind == 2 && K.cut && !K.pread_after && K.pread_times)
		n = n > K.cut ? n - K.cut : 0;
	memcpy(buf, c->b + (n ? off : 0), n);
	return (ssize_t)n;
}

static void f_close(void *ctx, int fd)
{
	struct fdent *e = lookup(fd);

	(void)ctx;
	assert(e && e->state == 1); /* opened, once */
	e->state = 2;
	assert(e->owner->open > 0);
	e->owner->open--;
	if (fd < FAKE_FD)
		assert(close(fd) == 0);
}

/* Open fds of the process (the VMM's own stats fds are duplicated). */
static unsigned count_fds(void)
{
	unsigned n = 0;

	for (int fd = 0; fd < NREAL; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

/* ---- checks ---- */

static void rc_ok(int rc, const int *allowed, unsigned n)
{
	const char *t = vsched_strerror(rc);

	assert(t && *t);
	if (rc >= 0)
		return;
	assert(strcmp(t, "unknown vsched error"));
	if (injected(rc))
		return;
	for (unsigned i = 0; i < n; i++)
		if (rc == allowed[i])
			return;
	fprintf(stderr, "undocumented return %d (%s)\n", rc, t);
	abort();
}

#define RC_OK(rc, ...)                                                         \
	do {                                                                   \
		const int a_[] = { __VA_ARGS__ };                              \
		rc_ok(rc, a_, sizeof(a_) / sizeof(a_[0]));                     \
	} while (0)

/* The counters against what the fake KVM saw. */
static void check_stats(const struct slot *s, const struct vsched_kvm_gov_stats *st)
{
	assert(st->vcpus == s->nv);
	assert(st->model <= VSCHED_KVM_GOV_SUMS);
	assert(st->cap_changes == s->sets_ok);
	assert(st->set_errors == s->sets_fail);
	assert(st->cap_ns == s->cap);
	assert(st->cap_ns == UINT64_MAX || st->cap_ns <= UINT32_MAX);
	assert(st->halts == st->halts_polled + st->halts_slept);
	assert(st->decisions == st->held_hysteresis + st->held_rate +
				       s->sets_ok_decision + s->sets_fail_decision);
	if (st->decisions)
		assert(st->window_ns <= s->bound);
	if (!s->threaded)
		assert(st->samples == s->samples);
}

static void read_check(struct slot *s)
{
	struct vsched_kvm_gov_stats st = { .size = sizeof(st) };

	assert(vsched_kvm_gov_read_stats(s->g, &st) == 0);
	check_stats(s, &st);
	if (trace)
		vsched_kvm_gov_stats_write(s->g, stderr, VSCHED_STATS_JSON);
}

/* ---- the calls ---- */

static struct vsched_kvm_gov_config cfgv;
static struct {
	struct vsched_kvm_gov_config c;
	uint8_t tail[16];
} cfgbuf;
static struct {
	struct vsched_poll_params p;
	uint8_t tail[16];
} pollbuf;
static unsigned cfg_size_mode, poll_size_mode;
static bool use_poll, own;
static int vcpu_fds[MAXV], stats_fds[MAXV];
static uint64_t now;
static FILE *devnull;
static bool used_own;
static unsigned fds_before;

static const unsigned nv_table[16] = { 0, 1, 2, 3, 4, 1, 2, 5, 8, 1, 2,
				       4097, UINT32_MAX, 4096, 64, 1 };

static void destroy(struct slot *s)
{
	if (!s->g) {
		assert(vsched_kvm_gov_destroy(NULL) == VSCHED_EINVAL);
		return;
	}
	assert(vsched_kvm_gov_destroy(s->g) == 0);
	assert(s->open == 0); /* every stats fd closed */
	s->g = NULL;
}

static void create(struct slot *s, struct input *in)
{
	unsigned nsel = take8(in), flags = take8(in);
	unsigned nv = nv_table[nsel % 16];
	struct vsched_kvm_gov_ops ops = { f_check, f_set, f_stats_fd, f_pread,
					  f_close, s };
	struct vsched_kvm_gov *g = NULL;
	const struct vsched_profile *prof = vsched_profile_get(NULL);
	int vm_fd = flags & 1 ? -1 : 100;
	int rc;

	if (s->g)
		destroy(s);
	memset(s, 0, sizeof(*s));
	s->idx = (unsigned)(s - slots);
	s->cap = UINT64_MAX;
	s->nv = nv;
	for (unsigned i = 0; i < MAXV; i++) {
		vcpu_fds[i] = (int)(i % NC);
		stats_fds[i] = base_fd[i % NC];
	}
	if (flags & 2) /* one vCPU fd or stats fd that is not */
		vcpu_fds[(nsel >> 4) % 8] = -1;
	if (flags & 4)
		stats_fds[(nsel >> 4) % 8] = flags & 8 ? -1 : NREAL - 1;
	cfgbuf.c = cfgv;
	cfgbuf.c.ops = &ops;
	cfgbuf.c.poll = use_poll ? &pollbuf.p : NULL;
	cfgbuf.c.stats_fds = own ? stats_fds : NULL;
	if (cfgbuf.c.thread)
		cfgbuf.c.interval_ns = 3600 * SEC; /* its first tick only */
	if (nv > 64 && cfgbuf.c.samples_per_tick != 1)
		cfgbuf.c.samples_per_tick = 1; /* a tick's work: vCPUs x samples */
	switch (cfg_size_mode) {
	case 1: cfgbuf.c.size = offsetof(struct vsched_kvm_gov_config, stats_fds); break;
	case 2: cfgbuf.c.size = sizeof(cfgbuf); break; /* zero tail */
	case 3: cfgbuf.c.size = sizeof(cfgbuf); cfgbuf.tail[3] = 1; break;
	default: cfgbuf.c.size = sizeof(cfgbuf.c); break;
	}
	switch (poll_size_mode) {
	case 1: pollbuf.p.size = offsetof(struct vsched_poll_params, decay_shift); break;
	case 2: pollbuf.p.size = sizeof(pollbuf); break;
	case 3: pollbuf.p.size = sizeof(pollbuf); pollbuf.tail[5] = 7; break;
	default: pollbuf.p.size = sizeof(pollbuf.p); break;
	}
	s->bound = use_poll ? pollbuf.p.max_ns : prof ? prof->poll_max_ns : 200000;
	if (s->bound > UINT32_MAX)
		s->bound = UINT32_MAX;
	s->threaded = cfgbuf.c.thread && !(flags & 32);
	if (own && !used_own) {
		used_own = true;
		fds_before = count_fds();
	}
	creating = s;
	rc = vsched_kvm_gov_create(vm_fd, flags & 16 ? NULL : vcpu_fds, nv,
				   flags & 32 ? NULL : &cfgbuf.c,
				   flags & 64 ? NULL : &g);
	creating = NULL;
	if (trace)
		fprintf(stderr, "create slot %u nv %u flags %#x own %d: %d\n",
			s->idx, nv, flags, own, rc);
	memset(cfgbuf.tail, 0, sizeof(cfgbuf.tail));
	memset(pollbuf.tail, 0, sizeof(pollbuf.tail));
	RC_OK(rc, VSCHED_EINVAL, VSCHED_ENOMEM, -EOPNOTSUPP, -EBADMSG, -ENODATA,
	      -EBADF, -EMFILE);
	/* kvmgov.h: samples_per_tick at most VSCHED_KVM_GOV_MAX_SAMPLES */
	if (!(flags & 32) && cfgbuf.c.samples_per_tick > VSCHED_KVM_GOV_MAX_SAMPLES)
		assert(rc == VSCHED_EINVAL || rc == VSCHED_ENOMEM);
	if (rc) {
		assert(s->open == 0); /* nothing left open */
		assert(s->sets_ok + s->sets_fail == 0);
		return;
	}
	assert(g && nv >= 1 && nv <= MAXV && !(flags & 0x71));
	assert(!(flags & 2) || (nsel >> 4) % 8 >= nv);
	assert(!own || !(flags & 4) || (nsel >> 4) % 8 >= nv);
	assert(s->open == nv);
	assert(s->sets_ok + s->sets_fail == 0); /* attach changes nothing */
	s->g = g;
	s->interval = cfgbuf.c.interval_ns ? cfgbuf.c.interval_ns : 100000000ull;
	s->min_change = cfgbuf.c.min_change_ns ? cfgbuf.c.min_change_ns : SEC;
	if (s->threaded) {
		/* Wait for the thread's first tick (it holds the lock while
		 * it ticks), so that what follows is deterministic. */
		struct vsched_kvm_gov_stats st = { .size = sizeof(st) };

		do {
			assert(vsched_kvm_gov_read_stats(g, &st) == 0);
			if (!st.samples)
				sched_yield();
		} while (!st.samples);
	}
	read_check(s);
}

static void tick(struct slot *s, struct input *in)
{
	unsigned sel = take8(in);
	int rc;

	switch (sel % 12) {
	case 0: break;
	case 1: now += 1; break;
	case 2: now += cfgv.interval_ns ? cfgv.interval_ns - 1 : 100000000 - 1; break;
	case 3: now += cfgv.interval_ns ? cfgv.interval_ns : 100000000; break;
	case 4: now -= SEC; break;
	case 5: now += (uint64_t)take16(in) << (sel >> 4); break;
	case 6: now = UINT64_MAX - take8(in); break;
	default: now += 2 * SEC; break;
	}
	K.call_preads = K.call_sets = K.call_sets_ok = 0;
	struct vsched_kvm_gov_stats b0 = { .size = sizeof(b0) }, b1 = { .size = sizeof(b1) };
	if (s->g && !s->threaded)
		assert(vsched_kvm_gov_read_stats(s->g, &b0) == 0);
	rc = vsched_kvm_gov_tick(s->g, now);
	if (trace)
		fprintf(stderr, "tick slot %u now %llu: %d (preads %u, sets %u)\n",
			(unsigned)(s - slots), (unsigned long long)now, rc,
			K.call_preads, K.call_sets);
	if (!s->g || s->threaded) {
		assert(rc == VSCHED_EINVAL);
		assert(K.call_preads == 0 && K.call_sets == 0);
		return;
	}
	RC_OK(rc, -EBADMSG);
	assert(rc <= VSCHED_KVM_GOV_CHANGED);
	if (rc == VSCHED_KVM_GOV_IDLE)
		assert(K.call_preads == 0 && K.call_sets == 0);
	else
		s->samples++;
	if (rc == VSCHED_KVM_GOV_SAMPLED)
		assert(K.call_sets == 0);
	if (rc == VSCHED_KVM_GOV_CHANGED)
		assert(K.call_sets == 1 && K.call_sets_ok == 1);
	assert(K.call_sets <= 1);
	/* The interval: due unless it has not passed since the last
	 * sample, restarted by a step back below it. */
	if (s->sampled_once && now < s->last_tick)
		s->last_tick = now;
	bool due = !s->sampled_once || now - s->last_tick >= s->interval;
	if (trace && due != (rc != VSCHED_KVM_GOV_IDLE))
		fprintf(stderr, "tick: model says %s (last %llu, interval %llu)\n",
			due ? "due" : "idle", (unsigned long long)s->last_tick,
			(unsigned long long)s->interval);
	assert(due == (rc != VSCHED_KVM_GOV_IDLE));
	if (due) {
		s->sampled_once = true;
		s->last_tick = now;
	}
	/* The rate bound, on a decision. */
	assert(vsched_kvm_gov_read_stats(s->g, &b1) == 0);
	assert(b1.decisions - b0.decisions <= 1);
	/* A change is counted in cap_changes: a tick that also failed to
	 * read a vCPU returns that error, not CHANGED. */
	bool changed = b1.cap_changes != b0.cap_changes;
	assert(b1.cap_changes - b0.cap_changes <= 1);
	assert(rc != VSCHED_KVM_GOV_CHANGED || changed);
	if (b1.decisions != b0.decisions) {
		if (s->changed_once && now < s->last_change)
			s->last_change = now;
		bool held = s->changed_once && now - s->last_change < s->min_change;
		if (changed)
			assert(!held);
		if (b1.held_rate != b0.held_rate)
			assert(held && !changed);
	} else {
		assert(!changed);
	}
	if (changed) {
		s->changed_once = true;
		s->last_change = now;
	}
	read_check(s);
}

static void set_cap(struct slot *s, struct input *in)
{
	unsigned sel = take8(in);
	uint64_t v;
	int rc;

	switch (sel % 8) {
	case 0: v = 0; break;
	case 1: v = UINT32_MAX; break;
	case 2: v = (uint64_t)UINT32_MAX + 1; break;
	case 3: v = UINT64_MAX; break;
	case 4: v = take16(in); break;
	case 5: v = take64(in); break;
	default: v = val(take8(in)); break;
	}
	K.override = true;
	K.call_sets = K.call_sets_ok = 0;
	rc = vsched_kvm_gov_set_cap(s->g, v, now);
	K.override = false;
	if (trace)
		fprintf(stderr, "set_cap slot %u %llu: %d\n", (unsigned)(s - slots),
			(unsigned long long)v, rc);
	if (!s->g) {
		assert(rc == VSCHED_EINVAL);
		return;
	}
	if (v > UINT32_MAX) {
		assert(rc == VSCHED_ERANGE && K.call_sets == 0);
	} else {
		RC_OK(rc, 0);
		assert(K.call_sets == 1);
		assert(rc == 0 ? s->cap == v : rc == K.set_rc);
		if (rc == 0) { /* the rate bound counts from an override too */
			s->changed_once = true;
			s->last_change = now;
		}
	}
	read_check(s);
}

static void read_stats(struct slot *s, struct input *in)
{
	struct {
		struct vsched_kvm_gov_stats st;
		uint8_t tail[16];
	} b;
	unsigned sel = take8(in) % 5;
	size_t sizes[5] = { sizeof(b.st), 0, sizeof(size_t), 40, sizeof(b) };
	int rc;

	memset(&b, 0xee, sizeof(b));
	b.st.size = sizes[sel];
	rc = vsched_kvm_gov_read_stats(s->g, sel == 1 && take8(in) & 1 ? NULL : &b.st);
	if (!s->g || sel == 1) {
		assert(rc == VSCHED_EINVAL);
		return;
	}
	assert(rc == 0);
	assert(b.st.size == (sizes[sel] < sizeof(b.st) ? sizes[sel] : sizeof(b.st)));
	if (sel == 4)
		for (unsigned i = 0; i < sizeof(b.tail); i++)
			assert(b.tail[i] == 0);
	if (sel == 0 || sel == 4) {
		b.st.size = sizeof(b.st);
		check_stats(s, &b.st);
	}
}

static void write_stats(struct slot *s, struct input *in)
{
	unsigned fmt = take8(in) % 4;
	int rc = vsched_kvm_gov_stats_write(s->g, fmt == 3 ? NULL : devnull,
					    fmt == 3 ? VSCHED_STATS_TEXT : fmt);

	if (!s->g || fmt > 1)
		assert(rc == VSCHED_EINVAL);
	else
		RC_OK(rc, -EIO);
}

/* Parameters of the next create. */
static void configure(struct input *in)
{
	unsigned sel = take8(in);
	uint64_t v = val(take8(in));

	switch (sel % 21) {
	case 0: cfgv.interval_ns = v; break;
	case 1: cfgv.min_change_ns = v; break;
	case 2: cfgv.hysteresis_pct = (unsigned)(v > 0xffffffff ? UINT32_MAX : v); break;
	case 3: cfgv.hysteresis_pct = take8(in) % 103; break;
	case 4: { /* 4096 at most (kvmgov.h); above: refused at create */
		unsigned k = take8(in) % 8, b = k ? take8(in) : 0;
		cfgv.samples_per_tick = k == 0 ? 4096 : k == 1 ? 4097 + b * 16
				      : k == 2 ? UINT32_MAX - b : b;
		break;
	}
	case 5: cfgv.force_sums = !cfgv.force_sums; break;
	case 6: cfgv.thread = !cfgv.thread; break;
	case 7: own = !own; break;
	case 8: cfg_size_mode = take8(in) % 4; break;
	case 9: poll_size_mode = take8(in) % 4; break;
	case 10:
		use_poll = true;
		vsched_poll_defaults(take8(in) % 6, v, &pollbuf.p);
		break;
	case 11: use_poll = false; break;
	case 12: pollbuf.p.max_ns = v; break;
	case 13: pollbuf.p.grow = take8(in); pollbuf.p.shrink = take8(in); break;
	case 14: pollbuf.p.grow_start_ns = v; break;
	case 15: pollbuf.p.wake_cost_ns = v; break;
	case 16: pollbuf.p.latency_weight = take8(in); break;
	case 17: pollbuf.p.decay_shift = take8(in) % 70; break;
	case 18: pollbuf.p.sleep_cpu_ns = v; break;
	case 19: pollbuf.p.policy = take8(in) % 6; break;
	default: pollbuf.p.cpu_budget_pct = take16(in); break;
	}
}

static void fake_kvm(struct input *in)
{
	unsigned sel = take8(in), a = take8(in), b = take8(in);

	switch (sel % 6) {
	case 0: /* 0: no capability; 1, 2, 7: yes; else an error */
		K.check_rc = a % 8 == 0 ? 0 : a % 8 < 3 ? (int)(a % 8) : a % 8 == 7 ? 7 : errnos[a % 8];
		break;
	case 1:
		K.stats_rc = a % 2 ? errnos[a / 2 % 8] : 0;
		K.stats_after = b;
		break;
	case 2:
		K.set_rc = a % 2 ? errnos[a / 2 % 8] : 0;
		K.set_after = b;
		break;
	default:
		K.pread_kind = a % 5 == 4 ? 0 : a % 5;
		K.pread_rc = errnos[a / 5 % 8];
		K.pread_after = b;
		K.pread_times = take8(in);
		K.cut = 1 + take8(in) % 16;
		break;
	}
}

static void contents(unsigned op, struct input *in)
{
	struct content *c = &cont[take8(in) % NC];

	switch (op) {
	case 0:
		synth(c, in);
		break;
	case 1: { /* raw bytes */
		size_t len = take16(in) % (MAXC + 1);

		if (len > in->n - in->i)
			len = in->n - in->i;
		memcpy(c->b, in->d + in->i, len);
		in->i += len;
		c->len = len;
		break;
	}
	case 2: { /* patch */
		size_t off = take16(in) % MAXC, len = take8(in) % 32;

		for (size_t i = 0; i < len && off + i < MAXC; i++)
			c->b[off + i] = (uint8_t)take8(in);
		if (off + len > c->len)
			c->len = off + len > MAXC ? MAXC : off + len;
		break;
	}
	case 3: /* truncate or grow */
		c->len = take16(in) % (MAXC + 1);
		break;
	case 4: { /* one value: add, or set (backwards too) */
		unsigned f = take8(in), idx = take8(in), how = take8(in);
		uint64_t v = how & 1 ? take64(in) : val(take8(in));
		size_t at;

		if (!locate(c, names[f % S_NNAMES], idx, &at))
			break;
		if (how & 2) {
			memcpy(c->b + at, &v, 8);
		} else {
			uint64_t x;

			memcpy(&x, c->b + at, 8);
			x += v;
			memcpy(c->b + at, &x, 8);
		}
		break;
	}
	case 5: { /* halts that KVM polled to their end */
		uint64_t poll = val(take8(in)), n = val(take8(in));

		add(c, "halt_attempted_poll", 0, n);
		add(c, "halt_successful_poll", 0, n);
		add(c, "halt_poll_success_ns", 0, poll * n);
		add(c, "halt_poll_success_hist", bucket(poll), n);
		if (take8(in) & 1)
			add(c, "halt_poll_invalid", 0, n / 2);
		break;
	}
	default: { /* halts that polled in vain (or not), then slept */
		uint64_t poll = val(take8(in)), wait = val(take8(in));
		uint64_t n = val(take8(in));

		if (poll) {
			add(c, "halt_attempted_poll", 0, n);
			add(c, "halt_poll_fail_ns", 0, poll * n);
			add(c, "halt_poll_fail_hist", bucket(poll), n);
		}
		add(c, "halt_wakeup", 0, n);
		add(c, "halt_wait_ns", 0, wait * n);
		add(c, "halt_wait_hist", bucket(wait), n);
		break;
	}
	}
}

static void reset(void)
{
	for (unsigned i = 0; i < NC; i++)
		cont[i].len = 0;
	memset(&K, 0, sizeof(K));
	K.check_rc = 1;
	memset(fakes, 0, nfakes * sizeof(fakes[0]));
	nfakes = 0;
	memset(reals, 0, sizeof(reals));
	memset(slots, 0, sizeof(slots));
	memset(&cfgv, 0, sizeof(cfgv));
	cfgv.size = sizeof(cfgv);
	memset(&pollbuf, 0, sizeof(pollbuf));
	vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, 200000, &pollbuf.p);
	cfg_size_mode = poll_size_mode = 0;
	use_poll = own = used_own = false;
	now = 1000;
}

static void write_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("FUZZ_KVMGOV_SEEDS");

	(void)argc, (void)argv;
	trace = getenv("FUZZ_KVMGOV_TRACE") != NULL;
	/* The VMM's own stats fds are duplicated, one per vCPU (up to
	 * MAXV): fd numbers stay below NREAL, where the checks track them,
	 * and a duplicate past it is the governor's EMFILE path, whatever
	 * the environment's limit. */
	struct rlimit rl;
	assert(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_cur > NREAL) {
		rl.rlim_cur = NREAL;
		assert(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	}
	if (seeds) {
		write_seeds(seeds);
		exit(0);
	}
	for (unsigned i = 0; i < NC; i++) {
		struct stat st;

		base_fd[i] = memfd_create("fuzz-kvm-stats", MFD_CLOEXEC);
		assert(base_fd[i] >= 0 && base_fd[i] < NREAL - 1);
		assert(fstat(base_fd[i], &st) == 0);
		base_ino[i] = st.st_ino;
	}
	devnull = fopen("/dev/null", "w");
	assert(devnull);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size, 0 };
	unsigned ops = 0;

	reset();
	while (in.i < in.n && ops++ < 256) {
		unsigned op = take8(&in);
		struct slot *s = &slots[op >> 7];

		switch (op % 16) {
		case 0: case 1: case 2: case 3: case 4: case 5: case 6:
			contents(op % 16, &in);
			break;
		case 7: configure(&in); break;
		case 8: fake_kvm(&in); break;
		case 9: create(s, &in); break;
		case 10: destroy(s); break;
		case 11: case 12: tick(s, &in); break;
		case 13: set_cap(s, &in); break;
		case 14: read_stats(s, &in); break;
		default: write_stats(s, &in); break;
		}
	}
	for (unsigned i = 0; i < NSLOT; i++)
		if (slots[i].g)
			destroy(&slots[i]);
	for (unsigned i = 0; i < nfakes; i++)
		assert(fakes[i].state == 2);
	for (unsigned i = 0; i < NREAL; i++)
		assert(reals[i].state != 1);
	if (used_own)
		assert(count_fds() == fds_before);
	return 0;
}

/* ---- the seeds ---- */

struct out {
	uint8_t b[4096];
	size_t n;
};

static void emit_bytes(struct out *o, const uint8_t *b, size_t n)
{
	assert(o->n + n <= sizeof(o->b));
	memcpy(o->b + o->n, b, n);
	o->n += n;
}

#define EMIT(o, ...)                                                           \
	emit_bytes(o, (const uint8_t[]){ __VA_ARGS__ },                        \
		   sizeof((const uint8_t[]){ __VA_ARGS__ }))

static void save(const char *dir, const char *name, const struct out *o)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	assert(f && fwrite(o->b, 1, o->n, f) == o->n && fclose(f) == 0);
}

/* A full 6.x layout (every field, 32 buckets, 48-byte names) in content c. */
static void seed_full(struct out *o, unsigned c, unsigned mask_lo, unsigned mask_hi)
{
	EMIT(o, 0, c, mask_lo, mask_hi, 0, 0, 0, 0);
}

static void write_seeds(const char *dir)
{
	struct out o;

	/* 1: one vCPU, short polled halts then long sleeps: the cap opens,
	 * then closes; an override; stats read and written. */
	memset(&o, 0, sizeof(o));
	seed_full(&o, 0, 0xff, 0x0f);
	EMIT(&o, 9, 1, 0);			/* create 1 vCPU */
	for (unsigned t = 0; t < 4; t++) {
		EMIT(&o, 5, 0, 0x62, 0x5a, 0); /* polled: 8 us x 4096 */
		EMIT(&o, 11, 7);		/* tick +2 s */
	}
	for (unsigned t = 0; t < 4; t++) {
		EMIT(&o, 6, 0, 0x8a, 0xaa, 0x42); /* slept */
		EMIT(&o, 11, 7);
	}
	EMIT(&o, 13, 4, 0x10, 0);		/* set_cap 16 ns */
	EMIT(&o, 14, 0, 15, 1);		/* read, write JSON */
	EMIT(&o, 10);			/* destroy */
	save(dir, "hist_one_vcpu", &o);

	/* 2: two vCPUs of a kernel without histograms (the sums model),
	 * and one with them, in two governors. */
	memset(&o, 0, sizeof(o));
	seed_full(&o, 0, 0xf8, 0x0b);		/* no histograms */
	seed_full(&o, 1, 0xff, 0x0f);
	EMIT(&o, 9, 2, 0);			/* slot 0: 2 vCPUs */
	EMIT(&o, 9 | 128, 1, 0);		/* slot 1: 1 vCPU */
	for (unsigned t = 0; t < 3; t++) {
		EMIT(&o, 5, 0, 0x62, 0x5a, 1);
		EMIT(&o, 6, 1, 0x8a, 0xaa, 0x42);
		EMIT(&o, 11, 7);
		EMIT(&o, 11 | 128, 7);
	}
	EMIT(&o, 14 | 128, 4);
	save(dir, "sums_and_hist", &o);

	/* 3: the ops fail: stats fd refused, then a short read at tick,
	 * KVM_ENABLE_CAP failing. */
	memset(&o, 0, sizeof(o));
	seed_full(&o, 0, 0xff, 0x0f);
	EMIT(&o, 8, 1, 1, 0);		/* KVM_GET_STATS_FD: -EIO */
	EMIT(&o, 9, 1, 0);
	EMIT(&o, 8, 1, 0, 0);
	EMIT(&o, 9, 1, 0);
	EMIT(&o, 8, 2, 3, 0);		/* ENABLE_CAP: -EAGAIN */
	EMIT(&o, 8, 3, 2, 1, 1, 3);		/* one short read */
	EMIT(&o, 5, 0, 0x62, 0x5a, 0);
	EMIT(&o, 11, 7);
	EMIT(&o, 11, 7);
	EMIT(&o, 13, 1);			/* set_cap UINT32_MAX */
	save(dir, "ops_fail", &o);

	/* 4: the VMM's own stats fds, forced sums, the thread, then a
	 * content that changes layout and goes backwards. */
	memset(&o, 0, sizeof(o));
	seed_full(&o, 0, 0xff, 0x0f);
	seed_full(&o, 1, 0xff, 0x0f);
	EMIT(&o, 7, 7, 0);			/* own stats fds */
	EMIT(&o, 7, 5, 0);			/* force_sums */
	EMIT(&o, 9, 2, 0);
	EMIT(&o, 5, 1, 0x62, 0x5a, 0);
	EMIT(&o, 11, 7);
	EMIT(&o, 4, 1, 6, 0, 2, 255);	/* a counter set to 2^64-1 */
	EMIT(&o, 11, 7);
	EMIT(&o, 4, 1, 6, 0, 2, 0);		/* ... and back to 0 */
	EMIT(&o, 11, 7);
	EMIT(&o, 7, 6, 0);			/* thread */
	EMIT(&o, 9 | 128, 1, 0);
	EMIT(&o, 11 | 128, 7);		/* refused: EINVAL */
	EMIT(&o, 13 | 128, 4, 0x20, 0);
	EMIT(&o, 10 | 128);
	EMIT(&o, 0, 0, 0xff, 0x0f, 0, 5, 0, 0);	/* new layout, 5 buckets */
	EMIT(&o, 11, 7);
	save(dir, "own_fds_thread", &o);

	/* 5: a raw stats blob: the well-formed layout of seed 1, copied byte
	 * for byte, then a polled tick (byte-level mutation material). */
	memset(&o, 0, sizeof(o));
	{
		struct input in = { (const uint8_t[]){ 0xff, 0x0f, 0, 0, 0, 0 }, 6, 0 };
		struct content c;
		uint16_t len;

		synth(&c, &in);
		len = (uint16_t)c.len;
		EMIT(&o, 1, 0, (uint8_t)(len & 0xff), (uint8_t)(len >> 8));
		memcpy(o.b + o.n, c.b, c.len);
		o.n += c.len;
	}
	EMIT(&o, 9, 1, 0);
	EMIT(&o, 5, 0, 0x62, 0x5a, 0);
	EMIT(&o, 11, 7);
	EMIT(&o, 6, 0, 0x8a, 0xaa, 0x42);
	EMIT(&o, 11, 7);
	save(dir, "raw_layout", &o);

	/* 6: samples_per_tick above VSCHED_KVM_GOV_MAX_SAMPLES (4097,
	 * UINT32_MAX - 5) refused at create; 4096 accepted and ticked. */
	memset(&o, 0, sizeof(o));
	seed_full(&o, 0, 0xff, 0x0f);
	EMIT(&o, 7, 4, 0, 1, 0);		/* samples_per_tick 4097 */
	EMIT(&o, 9, 1, 0);			/* refused */
	EMIT(&o, 7, 4, 0, 2, 5);		/* UINT32_MAX - 5 */
	EMIT(&o, 9, 1, 0);			/* refused */
	EMIT(&o, 7, 4, 0, 0);		/* 4096 */
	EMIT(&o, 9, 1, 0);
	EMIT(&o, 5, 0, 0x62, 0x5a, 0);
	EMIT(&o, 11, 7);
	EMIT(&o, 14, 0);
	save(dir, "samples_bound", &o);

	/* 7: the caller's clock steps back: a tick below the last is IDLE
	 * (the interval restarts there), and a decision below the last
	 * change is held by the rate bound (it restarts there too), not
	 * let through by an unsigned difference that wrapped. */
	memset(&o, 0, sizeof(o));
	seed_full(&o, 0, 0xff, 0x0f);
	EMIT(&o, 9, 1, 0);			/* create 1 vCPU */
	for (unsigned t = 0; t < 3; t++) {
		EMIT(&o, 5, 0, 0x62, 0x5a, 0); /* polled: the cap opens */
		EMIT(&o, 11, 7);		/* tick +2 s */
	}
	EMIT(&o, 13, 4, 0x10, 0);		/* set_cap 16 ns: the last change */
	for (unsigned t = 0; t < 3; t++) {
		EMIT(&o, 5, 0, 0x62, 0x5a, 0); /* polled */
		EMIT(&o, 11, 4);		/* tick -1 s: IDLE */
	}
	EMIT(&o, 11, 7);			/* +2 s: 1 s below the change: held */
	EMIT(&o, 11, 3);			/* + interval: held */
	EMIT(&o, 5, 0, 0x62, 0x5a, 0);
	EMIT(&o, 11, 7);			/* 1.1 s after it: changes */
	EMIT(&o, 11, 6, 3);			/* near 2^64 */
	EMIT(&o, 11, 1);			/* +1: wraps to 2 */
	EMIT(&o, 11, 7);
	EMIT(&o, 13, 4, 0x10, 0);		/* set_cap 16 ns */
	EMIT(&o, 4, 0, 6, 0, 2, 0);		/* a counter set back */
	EMIT(&o, 11, 4);
	EMIT(&o, 11, 7);
	EMIT(&o, 14, 0);
	save(dir, "clock_back", &o);
}
