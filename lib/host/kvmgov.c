/* SPDX-License-Identifier: MIT */
/*
 * libvsched-kvm's halt-polling governor: KVM's binary stats in, vsched's
 * poll policy on the halts they describe, KVM_CAP_HALT_POLL out. Public
 * API of libvsched only; <vsched/kvmgov.h> documents the model.
 *
 * The stats fd's layout (Documentation/virt/kvm/api.rst, KVM_GET_STATS_FD):
 * a header (flags, name_size, num_desc, id_offset, desc_offset,
 * data_offset: six u32), an id string of name_size bytes, num_desc
 * descriptors of 16 + name_size bytes each (flags, s16 exponent, u16 size
 * in u64 values, u32 offset into the data block, u32 bucket_size, then the
 * NUL-terminated name), and the data block of u64 values. Every offset and
 * size read from it is checked before use; anything that does not fit is
 * -EBADMSG.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <vsched/error.h>
#include <vsched/kvmgov.h>
#include <vsched/profile.h>
#include <vsched/stats.h>

#include "../abi.h"
#include "../trace.h"

/* The stats ABI (linux/kvm.h of 5.14+), for headers older than that. */
#ifndef KVM_STATS_TYPE_MASK
#define KVM_STATS_TYPE_MASK 0xF
#define KVM_STATS_TYPE_CUMULATIVE 0x0
#define KVM_STATS_TYPE_LOG_HIST 0x4
#define KVM_STATS_UNIT_MASK 0xF0
#define KVM_STATS_UNIT_NONE 0x00
#define KVM_STATS_UNIT_SECONDS 0x20
#define KVM_STATS_BASE_MASK 0xF00
#define KVM_STATS_BASE_POW10 0x000
#endif
#ifndef KVM_CAP_HALT_POLL
#define KVM_CAP_HALT_POLL 182
#endif

#define HDR_SIZE 24u	     /* struct kvm_stats_header */
#define DESC_SIZE 16u	     /* struct kvm_stats_desc without its name */
#define MAX_NAME 1024u	     /* name_size accepted (the kernel's: 48) */
#define MAX_DESC 4096u	     /* descriptors accepted */
#define MAX_DATA (1u << 20)  /* bytes of the data block we will read */
#define MAX_HIST 64u	     /* buckets of a log2 histogram */
#define MAX_CLASSES (2 * MAX_HIST)

/* The statistics the governor reads, by descriptor name. */
enum field {
	F_SUCC_HIST,
	F_FAIL_HIST,
	F_WAIT_HIST,
	F_SUCC_NS,
	F_FAIL_NS,
	F_WAIT_NS,
	F_SUCC_N,
	F_ATT_N,
	F_INV_N,
	F_WAKEUP_N,
	NFIELDS
};

enum shape { HIST_NS, SUM_NS, COUNT };

static const struct {
	const char *name;
	enum shape shape;
} fields[NFIELDS] = {
	[F_SUCC_HIST] = { "halt_poll_success_hist", HIST_NS },
	[F_FAIL_HIST] = { "halt_poll_fail_hist", HIST_NS },
	[F_WAIT_HIST] = { "halt_wait_hist", HIST_NS },
	[F_SUCC_NS] = { "halt_poll_success_ns", SUM_NS },
	[F_FAIL_NS] = { "halt_poll_fail_ns", SUM_NS },
	[F_WAIT_NS] = { "halt_wait_ns", SUM_NS },
	[F_SUCC_N] = { "halt_successful_poll", COUNT },
	[F_ATT_N] = { "halt_attempted_poll", COUNT },
	[F_INV_N] = { "halt_poll_invalid", COUNT },
	[F_WAKEUP_N] = { "halt_wakeup", COUNT },
};

struct gvcpu {
	int fd;
	uint32_t data_offset;
	uint32_t nvals; /* u64 values read from the data block */
	struct {
		bool have;
		uint32_t idx; /* first value's index in the data block */
		uint32_t n;   /* values */
	} f[NFIELDS];
	bool hist; /* the histogram model; else the sums */
	uint64_t *cur, *prev;
	struct vsched_poll_state st;
};

