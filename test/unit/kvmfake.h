/* SPDX-License-Identifier: MIT */
/*
 * A fake KVM for the halt-polling governor's tests (test_kvmgov.c,
 * test_govrev.c): each vCPU's stats fd is a memfd laid out as
 * Documentation/virt/kvm/api.rst describes (header, id string, descriptors
 * with their names, data), updated the way KVM's kvm_vcpu_halt() does; the
 * ops table records every KVM_ENABLE_CAP instead of issuing it, remembers
 * the stats fd the governor holds for each vCPU (so that its reads can be
 * made to fail) and can cut reads short.
 */
#ifndef VSCHED_TEST_KVMFAKE_H
#define VSCHED_TEST_KVMFAKE_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vsched/kvmgov.h>

#include "common.h"

#define SEC 1000000000ull
#define NAME_SIZE 48u

/* KVM's stats flags (linux/kvm.h). */
#define T_CUMUL 0x0
#define T_INSTANT 0x1
#define T_LINEAR 0x3
#define T_LOG 0x4
#define U_NONE 0x00
#define U_SEC 0x20
#define U_BOOL 0x40

struct fdesc {
	const char *name;
	uint32_t flags;
	int16_t exponent;
	uint16_t size;
};

#define HIST(n) { n, T_LOG | U_SEC, -9, 32 }
#define NS(n) { n, T_CUMUL | U_SEC, -9, 1 }
#define CNT(n) { n, T_CUMUL | U_NONE, 0, 1 }

/* What a 6.x kernel has, in its order (with a few unrelated ones). */
static const struct fdesc full[] = {
	CNT("halt_successful_poll"), CNT("halt_attempted_poll"),
	CNT("halt_poll_invalid"), CNT("halt_wakeup"),
	NS("halt_poll_success_ns"), NS("halt_poll_fail_ns"), NS("halt_wait_ns"),
	HIST("halt_poll_success_hist"), HIST("halt_poll_fail_hist"),
	HIST("halt_wait_hist"), CNT("blocking"), CNT("exits"),
};
/* A kernel whose histograms are missing: the sums only. */
static const struct fdesc sums_only[] = {
	CNT("halt_successful_poll"), CNT("halt_attempted_poll"),
	CNT("halt_poll_invalid"), CNT("halt_wakeup"), NS("halt_poll_success_ns"),
	NS("halt_poll_fail_ns"), NS("halt_wait_ns"), CNT("exits"),
};

/* One synthetic stats fd. */
struct synth {
	int fd;
	unsigned n;
	const struct fdesc *d;
	uint32_t off[32];
	uint32_t data_offset;
};

static inline void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

/* Lay out header, id, descriptors and zeroed data, as the kernel does. */
static inline void synth_make(struct synth *s, const struct fdesc *d, unsigned n)
{
	uint32_t desc_offset = 24 + NAME_SIZE, dsz = 16 + NAME_SIZE, off = 0;
	size_t len;
	uint8_t *buf;

	s->fd = memfd_create("kvm-stats", 0);
	assert_true(s->fd >= 0);
	s->n = n;
	s->d = d;
	s->data_offset = desc_offset + n * dsz;
	for (unsigned i = 0; i < n; i++) {
		s->off[i] = off;
		off += d[i].size * 8u;
	}
	len = s->data_offset + off;
	buf = calloc(1, len);
	assert_non_null(buf);
	put32(buf + 4, NAME_SIZE);
	put32(buf + 8, n);
	put32(buf + 12, 24);
	put32(buf + 16, desc_offset);
	put32(buf + 20, s->data_offset);
	strcpy((char *)buf + 24, "kvm-4242/vcpu-0");
	for (unsigned i = 0; i < n; i++) {
		uint8_t *p = buf + desc_offset + i * dsz;

		put32(p, d[i].flags);
		memcpy(p + 4, &d[i].exponent, 2);
		memcpy(p + 6, &d[i].size, 2);
		put32(p + 8, s->off[i]);
		strcpy((char *)p + 16, d[i].name);
	}
	assert_int_equal(pwrite(s->fd, buf, len, 0), (ssize_t)len);
	free(buf);
}

/* Add `v` to value `idx` of statistic `name`, if the fd has it. */
static inline void synth_add(struct synth *s, const char *name, unsigned idx,
		      uint64_t v)
{
	for (unsigned i = 0; i < s->n; i++) {
		off_t at;
		uint64_t x;

		if (strcmp(s->d[i].name, name))
			continue;
		at = s->data_offset + s->off[i] + idx * 8;
		assert_int_equal(pread(s->fd, &x, 8, at), 8);
		x += v;
		assert_int_equal(pwrite(s->fd, &x, 8, at), 8);
	}
}

/* Set value `idx` of statistic `name`. */
static inline void synth_set(struct synth *s, const char *name, unsigned idx,
		      uint64_t v)
{
	for (unsigned i = 0; i < s->n; i++)
		if (!strcmp(s->d[i].name, name))
			assert_int_equal(pwrite(s->fd, &v, 8,
						s->data_offset + s->off[i] + idx * 8),
					 8);
}

/* KVM_STATS_LOG_HIST_UPDATE: bucket fls64(ns), clamped to the last. */
static inline unsigned hist_bucket(uint64_t ns)
{
	unsigned b = ns ? 64u - (unsigned)__builtin_clzll(ns) : 0;

	return b > 31 ? 31 : b;
}

