/* SPDX-License-Identifier: MIT */
/*
 * Stress: 4 posters and 2 vCPU threads on the real futex path.
 *
 * Posters post random kinds (flag, payload, NO_WAKEUP, WAIT) to random vCPUs
 * with random 0-10 us gaps. vCPUs loop service -> enter -> "guest" spin that
 * ends early when kicked -> exit, and sometimes block with a short deadline.
 * A watchdog fails the run if any request waits more than 1 s. At the end:
 * the posts each poster counted equal serviced + coalesced per kind, every
 * payload was delivered once, and the race window (a kick landing while the
 * vCPU is inside vsched_vcpu_enter(), after its mode write) was hit.
 * Every 200 ms the posters switch between a dense phase and a sparse one in
 * which a single post at a time is waited for, while vCPUs often block with
 * no deadline: there, a lost wakeup hangs the request and the watchdog fails
 * the run. A further thread swaps the VM's poll policy every 2 ms (none,
 * fixed, kvm, adaptive) while the vCPUs poll and block.
 *
 * usage: stress_requests [seconds]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vsched/vsched.h>

#define NPOSTERS 4
#define NVCPUS 2
#define NKINDS 5
#define MAX_WAIT_NS 1000000000ull
#define PAYLOADS_PER_POSTER 4096

enum { K_TIMER = 0, K_IRQ = 1, K_FLUSH = 2, K_NOWAKE = 3, K_SYNC = 4 };

struct irq {
	struct vsched_payload node;
	uint64_t posted_ns;
	atomic_int in_flight;
};

struct vcpu_ctx {
	struct vsched_vcpu *v;
	atomic_int kicked;
	atomic_int phase; /* 0 outside, 1 inside vsched_vcpu_enter, 2 guest */
	_Atomic uint64_t oldest[NKINDS];
	uint64_t payloads_delivered;
	uint64_t entries, cancelled, blocks;
	unsigned id;
};

static struct vcpu_ctx vcpus[NVCPUS];
static _Atomic uint64_t posts[NVCPUS][NKINDS];
static _Atomic uint64_t payloads_posted[NVCPUS];
static _Atomic uint64_t window_hits, max_wait_ns;
static atomic_int stop_posting, stop_vcpus, failed;
/* Sparse phases: one post at a time, each waited for before the next, so a
 * lost wakeup is not healed by later traffic and the watchdog sees it. */
static atomic_int sparse;
static pthread_mutex_t sparse_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t lone_posts;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void note_wait(uint64_t since)
{
	uint64_t w = now_ns() - since, m = atomic_load(&max_wait_ns);
	while (w > m && !atomic_compare_exchange_weak(&max_wait_ns, &m, w))
		;
	if (w > MAX_WAIT_NS) {
		fprintf(stderr, "FAIL: a request waited %llu ns\n",
			(unsigned long long)w);
		atomic_store(&failed, 1);
	}
}

static void handler(struct vsched_vcpu *v, unsigned kind,
		    struct vsched_payload *p, void *arg)
{
	struct vcpu_ctx *c = vsched_vcpu_user(v);
	(void)arg;
	if (p) {
		struct irq *q = (struct irq *)p;
		note_wait(q->posted_ns);
		if (atomic_exchange(&q->in_flight, 0) != 1) {
			fprintf(stderr, "FAIL: payload delivered twice\n");
			atomic_store(&failed, 1);
		}
		c->payloads_delivered++;
		return;
	}
	uint64_t since = atomic_exchange(&c->oldest[kind], 0);
	if (since)
		note_wait(since);
}

static void kick(struct vsched_vcpu *v, void *ctx)
{
	struct vcpu_ctx *c = vsched_vcpu_user(v);
	(void)ctx;
	/* The poster saw IN_GUEST while the vCPU had not returned from
	 * vsched_vcpu_enter(): the post landed in the window between the
	 * mode write and the re-check. */
	if (atomic_load(&c->phase) == 1)
		atomic_fetch_add(&window_hits, 1);
	atomic_store(&c->kicked, 1);
}

