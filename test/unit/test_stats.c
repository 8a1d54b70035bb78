/* SPDX-License-Identifier: MIT */
/* The descriptor-based stats snapshot and its text and JSON writers. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

static void test_descriptors_and_values(void **state)
{
	const struct vsched_stat_desc *d;
	unsigned n, nv;
	(void)state;
	assert_int_equal(vsched_vcpu_stat_descs(&d, &n, &nv), 0);
	assert_true(n > 10);
	/* Contiguous, non-overlapping, unique names. */
	unsigned next = 0;
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(d[i].offset, next);
		next += d[i].size;
		for (unsigned j = 0; j < i; j++)
			assert_string_not_equal(d[i].name, d[j].name);
		assert_true(d[i].type <= VSCHED_STAT_LOG2_HIST);
	}
	assert_int_equal(next, nv);

	struct vsched_vm *vm = make_vm(NULL, 0);
	declare(vm, 5, "PMI", 1, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	struct vsched_vcpu *v = make_vcpu(vm, 2);
	vsched_post(v, 5);
	vsched_post(v, 5);
	vsched_service(v);
	assert_int_equal(vsched_vcpu_enter(v), 0);
	vsched_vcpu_exit(v);

	uint64_t *val = calloc(nv, sizeof(*val));
	assert_int_equal(vsched_vcpu_stat_values(v, val, nv), 0);
	for (unsigned i = 0; i < n; i++) {
		if (!strcmp(d[i].name, "entries"))
			assert_int_equal(val[d[i].offset], 1);
		if (!strcmp(d[i].name, "serviced"))
			assert_int_equal(val[d[i].offset + 5], 1);
		if (!strcmp(d[i].name, "coalesced"))
			assert_int_equal(val[d[i].offset + 5], 1);
		if (!strcmp(d[i].name, "kicks_avoided"))
			assert_int_equal(val[d[i].offset], 2);
	}
	assert_int_equal(vsched_vcpu_stat_values(v, val, nv - 1), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_stat_values(NULL, val, nv), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_stat_descs(NULL, &n, &nv), VSCHED_EINVAL);
	free(val);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(vsched_vcpu_stats_write(v, f, VSCHED_STATS_TEXT), 0);
	fclose(f);
	assert_non_null(strstr(buf, "vcpu2.entries 1\n"));
	assert_non_null(strstr(buf, "vcpu2.serviced{kind=PMI} 1\n"));
	free(buf);
	f = open_memstream(&buf, &len);
	assert_int_equal(vsched_vcpu_stats_write(v, f, VSCHED_STATS_JSON), 0);
	fclose(f);
	assert_int_equal(buf[0], '{');
	assert_non_null(strstr(buf, "\"vcpu\": 2"));
	assert_non_null(strstr(buf, "\"serviced\": {\"PMI\": 1}"));
	assert_string_equal(buf + len - 2, "}\n");
	free(buf);
	assert_int_equal(vsched_vcpu_stats_write(v, NULL, 0), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_stats_write(v, stdout, 9), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_stats_write(NULL, stdout, 0), VSCHED_EINVAL);
	vsched_vm_destroy(vm);
}


/* `wakeups` and `kicks_sent` count posts only; a vsched_vcpu_kick() or a
 * timer re-arm that wakes or kicks the vCPU is not a post, and must neither
 * inflate them nor drive kicks_avoided (posts - kicks - wakeups) negative. */
static struct vsched_vcpu *sv;
static struct vsched_timer *stmr;
static int swaits;
static int wait_event_then_post(struct fake_host *h, uint32_t *w, uint32_t exp,
				uint64_t dl)
{
	(void)w, (void)exp, (void)dl;
	switch (swaits++) {
	case 0: /* an event source kicks with nothing to report */
		assert_int_equal(vsched_vcpu_kick(sv), 0);
		return 0;
	case 1: /* a timer moved into the future: the sleeper re-evaluates */
		assert_int_equal(vsched_timer_arm(stmr, h->now + 1000000000ull), 0);
		return 0;
	default: /* the post that ends the halt */
		assert_int_equal(vsched_post(sv, 1), 0);
		return 0;
	}
}

