/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "internal.h"

static uint64_t rd(const _Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

int vsched_vcpu_read_stats(const struct vsched_vcpu *v, struct vsched_vcpu_stats *out)
{
	const struct vsched__table *t;
	uint64_t pend, posted = 0, avoided;

	if (!v || !out || out->size < sizeof(*out))
		return VSCHED_EINVAL;
	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	out->entries = rd(&v->vs.entries);
	out->cancelled_entries = rd(&v->vs.cancelled_entries);
	out->kicks_sent = rd(&v->ps.kicks_sent);
	out->wakeups = rd(&v->ps.wakeups);
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
	 * is deduced rather than paid for on the post path. Exact once the
	 * posters are quiescent; a post between its bit and its decision is
	 * counted as avoided until it decides. */
	avoided = posted - out->kicks_sent - out->wakeups;
	out->kicks_avoided = avoided > posted ? 0 : avoided;
	vsched__halt_stats(&v->sl, &out->halt);
	out->halt.halt_wakeup = out->wakeups;
	return 0;
}