struct vsched_kvm_gov {
	int vm_fd;
	unsigned n;
	struct gvcpu *v;
	struct vsched_kvm_gov_ops ops;
	struct vsched_poll_params poll;
	uint64_t interval_ns, min_change_ns;
	unsigned pct, spt;
	bool sampled_once; /* last_tick is set */
	uint64_t last_tick;
	bool changed_once; /* last_change is set */
	uint64_t last_change;
	pthread_mutex_t lock; /* the stats against the thread's ticks */
	struct vsched_kvm_gov_stats st;
	/* The ticking thread, with `thread`. */
	bool threaded;
	pthread_t thread;
	pthread_cond_t cond;
	bool stop;
	/* Callers waiting for the lock: the thread gives it up to them
	 * before its next tick (a tick longer than interval_ns never waits,
	 * and the lock is released only in the thread's wait). */
	atomic_uint pending;
	/* A destroy() is under way: a second one is refused. `holder` cannot
	 * tell it: a close op may destroy another governor, whose close ops
	 * then hold that one (helper-89: A's close destroyed B, B's close
	 * destroyed A, freed twice). */
	atomic_bool dying;
};

/* The governor whose lock this thread holds, if any: the ops run under
 * it, and a call of theirs on the same governor would wait for ever for
 * the lock (session 25's misuse hunt: read_stats() from set_cap). Such a
 * call is refused with VSCHED_ESTATE instead (held_here()). An op may
 * call another governor: each lock saves the holder it replaces and each
 * unlock puts it back (a review found one unlock's NULL reopening the
 * hang). */
static _Thread_local const struct vsched_kvm_gov *holder;

static bool held_here(const struct vsched_kvm_gov *g)
{
	return holder == g;
}

/* Take the lock in a caller's thread: announced, so that the ticking
 * thread, which may tick back to back, lets the caller in. */
static const struct vsched_kvm_gov *gov_lock(const struct vsched_kvm_gov *cg)
{
	struct vsched_kvm_gov *g = (struct vsched_kvm_gov *)cg;
	const struct vsched_kvm_gov *prev = holder;

	atomic_fetch_add(&g->pending, 1);
	pthread_mutex_lock(&g->lock);
	atomic_fetch_sub(&g->pending, 1);
	holder = g;
	return prev;
}

/* prev: what gov_lock() returned. */
static void gov_unlock(const struct vsched_kvm_gov *cg, const struct vsched_kvm_gov *prev)
{
	struct vsched_kvm_gov *g = (struct vsched_kvm_gov *)cg;

	holder = prev;
	if (g->threaded)
		pthread_cond_broadcast(&g->cond); /* the thread may wait for us */
	pthread_mutex_unlock(&g->lock);
}

/* ---- the kernel's ops ---- */

static int k_check_cap(void *ctx, int vm_fd)
{
	int rc = ioctl(vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_HALT_POLL);

	(void)ctx;
	return rc < 0 ? -errno : rc;
}

static int k_set_cap(void *ctx, int vm_fd, uint64_t max_ns)
{
	struct kvm_enable_cap cap = { .cap = KVM_CAP_HALT_POLL };

	(void)ctx;
	cap.args[0] = max_ns;
	return ioctl(vm_fd, KVM_ENABLE_CAP, &cap) < 0 ? -errno : 0;
}

static int k_stats_fd(void *ctx, int vcpu_fd)
{
	(void)ctx;
#ifdef KVM_GET_STATS_FD
	int fd = ioctl(vcpu_fd, KVM_GET_STATS_FD, 0);

	return fd < 0 ? -errno : fd;
#else
	(void)vcpu_fd;
	return -ENOTTY;
#endif
}

static ssize_t k_pread(void *ctx, int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t r;

	(void)ctx;
	do
		r = pread(fd, buf, len, (off_t)off);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : r;
}

static void k_close(void *ctx, int fd)
{
	(void)ctx;
	close(fd);
}

static const struct vsched_kvm_gov_ops kernel_ops = {
	k_check_cap, k_set_cap, k_stats_fd, k_pread, k_close, NULL,
};

/* ---- parsing ---- */

/* Read exactly `len` bytes at `off`: 0, -EBADMSG when fewer exist, or the
 * read's negative errno. */