static void test_wakeups_count_posts_only(void **state)
{
	struct fake_host h = { .now = 1000, .on_wait = wait_event_then_post };
	struct vsched_host_ops ops = fake_ops(&h);
	struct vsched_timer_desc td = { .size = sizeof(td), .kind = 2 };
	(void)state;
	struct vsched_vm *vm = make_vm(&ops, 0);
	declare(vm, 1, "req", 1, 0, NULL, NULL, 0);
	declare(vm, 2, "tmr", 2, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	sv = make_vcpu(vm, 0);
	assert_int_equal(vsched_timer_create(sv, &td, &stmr), 0);
	swaits = 0;
	assert_int_equal(vsched_vcpu_block(sv, VSCHED_DEADLINE_NONE), VSCHED_WAKE_REQUEST);
	assert_int_equal(swaits, 3);
	assert_int_equal(vsched_service(sv), 1);
	/* In the guest: an event kick, then a post that needs no kick. */
	assert_int_equal(vsched_vcpu_enter(sv), 0);
	assert_int_equal(vsched_vcpu_kick(sv), 0);
	assert_int_equal(h.kicks, 1);
	assert_int_equal(vsched_post(sv, 1), 0);
	assert_int_equal(vsched_vcpu_exit(sv), 0);
	assert_int_equal(vsched_service(sv), 1);

	struct vsched_vcpu_stats s = stats_of(sv);
	assert_int_equal(s.kind[1].posted, 2);
	if (s.wakeups != 1 || s.kicks_sent != 0 || s.kicks_avoided != 1)
		fail_msg("2 posts (1 woke, 1 found EXITING): wakeups %llu (want 1), "
			 "kicks_sent %llu (want 0), kicks_avoided %llu (want 1)",
			 (unsigned long long)s.wakeups, (unsigned long long)s.kicks_sent,
			 (unsigned long long)s.kicks_avoided);
	/* The kick and the re-arm have counters of their own; KVM's
	 * halt_wakeup counts every wakeup of the halted vCPU. */
	assert_int_equal(s.event_kicks, 1);
	assert_int_equal(s.event_wakeups, 2);
	assert_int_equal(s.halt.halt_wakeup, 3);
	const struct vsched_stat_desc *d;
	unsigned n, nv;
	assert_int_equal(vsched_vcpu_stat_descs(&d, &n, &nv), 0);
	uint64_t *val = calloc(nv, sizeof(*val));
	assert_int_equal(vsched_vcpu_stat_values(sv, val, nv), 0);
	for (unsigned i = 0; i < n; i++) {
		uint64_t x = val[d[i].offset];
		if (!strcmp(d[i].name, "wakeups"))
			assert_int_equal(x, 1);
		if (!strcmp(d[i].name, "event_kicks"))
			assert_int_equal(x, 1);
		if (!strcmp(d[i].name, "event_wakeups"))
			assert_int_equal(x, 2);
		if (!strcmp(d[i].name, "halt_wakeup"))
			assert_int_equal(x, 3);
		if (!strcmp(d[i].name, "kicks_avoided"))
			assert_int_equal(x, 1);
	}
	free(val);
	vsched_vm_destroy(vm);
}

/*
 * Every descriptor's values equal the struct reader's members, for a vCPU
 * that has done some of everything (posts that coalesce, carry payloads,
 * kick, wake or cancel an entry; a poll that wins, polls that fail, sleeps
 * woken by a post, by a kick, by nothing, and one that times out). The map
 * from public name to member is written here, from the public header, on
 * purpose apart from lib/stats_desc.h: it checks that table's rows.
 */
enum { ONE = 1, KIND = VSCHED_MAX_KINDS, HIST = VSCHED_HIST_BUCKETS };
#define TOP(m) { #m, offsetof(struct vsched_vcpu_stats, m), ONE }
#define HALT(m, n) { #m, offsetof(struct vsched_vcpu_stats, halt.m), n }
#define PER_KIND(name, m) { #name, offsetof(struct vsched_vcpu_stats, kind[0].m), KIND }
static const struct member {
	const char *name;
	size_t off;
	unsigned n;
} members[] = {
	TOP(entries), TOP(cancelled_entries), TOP(kicks_sent), TOP(kicks_avoided),
	TOP(wakeups), TOP(spurious_wakeups), TOP(event_kicks), TOP(event_wakeups),
	TOP(halt_poll_fd_checks), TOP(halt_poll_contended),
	HALT(halt_successful_poll, ONE), HALT(halt_attempted_poll, ONE),
	HALT(halt_poll_invalid, ONE), HALT(halt_wakeup, ONE),
	HALT(halt_poll_success_ns, ONE), HALT(halt_poll_fail_ns, ONE),
	HALT(halt_wait_ns, ONE), HALT(halt_poll_vetoed, ONE),
	HALT(idle_fastpath_skips, ONE), HALT(idle_fastpath_stores, ONE),
	HALT(halt_poll_success_hist, HIST), HALT(halt_poll_fail_hist, HIST),
	HALT(halt_wait_hist, HIST),
	PER_KIND(posted, posted), PER_KIND(serviced, serviced),
	PER_KIND(coalesced, coalesced),
	PER_KIND(kind_cancelled_entries, cancelled_entries),
	PER_KIND(payloads_delivered, payloads_delivered),
};
#undef TOP
#undef HALT
#undef PER_KIND

static uint64_t member_value(const struct vsched_vcpu_stats *s,
			     const struct member *m, unsigned j)
{
	size_t stride = m->n == KIND ? sizeof(struct vsched_kind_stats)
				     : sizeof(uint64_t);
	uint64_t x;

	memcpy(&x, (const char *)s + m->off + j * stride, sizeof(x));
	return x;
}

enum { K_TLB = 9, K_IRQ = 2 };
static struct vsched_vcpu *wv;
static unsigned wclock;
static void work_poll_clock(struct fake_host *h)
{
	h->now += 10;
	if (wclock && !--wclock)
		assert_int_equal(vsched_post(wv, K_TLB), 0);
}

static int wsleeps;
static int work_wait(struct fake_host *h, uint32_t *w, uint32_t exp, uint64_t dl)
{
	(void)w, (void)exp;
	switch (wsleeps++) {
	case 0: /* nothing: a spurious return */
		h->now += 3000;
		return 0;
	case 1: /* an event source's kick */
		h->now += 70000;
		assert_int_equal(vsched_vcpu_kick(wv), 0);
		return 0;
	case 2: /* the post that ends the halt */
		h->now += 900000;
		assert_int_equal(vsched_post(wv, K_TLB), 0);
		return 0;
	default: /* a timed halt that times out */
		h->now = dl;
		return -110;
	}
}

static unsigned delivered;
static void take_payload(struct vsched_vcpu *v, unsigned kind,
			 struct vsched_payload *p, void *arg)
{
	(void)v, (void)kind, (void)arg;
	delivered += p != NULL;
}

static void do_some_work(struct vsched_vcpu *v, struct fake_host *h)
{
	struct vsched_payload p[3];

	/* Posts: coalesced ones, payloads, one that cancels an entry. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(vsched_post(v, K_TLB), 0);
	assert_int_equal(vsched_post_payload(v, K_IRQ, &p[0]), 0);
	assert_int_equal(vsched_post_payload(v, K_IRQ, &p[1]), 0);
	assert_int_equal(vsched_service(v), 2);
	assert_int_equal(vsched_post(v, K_TLB), 0);
	assert_int_not_equal(vsched_vcpu_enter(v), 0);
	assert_int_equal(vsched_service(v), 1);
	/* In the guest: an event kick, then a post that needs none; then a
	 * post that kicks. */
	assert_int_equal(vsched_vcpu_enter(v), 0);
	assert_int_equal(vsched_vcpu_kick(v), 0);
	assert_int_equal(vsched_post_payload(v, K_IRQ, &p[2]), 0);
	assert_int_equal(vsched_vcpu_exit(v), 0);
	assert_int_equal(vsched_service(v), 1);
	assert_int_equal(vsched_vcpu_enter(v), 0);
	assert_int_equal(vsched_post(v, K_TLB), 0);
	assert_int_equal(vsched_vcpu_exit(v), 0);
	assert_int_equal(vsched_service(v), 1);
	assert_int_equal(h->kicks, 2);
	/* A poll that wins, then a halt that sleeps three times. */
	wclock = 20;
	assert_int_equal(vsched_vcpu_block(v, VSCHED_DEADLINE_NONE), VSCHED_WAKE_REQUEST);
	assert_int_equal(vsched_service(v), 1);
	assert_int_equal(vsched_vcpu_block(v, VSCHED_DEADLINE_NONE), VSCHED_WAKE_REQUEST);
	assert_int_equal(wsleeps, 3);
	assert_int_equal(vsched_service(v), 1);
	/* A halt that times out, and one post left pending. */
	assert_int_equal(vsched_vcpu_block(v, h->now + 50000), VSCHED_WAKE_DEADLINE);
	assert_int_equal(vsched_post(v, K_TLB), 0);
	assert_int_equal(delivered, 3);
}

static void test_values_match_struct(void **state)
{
	struct fake_host h = { .now = 1000, .on_clock = work_poll_clock,
			       .on_wait = work_wait };
	struct vsched_host_ops ops = fake_ops(&h);
	const unsigned nm = sizeof(members) / sizeof(members[0]);
	unsigned used[sizeof(members) / sizeof(members[0])] = { 0 };
	const struct vsched_stat_desc *d;
	unsigned n, nv, covered = 0;
	(void)state;

	/* Kind numbers and ranks differ (9 is served first), so a row that
	 * stored by rank instead of kind number would show. */
	struct vsched_vm *vm = make_vm(&ops, 2000);
	declare(vm, K_IRQ, "irq", 5, VSCHED_REQ_PAYLOAD, take_payload, NULL, 0);
	declare(vm, K_TLB, "tlb", 1, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	wv = make_vcpu(vm, 3);
	wclock = 0, wsleeps = 0, delivered = 0;
	do_some_work(wv, &h);

	struct vsched_vcpu_stats s = stats_of(wv);
	assert_int_equal(vsched_vcpu_stat_descs(&d, &n, &nv), 0);
	uint64_t *val = calloc(nv, sizeof(*val));
	assert_int_equal(vsched_vcpu_stat_values(wv, val, nv), 0);
	for (unsigned i = 0; i < n; i++) {
		const struct member *m = NULL;
		for (unsigned k = 0; k < nm; k++)
			if (!strcmp(members[k].name, d[i].name))
				m = &members[k], used[k]++;
		if (!m)
			fail_msg("descriptor %s names no member of "
				 "struct vsched_vcpu_stats", d[i].name);
		assert_int_equal(d[i].size, m->n);
		assert_int_equal(d[i].per_kind, m->n == KIND);
		assert_int_equal(d[i].type, m->n == HIST ? VSCHED_STAT_LOG2_HIST
							 : VSCHED_STAT_COUNTER);
		for (unsigned j = 0; j < d[i].size; j++)
			if (val[d[i].offset + j] != member_value(&s, m, j))
				fail_msg("%s[%u]: descriptor value %llu, struct %llu",
					 d[i].name, j,
					 (unsigned long long)val[d[i].offset + j],
					 (unsigned long long)member_value(&s, m, j));
		covered += d[i].size;
	}
	/* One descriptor per member, and every member has one. */
	for (unsigned k = 0; k < nm; k++)
		if (used[k] != 1)
			fail_msg("member %s has %u descriptors", members[k].name, used[k]);
	assert_int_equal(offsetof(struct vsched_vcpu_stats, entries) +
				 covered * sizeof(uint64_t),
			 sizeof(struct vsched_vcpu_stats));

	/* The work reached every kind of source. */
	assert_int_equal(s.entries, 2);
	assert_int_equal(s.cancelled_entries, 1);
	assert_int_equal(s.kicks_sent, 1);
	assert_int_equal(s.event_kicks, 1);
	assert_int_equal(s.wakeups, 1);
	assert_int_equal(s.event_wakeups, 1);
	assert_true(s.kicks_avoided > 0);
	assert_true(s.spurious_wakeups > 0);
	assert_true(s.halt.halt_successful_poll > 0);
	assert_true(s.halt.halt_attempted_poll > s.halt.halt_successful_poll);
	assert_true(s.halt.halt_poll_success_ns > 0);
	assert_true(s.halt.halt_poll_fail_ns > 0);
	assert_true(s.halt.halt_wait_ns > 0);
	assert_int_equal(s.kind[K_TLB].posted, 8);
	assert_int_equal(s.kind[K_TLB].coalesced, 2);
	assert_int_equal(s.kind[K_TLB].cancelled_entries, 1);
	assert_int_equal(s.kind[K_IRQ].posted, 3);
	assert_int_equal(s.kind[K_IRQ].payloads_delivered, 3);
	free(val);
	vsched_vm_destroy(vm);
}

/* A kick that finds the condition still false (a virtio-style spurious
 * notification) returns the sleep with nothing to do: counted in
 * spurious_wakeups, as waiter.h and stats.h say (session 23's outside
 * trial: it counted only the kernel's spurious returns, 0 for 5 such
 * kicks). Each kick is sent once the consumer sleeps (the kick says so:
 * 1), so each is one sleep's return. No deadline: no timing. */
static _Atomic int spur_ready;
static bool spur_cond(void *arg)
{
	(void)arg;
	return atomic_load(&spur_ready);
}

struct spur_wait {
	struct vsched_waiter *w;
	int rc;
};

static void *spur_consumer(void *arg)
{
	struct spur_wait *sw = arg;
	sw->rc = vsched_waiter_wait(sw->w, VSCHED_DEADLINE_NONE, NULL);
	return NULL;
}

/* Kick until a kick woke the sleeping consumer (returns 1); the hang
 * guard: 10 s. */
static void kick_sleeper(struct vsched_waiter *w)
{
	const uint64_t guard = mono() + 10000000000ull;

	while (mono() < guard) {
		int rc = vsched_waiter_kick(w);
		assert_true(rc == 0 || rc == 1);
		if (rc == 1)
			return;
		usleep(1);
	}
	fail_msg("the consumer never slept");
}

static void test_kick_with_nothing_to_do_is_spurious(void **state)
{
	(void)state;
	struct vsched_vm *vm = make_vm(NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	struct spur_wait sw = { .w = waiter_with(vm, spur_cond, NULL, 0) };
	struct vsched_waiter_stats ws = { .size = sizeof(ws) };
	pthread_t th;

	atomic_store(&spur_ready, 0);
	assert_int_equal(pthread_create(&th, NULL, spur_consumer, &sw), 0);
	for (int i = 0; i < 5; i++)
		kick_sleeper(sw.w);
	/* The condition true ends the wait, with a sixth kick if the
	 * consumer slept again; if it had not, the fifth kick's return found
	 * it true and was not spurious. */
	atomic_store(&spur_ready, 1);
	assert_true(vsched_waiter_kick(sw.w) >= 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(sw.rc, VSCHED_WAKE_REQUEST); /* the condition holds */
	assert_int_equal(vsched_waiter_read_stats(sw.w, &ws), 0);
	assert_true(ws.halt.halt_wakeup >= 5 && ws.halt.halt_wakeup <= 6);
	/* The kernel may add spurious returns of its own, never fewer. */
	assert_true(ws.spurious_wakeups >= 4);
	assert_int_equal(vsched_waiter_destroy(sw.w), 0);
	vsched_vm_destroy(vm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_descriptors_and_values),
		cmocka_unit_test(test_wakeups_count_posts_only),
		cmocka_unit_test(test_values_match_struct),
		cmocka_unit_test(test_kick_with_nothing_to_do_is_spurious),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