/* `count` halts that ended while KVM polled, after `poll_ns`. */
static inline void kvm_polled(struct synth *s, uint64_t poll_ns, uint64_t count)
{
	synth_add(s, "halt_attempted_poll", 0, count);
	synth_add(s, "halt_successful_poll", 0, count);
	synth_add(s, "halt_poll_success_ns", 0, poll_ns * count);
	synth_add(s, "halt_poll_success_hist", hist_bucket(poll_ns), count);
}

/* `count` halts that polled `poll_ns` in vain (0: no poll), then slept
 * `wait_ns`. */
static inline void kvm_slept(struct synth *s, uint64_t poll_ns, uint64_t wait_ns,
		      uint64_t count)
{
	if (poll_ns) {
		synth_add(s, "halt_attempted_poll", 0, count);
		synth_add(s, "halt_poll_fail_ns", 0, poll_ns * count);
		synth_add(s, "halt_poll_fail_hist", hist_bucket(poll_ns), count);
	}
	synth_add(s, "halt_wakeup", 0, count);
	synth_add(s, "halt_wait_ns", 0, wait_ns * count);
	synth_add(s, "halt_wait_hist", hist_bucket(wait_ns), count);
}

/* The ops: stats fds are dups of the synthetic ones (vCPU fd i is vCPU
 * i), KVM_ENABLE_CAP is recorded; reads of the stats fd the governor holds
 * for vCPU `fail_vcpu` fail with `fail_rc` once that is set. */
struct fake_kvm {
	struct synth s[4];
	int gfd[4]; /* the governor's stats fd of each vCPU */
	int check_rc, stats_rc, set_rc;
	unsigned sets;
	uint64_t cap;
	size_t read_limit; /* reads are cut short at this offset (0: none) */
	int fail_vcpu;     /* with fail_rc: reads of its governor's fd fail */
	int fail_rc;
};

static inline int f_check(void *ctx, int vm_fd)
{
	(void)vm_fd;
	return ((struct fake_kvm *)ctx)->check_rc;
}

static inline int f_set(void *ctx, int vm_fd, uint64_t ns)
{
	struct fake_kvm *k = ctx;

	(void)vm_fd;
	if (k->set_rc)
		return k->set_rc;
	k->sets++;
	k->cap = ns;
	return 0;
}

static inline int f_stats_fd(void *ctx, int vcpu_fd)
{
	struct fake_kvm *k = ctx;

	if (k->stats_rc)
		return k->stats_rc;
	k->gfd[vcpu_fd] = dup(k->s[vcpu_fd].fd);
	return k->gfd[vcpu_fd];
}

static inline ssize_t f_pread(void *ctx, int fd, void *buf, size_t len, uint64_t off)
{
	struct fake_kvm *k = ctx;
	ssize_t r;

	if (k->fail_rc && fd == k->gfd[k->fail_vcpu])
		return k->fail_rc;
	if (k->read_limit && off + len > k->read_limit)
		len = off >= k->read_limit ? 0 : k->read_limit - off;
	r = pread(fd, buf, len, (off_t)off);
	return r < 0 ? -errno : r;
}

static inline void f_close(void *ctx, int fd)
{
	(void)ctx;
	close(fd);
}

static inline struct fake_kvm *fake_new(const struct fdesc *d, unsigned n,
				 unsigned nvcpus)
{
	struct fake_kvm *k = calloc(1, sizeof(*k));

	assert_non_null(k);
	k->check_rc = 1;
	for (unsigned i = 0; i < 4; i++)
		k->gfd[i] = -1;
	for (unsigned i = 0; i < nvcpus; i++)
		synth_make(&k->s[i], d, n);
	return k;
}

static inline void fake_free(struct fake_kvm *k)
{
	for (unsigned i = 0; i < 4; i++)
		if (k->s[i].fd > 0)
			close(k->s[i].fd);
	free(k);
}

static const int vcpu_fds[4] = { 0, 1, 2, 3 };

static inline int gov_new(struct fake_kvm *k, unsigned nvcpus,
		   struct vsched_kvm_gov_config *c, struct vsched_kvm_gov **g)
{
	struct vsched_kvm_gov_ops ops = { f_check, f_set, f_stats_fd, f_pread,
					  f_close, k };
	struct vsched_kvm_gov_config d = { .size = sizeof(d) };
	static struct vsched_poll_params p;

	if (!c)
		c = &d;
	if (!c->poll) {
		/* The governor's default policy with x86's 200 us window, on
		 * every arch (the arch's own is its profile's: arm64 500 us,
		 * power 10 us), so that the decisions are the same. */
		vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, 200000, &p);
		p.decay_shift = 8;
		p.latency_weight = 4;
		c->poll = &p;
	}
	c->ops = &ops; /* copied by create */
	return vsched_kvm_gov_create(100, vcpu_fds, nvcpus, c, g);
}

static inline struct vsched_kvm_gov_stats gov_stats(struct vsched_kvm_gov *g)
{
	struct vsched_kvm_gov_stats st = { .size = sizeof(st) };

	assert_int_equal(vsched_kvm_gov_read_stats(g, &st), 0);
	return st;
}

#define FULL full, sizeof(full) / sizeof(full[0])
#define SUMS sums_only, sizeof(sums_only) / sizeof(sums_only[0])

#endif