static int read_exact(const struct vsched_kvm_gov *g, int fd, void *buf,
		      size_t len, uint64_t off)
{
	ssize_t r = g->ops.pread(g->ops.ctx, fd, buf, len, off);

	if (r < 0)
		return (int)r;
	return (size_t)r == len ? 0 : -EBADMSG;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* Does descriptor (flags, exponent, size) have the shape we read? A
 * statistic of another shape (a kernel that changed it) counts as absent. */
static bool shape_ok(enum shape s, uint32_t flags, int16_t exponent,
		     uint16_t size)
{
	uint32_t type = flags & KVM_STATS_TYPE_MASK;
	uint32_t unit = flags & KVM_STATS_UNIT_MASK;
	uint32_t base = flags & KVM_STATS_BASE_MASK;

	switch (s) {
	case HIST_NS:
		return type == KVM_STATS_TYPE_LOG_HIST &&
		       unit == KVM_STATS_UNIT_SECONDS &&
		       base == KVM_STATS_BASE_POW10 && exponent == -9 &&
		       size >= 2 && size <= MAX_HIST;
	case SUM_NS:
		return type == KVM_STATS_TYPE_CUMULATIVE &&
		       unit == KVM_STATS_UNIT_SECONDS &&
		       base == KVM_STATS_BASE_POW10 && exponent == -9 &&
		       size == 1;
	default:
		return type == KVM_STATS_TYPE_CUMULATIVE &&
		       unit == KVM_STATS_UNIT_NONE && size == 1;
	}
}

/* Parse the descriptors of one stats fd into `v`: which fields it has and
 * where. 0, -EBADMSG, -ENODATA, -ENOMEM or a read's errno. */
static int parse(const struct vsched_kvm_gov *g, struct gvcpu *v,
		 bool force_sums)
{
	uint8_t hdr[HDR_SIZE], *buf;
	uint32_t name_size, num_desc, id_offset, desc_offset, end = 0;
	size_t dsz, blk;
	int rc;

	rc = read_exact(g, v->fd, hdr, sizeof(hdr), 0);
	if (rc)
		return rc;
	name_size = get32(hdr + 4);
	num_desc = get32(hdr + 8);
	id_offset = get32(hdr + 12);
	desc_offset = get32(hdr + 16);
	v->data_offset = get32(hdr + 20);
	if (name_size < 1 || name_size > MAX_NAME || num_desc < 1 ||
	    num_desc > MAX_DESC || id_offset < HDR_SIZE ||
	    desc_offset < HDR_SIZE || v->data_offset < HDR_SIZE)
		return -EBADMSG;
	dsz = DESC_SIZE + name_size;
	blk = dsz * num_desc; /* at most 4096 x 1040: no overflow */
	if (blk < name_size)
		blk = name_size; /* the buffer also holds the id string */
	buf = malloc(blk);
	if (!buf)
		return VSCHED_ENOMEM;
	/* The id string: NUL-terminated inside its name_size bytes. */
	rc = read_exact(g, v->fd, buf, name_size, id_offset);
	if (!rc && !memchr(buf, 0, name_size))
		rc = -EBADMSG;
	if (!rc)
		rc = read_exact(g, v->fd, buf, dsz * num_desc, desc_offset);
	for (uint32_t i = 0; !rc && i < num_desc; i++) {
		const uint8_t *d = buf + (size_t)i * dsz;
		const char *name = (const char *)d + DESC_SIZE;
		uint32_t flags = get32(d), off = get32(d + 8);
		int16_t exponent;
		uint16_t size;

		memcpy(&exponent, d + 4, 2);
		memcpy(&size, d + 6, 2);
		if (!memchr(name, 0, name_size)) {
			rc = -EBADMSG; /* a name that overflows its field */
			break;
		}
		for (unsigned k = 0; k < NFIELDS; k++) {
			if (strcmp(name, fields[k].name) || v->f[k].have)
				continue;
			if (!shape_ok(fields[k].shape, flags, exponent, size))
				break;
			/* Inside the block we will read, and aligned. */
			if (off % 8 || (uint64_t)off + size * 8ull > MAX_DATA) {
				rc = -EBADMSG;
				break;
			}
			v->f[k].have = true;
			v->f[k].idx = off / 8;
			v->f[k].n = size;
			if (off + size * 8u > end)
				end = off + size * 8u;
		}
	}
	free(buf);
	if (rc)
		return rc;
	if ((uint64_t)v->data_offset + end > UINT32_MAX)
		return -EBADMSG;
	v->hist = !force_sums && v->f[F_SUCC_HIST].have &&
		  v->f[F_FAIL_HIST].have && v->f[F_WAIT_HIST].have;
	if (!v->hist && !(v->f[F_SUCC_NS].have && v->f[F_FAIL_NS].have &&
			  v->f[F_WAIT_NS].have && v->f[F_SUCC_N].have &&
			  v->f[F_ATT_N].have))
		return -ENODATA;
	v->nvals = end / 8;
	v->cur = calloc(v->nvals, sizeof(uint64_t));
	v->prev = calloc(v->nvals, sizeof(uint64_t));
	return v->cur && v->prev ? 0 : VSCHED_ENOMEM;
}

/* Read vCPU `v`'s values into v->cur: 0, -EBADMSG (truncated) or errno. */
static int read_values(const struct vsched_kvm_gov *g, struct gvcpu *v)
{
	return read_exact(g, v->fd, v->cur, v->nvals * sizeof(uint64_t),
			  v->data_offset);
}

/* ---- the model ---- */

/* A class of halts the tick saw on one vCPU: `count` halts of `len` ns
 * each, `window` ns of which were polling (len <= window: polled). */
struct hclass {
	uint64_t len, window, count;
};

/* The midpoint of log2 bucket i ([2^(i-1), 2^i); 0 holds 0). The last
 * bucket is open; its lower edge x 1.5 stands for it too. */
static uint64_t bucket_mid(unsigned i)
{
	if (i == 0)
		return 0;
	if (i == 1)
		return 1;
	return 3ull << (i - 2);
}

static uint64_t delta(const struct gvcpu *v, enum field k, unsigned j)
{
	uint32_t x = v->f[k].idx + j;

	return v->cur[x] - v->prev[x];
}

static uint64_t field_delta(const struct gvcpu *v, enum field k)
{
	return v->f[k].have ? delta(v, k, 0) : 0;
}

/* *a += b; false when the sum does not fit in 64 bits. */
static bool add_ok(uint64_t *a, uint64_t b)
{
	return !__builtin_add_overflow(*a, b, a);
}

/* The halts of one tick as classes (histogram model); returns how many
 * classes, or -1 when the tick's halts, or their ns, add up past 2^64
 * (garbage, not halts: feed() needs their sum). Adds the inputs to `st`. */
static int classes_hist(const struct gvcpu *v, struct hclass *c,
			struct vsched_kvm_gov_stats *st)
{
	uint64_t ns = 0, nw = 0, nf = 0, inv, fail_ns = 0, part, all;
	bool ok = true;
	int n = 0;

	for (unsigned i = 0; i < v->f[F_SUCC_HIST].n; i++)
		ok &= add_ok(&ns, delta(v, F_SUCC_HIST, i));
	for (unsigned i = 0; i < v->f[F_FAIL_HIST].n; i++)
		ok &= add_ok(&nf, delta(v, F_FAIL_HIST, i));
	for (unsigned i = 0; i < v->f[F_WAIT_HIST].n; i++)
		ok &= add_ok(&nw, delta(v, F_WAIT_HIST, i));
	if (!ok || __builtin_add_overflow(ns, nw, &all))
		return -1;
	if (v->f[F_FAIL_NS].have) {
		fail_ns = delta(v, F_FAIL_NS, 0);
	} else {
		for (unsigned i = 0; i < v->f[F_FAIL_HIST].n; i++) {
			uint64_t x;

			if (__builtin_mul_overflow(delta(v, F_FAIL_HIST, i),
						   bucket_mid(i), &x) ||
			    !add_ok(&fail_ns, x))
				return -1; /* ns past 2^64: garbage too */
		}
	}
	inv = field_delta(v, F_INV_N);
	if (inv > ns)
		inv = ns;
	/* The failed polls' time, spread evenly over the sleeps. */
	part = nw ? fail_ns / nw : 0;
	for (unsigned i = 0; i < v->f[F_SUCC_HIST].n; i++) {
		uint64_t d = delta(v, F_SUCC_HIST, i);

		/* Invalid polls out, in proportion: at most d (near 2^64 the
		 * double rounds up to 2^64, which no uint64_t holds). */
		if (inv) {
			double x = (double)d * (double)(ns - inv) / (double)ns;

			d = x < (double)d ? (uint64_t)x : d;
		}
		if (d)
			c[n++] = (struct hclass){ bucket_mid(i), bucket_mid(i), d };
	}
	for (unsigned i = 0; i < v->f[F_WAIT_HIST].n; i++) {
		uint64_t d = delta(v, F_WAIT_HIST, i), len;

		if (!d)
			continue;
		if (__builtin_add_overflow(bucket_mid(i), part, &len))
			return -1; /* a halt past 2^64 ns */
		c[n++] = (struct hclass){ len, part, d };
	}
	st->halts += all;
	st->halts_polled += ns;
	st->halts_slept += nw;
	st->halts_invalid += inv;
	st->polls_failed += nf;
	return n;
}

/* The same from the sums alone: the mean polled and the mean slept halt
 * (-1 as above). */
static int classes_sums(const struct gvcpu *v, struct hclass *c,
			struct vsched_kvm_gov_stats *st)
{
	uint64_t ns = delta(v, F_SUCC_N, 0), na = delta(v, F_ATT_N, 0);
	uint64_t inv = field_delta(v, F_INV_N), wake = field_delta(v, F_WAKEUP_N);
	uint64_t fail_ns = delta(v, F_FAIL_NS, 0), wait_ns = delta(v, F_WAIT_NS, 0);
	uint64_t nsl = na > ns ? na - ns : 0, all, slept_ns;
	int n = 0;

	if (wake > nsl)
		nsl = wake; /* sleeps without a poll (window 0) */
	if (!nsl && wait_ns)
		nsl = 1;
	if (__builtin_add_overflow(ns, nsl, &all) ||
	    __builtin_add_overflow(fail_ns, wait_ns, &slept_ns))
		return -1;
	if (inv > ns)
		inv = ns;
	if (ns > inv) {
		uint64_t len = delta(v, F_SUCC_NS, 0) / ns;

		c[n++] = (struct hclass){ len, len, ns - inv };
	}
	if (nsl)
		c[n++] = (struct hclass){ slept_ns / nsl, fail_ns / nsl, nsl };
	st->halts += all;
	st->halts_polled += ns;
	st->halts_slept += nsl;
	st->halts_invalid += inv;
	st->polls_failed += na > ns ? na - ns : 0;
	return n;
}

/* Feed at most `spt` of the classes' halts to the policy, in proportion
 * (largest remainder) and interleaved (smooth weighted round robin), so
 * that the policy's decay favours no class (the classes' counts add up
 * within 64 bits: classes_hist(), classes_sums()). Returns the halts fed. */
static uint64_t feed(const struct vsched_kvm_gov *g, struct gvcpu *v,
		     const struct hclass *c, unsigned n)
{
	uint64_t total = 0, k, q[MAX_CLASSES], left;
	int64_t cw[MAX_CLASSES] = { 0 };
	double rem[MAX_CLASSES];

	for (unsigned i = 0; i < n; i++)
		total += c[i].count;
	if (!total)
		return 0;
	k = total < g->spt ? total : g->spt;
	left = k;
	for (unsigned i = 0; i < n; i++) {
		double exact = (double)c[i].count * (double)k / (double)total;

		q[i] = (uint64_t)exact;
		if (q[i] > left)
			q[i] = left; /* rounding: never more than k in all */
		rem[i] = exact - (double)q[i];
		left -= q[i];
	}
	while (left) { /* the largest remainders get the rest */
		unsigned best = 0;

		for (unsigned i = 1; i < n; i++)
			if (rem[i] > rem[best])
				best = i;
		q[best]++;
		rem[best] = -1.0;
		left--;
	}
	for (uint64_t s = 0; s < k; s++) {
		unsigned best = n;

		for (unsigned i = 0; i < n; i++) {
			if (!q[i])
				continue;
			cw[i] += (int64_t)q[i];
			if (best == n || cw[i] > cw[best])
				best = i;
		}
		cw[best] -= (int64_t)k;
		vsched_poll_update(&g->poll, &v->st, c[best].window, c[best].len,
				   true);
	}
	return k;
}

/* ---- decisions ---- */

/* Whether window `w` leaves cap `cap`'s band. */
static bool leaves_band(const struct vsched_kvm_gov *g, uint64_t w, uint64_t cap)
{
	uint64_t d = w > cap ? w - cap : cap - w, big = w > cap ? w : cap;

	if (cap == UINT64_MAX || (w == 0) != (cap == 0))
		return true;
	return d * 100 > (uint64_t)g->pct * big;
}

static int apply_cap(struct vsched_kvm_gov *g, uint64_t w, uint64_t now)
{
	int rc = g->ops.set_cap(g->ops.ctx, g->vm_fd, w);

	if (rc < 0) {
		g->st.set_errors++;
		return rc;
	}
	g->st.cap_ns = w;
	g->st.cap_changes++;
	g->changed_once = true;
	g->last_change = now;
	return 0;
}

/* One decision on window `w` from `halts` halts. */
static int decide(struct vsched_kvm_gov *g, uint64_t w, uint64_t halts,
		  uint64_t now)
{
	int rc = VSCHED_KVM_GOV_SAMPLED;

	/* A clock that stepped back takes the last change with it: the
	 * bound restarts from now (unsigned, now - last_change would wrap to
	 * about 2^64 and pass it). */
	if (g->changed_once && now < g->last_change)
		g->last_change = now;
	g->st.decisions++;
	g->st.window_ns = w;
	g->st.last_halts = halts;
	if (!leaves_band(g, w, g->st.cap_ns)) {
		g->st.held_hysteresis++;
	} else if (g->changed_once && now - g->last_change < g->min_change_ns) {
		g->st.held_rate++;
	} else {
		rc = apply_cap(g, w, now);
		if (rc == 0)
			rc = VSCHED_KVM_GOV_CHANGED;
	}
	VSCHED__TRACE3(kvm_gov_decision, w, g->st.cap_ns, halts);
	return rc;
}

/* A tick, under g->lock. */
static int tick_locked(struct vsched_kvm_gov *g, uint64_t now)
{
	struct hclass c[MAX_CLASSES];
	uint64_t w = 0, halts = 0;
	bool any = false;
	int err = 0;

	/* The same for the interval: a step back restarts it from now. */
	if (g->sampled_once && now < g->last_tick)
		g->last_tick = now;
	if (g->sampled_once && now - g->last_tick < g->interval_ns)
		return VSCHED_KVM_GOV_IDLE;
	g->sampled_once = true;
	g->last_tick = now;
	g->st.samples++;
	for (unsigned i = 0; i < g->n; i++) {
		struct gvcpu *v = &g->v[i];
		uint64_t before = g->st.halts, *t;
		int nc, rc = read_values(g, v);
		bool back = false;

		if (rc) {
			/* Its halts are unknown, not absent: its last window
			 * stays in the maximum, so that a decision on the
			 * others does not take its polling away. */
			uint64_t vw = vsched_poll_window(&g->poll, &v->st);

			if (vw > w)
				w = vw;
			g->st.read_errors++;
			err = rc;
			continue;
		}
		/* Only the statistics read: the block also holds others
		 * between them, which may be instant or peak values that go
		 * down by design (KVM's `blocking`). */
		for (unsigned k = 0; k < NFIELDS; k++)
			for (uint32_t j = 0; v->f[k].have && j < v->f[k].n; j++)
				back |= v->cur[v->f[k].idx + j] <
					v->prev[v->f[k].idx + j];
		nc = back ? -1 : v->hist ? classes_hist(v, c, &g->st) :
					   classes_sums(v, c, &g->st);
		if (nc < 0) {
			/* A counter went backwards, or the halts add up past
			 * 2^64: no deltas this time. */
			g->st.read_errors++;
		} else {
			g->st.poll_success_ns += field_delta(v, F_SUCC_NS);
			g->st.poll_fail_ns += field_delta(v, F_FAIL_NS);
			g->st.wait_ns += field_delta(v, F_WAIT_NS);
			if (feed(g, v, c, (unsigned)nc)) {
				uint64_t vw = vsched_poll_window(&g->poll, &v->st);

				any = true;
				if (vw > w)
					w = vw;
			}
			halts += g->st.halts - before;
		}
		t = v->prev;
		v->prev = v->cur;
		v->cur = t;
	}
	if (any) {
		int rc = decide(g, w, halts, now);

		if (rc < 0 || !err)
			return rc;
	}
	return err ? err : VSCHED_KVM_GOV_SAMPLED;
}

int vsched_kvm_gov_tick(struct vsched_kvm_gov *g, uint64_t now_ns)
{
	int rc;
	const struct vsched_kvm_gov *prev;

	if (!g || g->threaded)
		return VSCHED_EINVAL;
	if (held_here(g))
		return VSCHED_ESTATE;
	prev = holder;
	pthread_mutex_lock(&g->lock);
	holder = g;
	rc = tick_locked(g, now_ns);
	holder = prev;
	pthread_mutex_unlock(&g->lock);
	return rc;
}

int vsched_kvm_gov_set_cap(struct vsched_kvm_gov *g, uint64_t max_ns,
			   uint64_t now_ns)
{
	int rc;
	const struct vsched_kvm_gov *prev;

	if (!g)
		return VSCHED_EINVAL;
	if (max_ns > UINT32_MAX)
		return VSCHED_ERANGE;
	if (held_here(g))
		return VSCHED_ESTATE;
	prev = gov_lock(g);
	rc = apply_cap(g, max_ns, now_ns);
	gov_unlock(g, prev);
	return rc;
}

/* ---- the thread ---- */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *gov_thread(void *arg)
{
	struct vsched_kvm_gov *g = arg;

	pthread_mutex_lock(&g->lock);
	holder = g; /* this thread's, for good: it runs only ticks */
	while (!g->stop) {
		/* Saturated (an interval near 2^64 would wrap into the past:
		 * no wait, a spin that never releases the lock), at INT64_MAX
		 * ns, where the kernel's own timeouts end. */
		const uint64_t now = mono_ns(), top = INT64_MAX;
		uint64_t until = g->interval_ns < top - now ? now + g->interval_ns : top;
		struct timespec ts = { (time_t)(until / 1000000000ull),
				       (long)(until % 1000000000ull) };

		(void)tick_locked(g, mono_ns()); /* errors are counted */
		/* A caller waiting for the lock gets it first, even when the
		 * tick took longer than the interval (no timed wait then). */
		while (!g->stop) {
			if (atomic_load(&g->pending))
				pthread_cond_wait(&g->cond, &g->lock);
			else if (mono_ns() < until)
				pthread_cond_timedwait(&g->cond, &g->lock, &ts);
			else
				break;
		}
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

/* ---- attach, detach, stats ---- */

static void free_gov(struct vsched_kvm_gov *g)
{
	/* The close op runs as the others do, as the governor's holder: a
	 * call of its on this governor is refused (a destroy from it freed
	 * the governor under this loop, and this one freed it again). */
	const struct vsched_kvm_gov *prev = holder;

	holder = g;
	for (unsigned i = 0; g->v && i < g->n; i++) {
		if (g->v[i].fd >= 0)
			g->ops.close(g->ops.ctx, g->v[i].fd);
		free(g->v[i].cur);
		free(g->v[i].prev);
	}
	holder = prev;
	free(g->v);
	pthread_mutex_destroy(&g->lock);
	pthread_cond_destroy(&g->cond);
	free(g);
}

/* The config's values, defaults filled in: 0 or VSCHED_EINVAL. */
static int configure(struct vsched_kvm_gov *g,
		     const struct vsched_kvm_gov_config *c)
{
	const struct vsched_profile *prof = vsched_profile_get(NULL);
	struct vsched_poll_state s;

	if (c->poll) {
		if (vsched__struct_in(&g->poll, sizeof(g->poll), c->poll,
				      VSCHED__SIZE_TO(struct vsched_poll_params,
						      decay_shift)))
			return VSCHED_EINVAL;
	} else {
		vsched_poll_defaults(VSCHED_POLL_ADAPTIVE,
				     prof ? prof->poll_max_ns : 200000, &g->poll);
		g->poll.decay_shift = 8;
		/* KVM's own rate (its 200 us window against a ~50 us
		 * sleeping wakeup): the governor's goal is KVM's latency at
		 * less CPU, not the CPU-neutral default of a userspace
		 * sleeper (poll.h). */
		g->poll.latency_weight = 4;
	}
	if (vsched_poll_init(&g->poll, &s) != 0 || c->hysteresis_pct > 100)
		return VSCHED_EINVAL;
	if (g->poll.max_ns > UINT32_MAX)
		g->poll.max_ns = UINT32_MAX; /* KVM's cap is 32 bits */
	g->interval_ns = c->interval_ns ? c->interval_ns : 100000000ull;
	g->min_change_ns = c->min_change_ns ? c->min_change_ns : 1000000000ull;
	g->pct = c->hysteresis_pct ? c->hysteresis_pct : 25;
	if (c->samples_per_tick > VSCHED_KVM_GOV_MAX_SAMPLES)
		return VSCHED_EINVAL;
	g->spt = c->samples_per_tick ? c->samples_per_tick : 64;
	if (c->ops) {
		if (!c->ops->check_cap || !c->ops->set_cap ||
		    !c->ops->stats_fd || !c->ops->pread || !c->ops->close)
			return VSCHED_EINVAL;
		g->ops = *c->ops;
	} else {
		g->ops = kernel_ops;
	}
	return 0;
}

/* One vCPU at create: its stats fd (a copy of the VMM's `stats_fd` when
 * `own`, else KVM_GET_STATS_FD on `vcpu_fd`), its descriptors and first
 * values, its policy state. Returns 1 or a negative errno. */
static int attach_vcpu(struct vsched_kvm_gov *g, struct gvcpu *v, int vcpu_fd,
		       int stats_fd, bool own, bool force_sums)
{
	int rc, fd = vcpu_fd < 0 ? -EBADF : 0;

	if (!fd && own) {
		/* The VMM's own, opened while the vCPU was out of KVM_RUN
		 * (or on its thread). */
		fd = stats_fd < 0 ? -EBADF : fcntl(stats_fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0 && fd != -EBADF)
			fd = -errno;
	} else if (!fd) {
		fd = g->ops.stats_fd(g->ops.ctx, vcpu_fd);
	}
	if (fd < 0)
		return fd;
	v->fd = fd;
	rc = parse(g, v, force_sums);
	if (!rc)
		rc = read_values(g, v);
	if (rc)
		return rc;
	memcpy(v->prev, v->cur, v->nvals * sizeof(uint64_t));
	vsched_poll_init(&g->poll, &v->st);
	if (!v->hist)
		g->st.model = VSCHED_KVM_GOV_SUMS;
	return 1;
}

int vsched_kvm_gov_create(int vm_fd, const int *vcpu_fds, unsigned nvcpus,
			  const struct vsched_kvm_gov_config *cfg,
			  struct vsched_kvm_gov **out)
{
	struct vsched_kvm_gov_config c = { .size = sizeof(c) };
	struct vsched_kvm_gov *g;
	pthread_condattr_t ca;
	int rc;

	if (vm_fd < 0 || !vcpu_fds || !nvcpus || nvcpus > 4096 || !out)
		return VSCHED_EINVAL;
	if (cfg && vsched__struct_in(&c, sizeof(c), cfg,
				     VSCHED__SIZE_TO(struct vsched_kvm_gov_config,
						     stats_fds)))
		return VSCHED_EINVAL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return VSCHED_ENOMEM;
	pthread_mutex_init(&g->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cond, &ca);
	pthread_condattr_destroy(&ca);
	g->vm_fd = vm_fd;
	g->st.size = sizeof(g->st);
	g->st.cap_ns = UINT64_MAX;
	g->st.vcpus = nvcpus;
	rc = configure(g, &c);
	if (rc) {
		g->ops = kernel_ops; /* nothing opened yet */
		free_gov(g);
		return rc;
	}
	g->v = calloc(nvcpus, sizeof(*g->v));
	if (!g->v) {
		free_gov(g);
		return VSCHED_ENOMEM;
	}
	g->n = nvcpus;
	for (unsigned i = 0; i < nvcpus; i++)
		g->v[i].fd = -1;
	rc = g->ops.check_cap(g->ops.ctx, vm_fd);
	if (rc == 0)
		rc = -EOPNOTSUPP;
	for (unsigned i = 0; rc > 0 && i < nvcpus; i++)
		rc = attach_vcpu(g, &g->v[i], vcpu_fds[i],
				 c.stats_fds ? c.stats_fds[i] : -1, c.stats_fds != NULL,
				 c.force_sums);
	if (rc < 0) {
		free_gov(g);
		return rc;
	}
	if (c.thread) {
		sigset_t all, old;

		g->threaded = true;
		/* The thread takes no signal: a VMM's signals (a vCPU kick,
		 * SIGTERM, SIGCHLD) go to its own threads, never to a
		 * library's that would run their handlers in its tick. It
		 * inherits the mask it is created with. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		rc = pthread_create(&g->thread, NULL, gov_thread, g);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rc) {
			free_gov(g);
			return -rc;
		}
	}
	*out = g;
	return 0;
}

int vsched_kvm_gov_destroy(struct vsched_kvm_gov *g)
{
	if (!g)
		return VSCHED_EINVAL;
	if (held_here(g))
		return VSCHED_ESTATE; /* from an op: it would free under the tick */
	if (atomic_exchange(&g->dying, true))
		return VSCHED_ESTATE; /* from inside its own destroy */
	if (g->threaded) {
		const struct vsched_kvm_gov *prev = gov_lock(g);
		g->stop = true;
		gov_unlock(g, prev); /* broadcasts */
		pthread_join(g->thread, NULL);
	}
	free_gov(g);
	return 0;
}

int vsched_kvm_gov_read_stats(const struct vsched_kvm_gov *g,
			      struct vsched_kvm_gov_stats *out)
{
	int rc;
	const struct vsched_kvm_gov *prev;

	if (!g)
		return VSCHED_EINVAL;
	if (held_here(g))
		return VSCHED_ESTATE;
	prev = gov_lock(g);
	rc = vsched__struct_out(out, &g->st, sizeof(g->st));
	gov_unlock(g, prev);
	return rc;
}

#define GOV_STATS(X)                                                            \
	X(vcpus) X(model) X(samples) X(decisions) X(cap_changes)               \
	X(held_hysteresis) X(held_rate) X(read_errors) X(set_errors) X(cap_ns) \
	X(window_ns) X(halts) X(halts_polled) X(halts_slept) X(halts_invalid)  \
	X(polls_failed) X(poll_success_ns) X(poll_fail_ns) X(wait_ns)          \
	X(last_halts)

int vsched_kvm_gov_stats_write(const struct vsched_kvm_gov *g, FILE *f,
			       unsigned format)
{
	struct vsched_kvm_gov_stats s = { .size = sizeof(s) };
	bool json = format == VSCHED_STATS_JSON;
	int n = 0, bad = 0;

	if (!g || !f || format > VSCHED_STATS_JSON)
		return VSCHED_EINVAL;
	if (held_here(g))
		return VSCHED_ESTATE;
	vsched_kvm_gov_read_stats(g, &s);
	if (json)
		bad |= fputs("{", f) < 0;
#define GOV_WRITE(name)                                                          \
	bad |= (json ? fprintf(f, "%s\"" #name "\":%llu", n++ ? "," : "",       \
			       (unsigned long long)s.name)                      \
		     : fprintf(f, "kvm_gov." #name " %llu\n",                    \
			       (unsigned long long)s.name)) < 0;
	GOV_STATS(GOV_WRITE)
#undef GOV_WRITE
	if (json)
		bad |= fputs("}\n", f) < 0;
	/* What is still in the stream's buffer has not been written: flush,
	 * so that a failed write is this call's error (as
	 * vsched_vcpu_stats_write()). */
	bad |= fflush(f) != 0 || ferror(f);
	return bad ? -EIO : 0;
}