static void *vcpu_thread(void *arg)
{
	struct vcpu_ctx *c = arg;
	uint64_t seed = 0x9e3779b97f4a7c15ull * (c->id + 1);

	while (!atomic_load(&stop_vcpus)) {
		if (vsched_service(c->v) < 0)
			abort();
		atomic_store(&c->phase, 1);
		int rc = vsched_vcpu_enter(c->v);
		if (rc == VSCHED_ENTRY_CANCELLED) {
			atomic_store(&c->phase, 0);
			c->cancelled++;
			continue;
		}
		if (rc != 0)
			abort();
		atomic_store(&c->phase, 2);
		/* Guest: up to 20 us, cut short by a kick (immediate exit). */
		uint64_t end = now_ns() + rnd(&seed) % 20000;
		while (!atomic_load(&c->kicked) && now_ns() < end)
			;
		atomic_store(&c->kicked, 0);
		atomic_store(&c->phase, 0);
		if (vsched_vcpu_exit(c->v) != 0)
			abort();
		c->entries++;
		if (rnd(&seed) % 4 == 0) {
			uint64_t r = rnd(&seed);
			uint64_t dl = r % 2 ? VSCHED_DEADLINE_NONE
					    : now_ns() + (r >> 8) % 2000000;
			c->blocks++;
			if (vsched_vcpu_block(c->v, dl) < 0)
				abort();
		}
	}
	/* Posters are done: one last pass gets everything. */
	vsched_service(c->v);
	atomic_store(&c->phase, 3);
	return NULL;
}

static void *poster_thread(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	uint64_t seed = 0x2545f4914f6cdd1dull * (id + 7);
	struct irq *irqs = calloc(PAYLOADS_PER_POSTER, sizeof(*irqs));
	unsigned next_irq = 0;

	while (!atomic_load(&stop_posting) && !atomic_load(&failed)) {
		uint64_t r = rnd(&seed);
		unsigned vi = r % NVCPUS;

		if (atomic_load(&sparse)) {
			unsigned k = (unsigned)(r >> 8) % 3 == 0 ? K_TIMER : K_FLUSH;
			struct vcpu_ctx *c = &vcpus[vi];
			uint64_t zero = 0;
			pthread_mutex_lock(&sparse_lock);
			atomic_compare_exchange_strong(&c->oldest[k], &zero, now_ns());
			if (vsched_post(c->v, k) != 0)
				abort();
			atomic_fetch_add(&posts[vi][k], 1);
			atomic_fetch_add(&lone_posts, 1);
			while (atomic_load(&c->oldest[k]) && !atomic_load(&failed))
				;
			pthread_mutex_unlock(&sparse_lock);
			continue;
		}
		unsigned kind = (unsigned)((r >> 8) % 100);
		struct vcpu_ctx *c = &vcpus[vi];
		uint64_t end = now_ns() + (r >> 20) % 10001;

		while (now_ns() < end)
			;
		kind = kind < 40 ? K_IRQ : kind < 65 ? K_TIMER : kind < 85 ? K_FLUSH
			: kind < 98 ? K_NOWAKE : K_SYNC;
		if (kind == K_IRQ) {
			struct irq *q = &irqs[next_irq];
			if (atomic_load(&q->in_flight))
				continue; /* slot still queued: try later */
			next_irq = (next_irq + 1) % PAYLOADS_PER_POSTER;
			q->posted_ns = now_ns();
			atomic_store(&q->in_flight, 1);
			if (vsched_post_payload(c->v, K_IRQ, &q->node) != 0)
				abort();
			atomic_fetch_add(&payloads_posted[vi], 1);
		} else {
			uint64_t zero = 0;
			atomic_compare_exchange_strong(&c->oldest[kind], &zero,
						       now_ns());
			if (vsched_post(c->v, kind) != 0)
				abort();
		}
		atomic_fetch_add(&posts[vi][kind], 1);
	}
	/* Wait until our payload slots are all delivered before freeing. */
	for (unsigned i = 0; i < PAYLOADS_PER_POSTER; i++)
		while (atomic_load(&irqs[i].in_flight))
			;
	free(irqs);
	return NULL;
}

