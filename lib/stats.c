/* SPDX-License-Identifier: MIT */
/* The per-vCPU statistics: the snapshot struct, the descriptors and the
 * values array, each expanded from the one table of lib/stats_desc.h. The
 * text/JSON writer is in lib/stats_write.c. */
#include <string.h>

#include "abi.h"
#include "internal.h"
#include "stats_desc.h"

enum { FROM_VCPU, FROM_SLEEPER, FROM_RANK, FROM_DERIVED };

/* Where a row's values come from and where they go in the snapshot. */
struct stat_src {
	unsigned from;  /* FROM_* */
	size_t counter; /* in struct vsched_vcpu, or vsched__sleeper for SLEEPER */
	size_t field;   /* of the first value in struct vsched_vcpu_stats */
	size_t stride;  /* between two values in struct vsched_vcpu_stats */
};

#define COUNTER_VCPU(c) offsetof(struct vsched_vcpu, c)
#define COUNTER_SLEEPER(c) offsetof(struct vsched__sleeper, c)
#define COUNTER_RANK(c) offsetof(struct vsched_vcpu, c)
#define COUNTER_DERIVED(c) 0

#define DESC(name, shape, unit, field, from, counter)                         \
	{ #name, VSCHED__STAT_TYPE_##shape, #unit, VSCHED__SV_##name,         \
	  VSCHED__STAT_SIZE_##shape, VSCHED__STAT_PER_KIND_##shape },
static const struct vsched_stat_desc descs[] = { VSCHED__STATS(DESC) };
#undef DESC

#define SRC(name, shape, unit, field, from, counter)                          \
	{ FROM_##from, COUNTER_##from(counter),                               \
	  offsetof(struct vsched_vcpu_stats, field), VSCHED__STAT_STRIDE_##shape },
static const struct stat_src srcs[] = { VSCHED__STATS(SRC) };
#undef SRC

enum { NDESCS = sizeof(descs) / sizeof(descs[0]) };

/*
 * What the compiler checks of each row: the counter holds exactly the row's
 * values (one, one per rank, one per bucket), and the snapshot member is one
 * value (ONE, KIND: the kinds are VSCHED__STAT_STRIDE_KIND apart) or the
 * whole histogram. And of the table: the rows' values fill the snapshot, so
 * that a member added to struct vsched_vcpu_stats without a row (or a row
 * without a member) does not build; test_stats checks that each row names
 * the member its public name says.
 */
#define NFIELD_ONE 1
#define NFIELD_KIND 1
#define NFIELD_HIST VSCHED_HIST_BUCKETS
#define COUNTER_SIZE_VCPU(c) sizeof(((struct vsched_vcpu *)0)->c)
#define COUNTER_SIZE_SLEEPER(c) sizeof(((struct vsched__sleeper *)0)->c)
#define COUNTER_SIZE_RANK(c) COUNTER_SIZE_VCPU(c)
#define COUNTER_SIZE_DERIVED(c) 0
#define CHECK(name, shape, unit, field, from, counter)                        \
	_Static_assert(COUNTER_SIZE_##from(counter) == 0 ||                    \
		       COUNTER_SIZE_##from(counter) ==                         \
			       VSCHED__STAT_SIZE_##shape * sizeof(uint64_t),   \
		       #name ": counter size");                                \
	_Static_assert(sizeof(((struct vsched_vcpu_stats *)0)->field) ==       \
			       NFIELD_##shape * sizeof(uint64_t),              \
		       #name ": snapshot member size");
VSCHED__STATS(CHECK)
#undef CHECK
_Static_assert(offsetof(struct vsched_vcpu_stats, entries) +
			       VSCHED__STAT_NVALUES * sizeof(uint64_t) ==
		       sizeof(struct vsched_vcpu_stats),
	       "every member of struct vsched_vcpu_stats has one row");
/* The largest extensible struct: a caller's size above the cap is refused
 * (lib/abi.h), so ours must fit under it. */
_Static_assert(sizeof(struct vsched_vcpu_stats) <= VSCHED__STRUCT_MAX,
	       "struct vsched_vcpu_stats fits the extensible-struct size cap");

/* Value j of row `s` in a snapshot. */
static uint64_t *value_of(struct vsched_vcpu_stats *snap,
			  const struct stat_src *s, unsigned j)
{
	return (uint64_t *)((char *)snap + s->field + j * s->stride);
}

/* Counter j of row `s` in `base`. */
static uint64_t rd(const void *base, const struct stat_src *s, unsigned j)
{
	const _Atomic uint64_t *c =
		(const _Atomic uint64_t *)((const char *)base + s->counter) + j;

	return atomic_load_explicit(c, memory_order_relaxed);
}

/* The rows that come `from` VCPU or SLEEPER, read out of `base`. */
static void read_rows(struct vsched_vcpu_stats *snap, unsigned from,
		      const void *base)
{
	for (unsigned i = 0; i < NDESCS; i++)
		if (srcs[i].from == from)
			for (unsigned j = 0; j < descs[i].size; j++)
				*value_of(snap, &srcs[i], j) = rd(base, &srcs[i], j);
}

/* The RANK rows: counter r goes to the kind of rank r. */
static void read_rank_rows(struct vsched_vcpu_stats *snap,
			   const struct vsched_vcpu *v)
{
	const struct vsched__table *t = &v->vm->table;

	for (unsigned i = 0; i < NDESCS; i++)
		if (srcs[i].from == FROM_RANK)
			for (unsigned r = 0; r < t->nkinds; r++)
				*value_of(snap, &srcs[i], t->by_rank[r].kind) =
					rd(v, &srcs[i], r);
}

void vsched__sleeper_rows(const struct vsched__sleeper *s,
			  struct vsched_vcpu_stats *out)
{
	memset(out, 0, sizeof(*out));
	read_rows(out, FROM_SLEEPER, s);
}

void vsched__sleeper_halt_stats(const struct vsched__sleeper *s,
				struct vsched_halt_stats *out)
{
	struct vsched_vcpu_stats snap;

	vsched__sleeper_rows(s, &snap);
	memcpy(out, &snap.halt, sizeof(*out));
}

int vsched_vcpu_read_stats(const struct vsched_vcpu *v,
			   struct vsched_vcpu_stats *caller)
{
	struct vsched_vcpu_stats snap, *out = &snap;
	const struct vsched__table *t;
	uint64_t pend, posted = 0, avoided;

	if (!v || !caller)
		return VSCHED_EINVAL;
	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	/* Read order, for kicks_avoided below: a post's kick or wakeup
	 * counter before the pending word, the pending word before the
	 * serviced and coalesced counters. A post that kicked or woke the
	 * vCPU while the snapshot was read may be in `posted` and not yet in
	 * kicks_sent or wakeups, and so counted avoided: a reader preempted
	 * there counted every post made meanwhile (up to 41 too many in an
	 * outside trial). So the snapshot is read again, up to 4 times in
	 * all, until neither counter moved during it: what is left are the
	 * posts in flight at its end, one per posting thread (a best effort:
	 * relaxed loads, as every counter's; 3 at most in that trial). */
	for (unsigned tries = 1;; tries++) {
		read_rows(out, FROM_VCPU, v);
		read_rows(out, FROM_SLEEPER, &v->sl);
		/* A bit set again for a resumed payload pass is no post. */
		pend = atomic_load_explicit(&v->pending, memory_order_relaxed) &
		       ~atomic_load_explicit(&v->resumed, memory_order_relaxed);
		read_rank_rows(out, v);
		if (tries == 4 ||
		    (atomic_load_explicit(&v->ps.kicks_sent, memory_order_relaxed) ==
			     out->kicks_sent &&
		     atomic_load_explicit(&v->ps.wakeups, memory_order_relaxed) ==
			     out->wakeups))
			break;
	}
	/* The DERIVED rows. */
	t = &v->vm->table;
	for (unsigned r = 0; r < t->nkinds; r++) {
		struct vsched_kind_stats *s = &out->kind[t->by_rank[r].kind];
		s->posted = s->serviced + s->coalesced + ((pend >> r) & 1);
		posted += s->posted;
	}
	/* Every accepted post kicked, woke, or did neither: the third count
	 * is deduced rather than paid for on the post path. kicks_sent and
	 * wakeups count posts only (kicks and timer re-arms have their own
	 * event_ counters), so this is exact once the posters are quiescent;
	 * the clamp covers a snapshot that reads a post's decision before the
	 * pending bit that it serviced. */
	avoided = posted - out->kicks_sent - out->wakeups;
	out->kicks_avoided = avoided > posted ? 0 : avoided;
	/* KVM's halt_wakeup: every wakeup of the halted vCPU, any source. */
	out->halt.halt_wakeup = out->wakeups + out->event_wakeups;
	/* The extensible-struct rule (lib/abi.h): an older caller gets the
	 * members it knows. */
	return vsched__struct_out(caller, out, sizeof(*out));
}

int vsched_vcpu_stat_descs(const struct vsched_stat_desc **d, unsigned *count,
			   unsigned *nvalues)
{
	if (!d || !count || !nvalues)
		return VSCHED_EINVAL;
	*d = descs;
	*count = NDESCS;
	*nvalues = VSCHED__STAT_NVALUES;
	return 0;
}

int vsched_vcpu_stat_values(const struct vsched_vcpu *v, uint64_t *val,
			    unsigned nvalues)
{
	struct vsched_vcpu_stats s = { .size = sizeof(s) };

	if (!v || !val || nvalues < VSCHED__STAT_NVALUES)
		return VSCHED_EINVAL;
	vsched_vcpu_read_stats(v, &s);
	for (unsigned i = 0; i < NDESCS; i++)
		for (unsigned j = 0; j < descs[i].size; j++)
			val[descs[i].offset + j] = *value_of(&s, &srcs[i], j);
	return 0;
}
