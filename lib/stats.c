/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "abi.h"
#include "internal.h"

static uint64_t rd(const _Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
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
	out->entries = rd(&v->vs.entries);
	out->cancelled_entries = rd(&v->vs.cancelled_entries);
	out->kicks_sent = rd(&v->ps.kicks_sent);
	out->wakeups = rd(&v->ps.wakeups);
	out->event_kicks = rd(&v->ps.event_kicks);
	out->event_wakeups = rd(&v->ps.event_wakeups);
	out->spurious_wakeups = rd(&v->sl.hs.spurious);
	t = &v->vm->table;
	pend = atomic_load_explicit(&v->pending, memory_order_relaxed);
	for (unsigned r = 0; r < t->nkinds; r++) {
		struct vsched_kind_stats *s = &out->kind[t->by_rank[r].kind];
		s->serviced = rd(&v->vs.serviced[r]);
		s->coalesced = rd(&v->ps.coalesced[r]);
		s->cancelled_entries = rd(&v->vs.cancelled[r]);
		s->payloads_delivered = rd(&v->vs.payloads[r]);
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
	vsched__halt_stats(&v->sl, &out->halt);
	/* KVM's halt_wakeup: every wakeup of the halted vCPU, any source. */
	out->halt.halt_wakeup = out->wakeups + out->event_wakeups;
	out->halt_poll_fd_checks = atomic_load_explicit(&v->sl.hs.fd_checks,
							memory_order_relaxed);
	/* The extensible-struct rule (lib/abi.h): an older caller gets the
	 * members it knows. */
	return vsched__struct_out(caller, out, sizeof(*out));
}

/* ------------------------------------------------------------------ */
/* Descriptor-based snapshot and its text / JSON writer. */

#include <errno.h>
#include <stdio.h>

enum { H = VSCHED_HIST_BUCKETS, K = VSCHED_MAX_KINDS };

#define C(name, unit, off) { name, VSCHED_STAT_COUNTER, unit, off, 1, 0 }
#define PK(name, off) { name, VSCHED_STAT_COUNTER, "count", off, K, 1 }
#define HIST(name, off) { name, VSCHED_STAT_LOG2_HIST, "ns", off, H, 0 }

static const struct vsched_stat_desc descs[] = {
	C("entries", "count", 0),
	C("cancelled_entries", "count", 1),
	C("kicks_sent", "count", 2),
	C("kicks_avoided", "count", 3),
	C("halt_wakeup", "count", 4), /* every source, as KVM */
	C("spurious_wakeups", "count", 5),
	C("halt_successful_poll", "count", 6),
	C("halt_attempted_poll", "count", 7),
	C("halt_poll_invalid", "count", 8),
	C("halt_poll_success_ns", "ns", 9),
	C("halt_poll_fail_ns", "ns", 10),
	C("halt_wait_ns", "ns", 11),
	C("halt_poll_vetoed", "count", 12),
	C("idle_fastpath_skips", "count", 13),
	C("idle_fastpath_stores", "count", 14),
	PK("posted", 15),
	PK("serviced", 15 + K),
	PK("coalesced", 15 + 2 * K),
	PK("kind_cancelled_entries", 15 + 3 * K),
	PK("payloads_delivered", 15 + 4 * K),
	HIST("halt_poll_success_hist", 15 + 5 * K),
	HIST("halt_poll_fail_hist", 15 + 5 * K + H),
	HIST("halt_wait_hist", 15 + 5 * K + 2 * H),
	C("wakeups", "count", 15 + 5 * K + 3 * H),
	C("event_kicks", "count", 16 + 5 * K + 3 * H),
	C("event_wakeups", "count", 17 + 5 * K + 3 * H),
	C("halt_poll_fd_checks", "count", 18 + 5 * K + 3 * H),
};

#define NVALUES (19 + 5 * K + 3 * H)

int vsched_vcpu_stat_descs(const struct vsched_stat_desc **d, unsigned *count,
			   unsigned *nvalues)
{
	if (!d || !count || !nvalues)
		return VSCHED_EINVAL;
	*d = descs;
	*count = sizeof(descs) / sizeof(descs[0]);
	*nvalues = NVALUES;
	return 0;
}

int vsched_vcpu_stat_values(const struct vsched_vcpu *v, uint64_t *val,
			    unsigned nvalues)
{
	struct vsched_vcpu_stats s = { .size = sizeof(s) };
	const struct vsched_halt_stats *h = &s.halt;
	unsigned i = 0;

	if (!v || !val || nvalues < NVALUES)
		return VSCHED_EINVAL;
	vsched_vcpu_read_stats(v, &s);
	const uint64_t c[15] = { s.entries, s.cancelled_entries, s.kicks_sent,
				 s.kicks_avoided, h->halt_wakeup, s.spurious_wakeups,
				 h->halt_successful_poll, h->halt_attempted_poll,
				 h->halt_poll_invalid, h->halt_poll_success_ns,
				 h->halt_poll_fail_ns, h->halt_wait_ns,
				 h->halt_poll_vetoed, h->idle_fastpath_skips,
				 h->idle_fastpath_stores };
	for (; i < 15; i++)
		val[i] = c[i];
	for (unsigned k = 0; k < K; k++) {
		val[15 + k] = s.kind[k].posted;
		val[15 + K + k] = s.kind[k].serviced;
		val[15 + 2 * K + k] = s.kind[k].coalesced;
		val[15 + 3 * K + k] = s.kind[k].cancelled_entries;
		val[15 + 4 * K + k] = s.kind[k].payloads_delivered;
	}
	for (unsigned b = 0; b < H; b++) {
		val[15 + 5 * K + b] = h->halt_poll_success_hist[b];
		val[15 + 5 * K + H + b] = h->halt_poll_fail_hist[b];
		val[15 + 5 * K + 2 * H + b] = h->halt_wait_hist[b];
	}
	val[15 + 5 * K + 3 * H] = s.wakeups;
	val[16 + 5 * K + 3 * H] = s.event_kicks;
	val[17 + 5 * K + 3 * H] = s.event_wakeups;
	val[18 + 5 * K + 3 * H] = s.halt_poll_fd_checks;
	return 0;
}

int vsched_vcpu_stats_write(const struct vsched_vcpu *v, FILE *f, unsigned format)
{
	uint64_t val[NVALUES];
	const unsigned n = sizeof(descs) / sizeof(descs[0]);
	const bool json = format == VSCHED_STATS_JSON;

	if (!v || !f || format > VSCHED_STATS_JSON)
		return VSCHED_EINVAL;
	vsched_vcpu_stat_values(v, val, NVALUES);
	if (json)
		fprintf(f, "{\"vcpu\": %u", v->id);
	for (unsigned i = 0; i < n; i++) {
		const struct vsched_stat_desc *d = &descs[i];
		if (d->size == 1) {
			if (json)
				fprintf(f, ", \"%s\": %llu", d->name,
					(unsigned long long)val[d->offset]);
			else
				fprintf(f, "vcpu%u.%s %llu\n", v->id, d->name,
					(unsigned long long)val[d->offset]);
			continue;
		}
		bool first = true;
		if (json)
			fprintf(f, ", \"%s\": {", d->name);
		for (unsigned j = 0; j < d->size; j++) {
			uint64_t x = val[d->offset + j];
			const char *kname = d->per_kind ? vsched_request_name(v->vm, j) : NULL;
			if (!x)
				continue;
			if (json) {
				if (kname)
					fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", kname,
						(unsigned long long)x);
				else
					fprintf(f, "%s\"%u\": %llu", first ? "" : ", ", j,
						(unsigned long long)x);
			} else if (kname) {
				fprintf(f, "vcpu%u.%s{kind=%s} %llu\n", v->id, d->name, kname,
					(unsigned long long)x);
			} else {
				fprintf(f, "vcpu%u.%s{log2=%u} %llu\n", v->id, d->name, j,
					(unsigned long long)x);
			}
			first = false;
		}
		if (json)
			fprintf(f, "}");
	}
	if (json)
		fprintf(f, "}\n");
	return ferror(f) ? -EIO : 0;
}