static struct vsched_vm *the_vm;
static _Atomic uint64_t policy_swaps;

static void *policy_swapper(void *arg)
{
	unsigned i = 0;
	(void)arg;
	while (!atomic_load(&stop_vcpus)) {
		struct vsched_poll_params p;
		unsigned policy = i++ % 4;
		vsched_poll_defaults(policy, policy == VSCHED_POLL_FIXED ? 20000 : 200000,
				     &p);
		if (vsched_vm_set_poll(the_vm, &p) != 0)
			abort();
		atomic_fetch_add(&policy_swaps, 1);
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void *watchdog(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_vcpus)) {
		uint64_t t = now_ns();
		for (unsigned v = 0; v < NVCPUS; v++)
			for (unsigned k = 0; k < NKINDS; k++) {
				uint64_t s = atomic_load(&vcpus[v].oldest[k]);
				if (s && t > s && t - s > MAX_WAIT_NS) {
					fprintf(stderr,
						"FAIL: vCPU %u kind %u unserviced for %llu ns\n",
						v, k, (unsigned long long)(t - s));
					atomic_store(&failed, 1);
				}
			}
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 10;
	struct vsched_host_ops ops = { .kick = kick };
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &ops };
	struct vsched_vm *vm;
	pthread_t vt[NVCPUS], pt[NPOSTERS], wd, sw;
	static const struct {
		const char *name;
		unsigned prio, flags;
	} kinds[NKINDS] = {
		[K_TIMER] = { "timer", 2, 0 },
		[K_IRQ] = { "irq", 1, VSCHED_REQ_PAYLOAD },
		[K_FLUSH] = { "flush", 0, 0 },
		[K_NOWAKE] = { "nowake", 3, VSCHED_REQ_NO_WAKEUP },
		[K_SYNC] = { "sync", 4, VSCHED_REQ_WAIT },
	};

	if (vsched_vm_create(&cfg, &vm))
		return 2;
	for (unsigned k = 0; k < NKINDS; k++) {
		struct vsched_request_desc d = { .name = kinds[k].name,
						 .priority = kinds[k].prio,
						 .flags = kinds[k].flags,
						 .handler = handler };
		if (vsched_request_declare(vm, k, &d))
			return 2;
	}
	if (vsched_request_finalize(vm, 0))
		return 2;
	for (unsigned i = 0; i < NVCPUS; i++) {
		vcpus[i].id = i;
		if (vsched_vcpu_create(vm, i, &vcpus[i], &vcpus[i].v))
			return 2;
	}
	for (unsigned i = 0; i < NVCPUS; i++)
		pthread_create(&vt[i], NULL, vcpu_thread, &vcpus[i]);
	for (unsigned i = 0; i < NPOSTERS; i++)
		pthread_create(&pt[i], NULL, poster_thread, (void *)(uintptr_t)i);
	pthread_create(&wd, NULL, watchdog, NULL);
	the_vm = vm;
	pthread_create(&sw, NULL, policy_swapper, NULL);

	uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);
	while (now_ns() < end && !atomic_load(&failed)) {
		struct timespec ts = { 0, 200000000 };
		nanosleep(&ts, NULL);
		atomic_store(&sparse, !atomic_load(&sparse));
	}
	atomic_store(&stop_posting, 1);
	for (unsigned i = 0; i < NPOSTERS; i++)
		pthread_join(pt[i], NULL);
	atomic_store(&stop_vcpus, 1);
	/* Wake vCPUs blocked with no deadline until they have left their
	 * loops (counted like any post, serviced by their last pass). */
	for (unsigned i = 0; i < NVCPUS; i++) {
		while (atomic_load(&vcpus[i].phase) != 3) {
			struct timespec ts = { 0, 1000000 };
			vsched_post(vcpus[i].v, K_FLUSH);
			atomic_fetch_add(&posts[i][K_FLUSH], 1);
			nanosleep(&ts, NULL);
		}
	}
	for (unsigned i = 0; i < NVCPUS; i++)
		pthread_join(vt[i], NULL);
	pthread_join(wd, NULL);
	pthread_join(sw, NULL);

	int bad = atomic_load(&failed);
	uint64_t total = 0, kicks = 0, wakeups = 0, cancelled = 0, entries = 0;
	uint64_t polls_won = 0, polls = 0, skips = 0;
	for (unsigned i = 0; i < NVCPUS; i++) {
		struct vsched_vcpu_stats s = { .size = sizeof(s) };
		vsched_vcpu_read_stats(vcpus[i].v, &s);
		for (unsigned k = 0; k < NKINDS; k++) {
			uint64_t p = atomic_load(&posts[i][k]);
			uint64_t got = s.kind[k].serviced + s.kind[k].coalesced;
			total += p;
			if (p != got || s.kind[k].posted != p) {
				fprintf(stderr,
					"FAIL: vCPU %u kind %u: posted %llu, serviced+coalesced %llu\n",
					i, k, (unsigned long long)p,
					(unsigned long long)got);
				bad = 1;
			}
		}
		if (s.kind[K_IRQ].payloads_delivered != atomic_load(&payloads_posted[i]) ||
		    vcpus[i].payloads_delivered != atomic_load(&payloads_posted[i])) {
			fprintf(stderr, "FAIL: vCPU %u payloads posted %llu delivered %llu\n",
				i, (unsigned long long)atomic_load(&payloads_posted[i]),
				(unsigned long long)s.kind[K_IRQ].payloads_delivered);
			bad = 1;
		}
		if (s.cancelled_entries != vcpus[i].cancelled ||
		    s.entries != vcpus[i].entries) {
			fprintf(stderr, "FAIL: vCPU %u entry counters disagree\n", i);
			bad = 1;
		}
		polls_won += s.halt.halt_successful_poll;
		polls += s.halt.halt_attempted_poll;
		skips += s.halt.idle_fastpath_skips;
		kicks += s.kicks_sent;
		wakeups += s.wakeups;
		cancelled += s.cancelled_entries;
		entries += s.entries;
	}
	printf("posts %llu, entries %llu, cancelled entries %llu, kicks %llu, "
	       "wakeups %llu, lone posts %llu, race-window hits %llu, "
	       "longest wait %.3f ms\n",
	       (unsigned long long)total, (unsigned long long)entries,
	       (unsigned long long)cancelled, (unsigned long long)kicks,
	       (unsigned long long)wakeups,
	       (unsigned long long)atomic_load(&lone_posts),
	       (unsigned long long)atomic_load(&window_hits),
	       atomic_load(&max_wait_ns) / 1e6);
	printf("polls won %llu of %llu, idle fast-path skips %llu, policy swaps %llu\n",
	       (unsigned long long)polls_won, (unsigned long long)polls,
	       (unsigned long long)skips, (unsigned long long)atomic_load(&policy_swaps));
	if (atomic_load(&window_hits) == 0) {
		fprintf(stderr, "FAIL: the race window was never hit\n");
		bad = 1;
	}
	if (wakeups == 0 || kicks == 0 || polls_won == 0 || polls_won == polls ||
	    atomic_load(&policy_swaps) < 10) {
		fprintf(stderr, "FAIL: a path was not exercised (wakeup, kick, "
				"poll won and lost, policy swap)\n");
		bad = 1;
	}
	vsched_vm_destroy(vm);
	printf("%s\n", bad ? "FAILED" : "OK");
	return bad;
}
