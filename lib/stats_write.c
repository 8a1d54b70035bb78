/* SPDX-License-Identifier: MIT */
/* The text and JSON writer of a vCPU's statistics: a consumer of the public
 * descriptor API (lib/stats.c), kept out of the core's sources with its
 * <stdio.h>. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include <vsched/vsched.h>

#include "stats_desc.h"

/* Value j of a multi-valued statistic: `name{kind=K} x` or `name{log2=j} x`
 * in text, `"K": x` or `"j": x` inside the statistic's JSON object. */
static void write_one_of(FILE *f, bool json, unsigned id, const char *name,
			 const char *kname, unsigned j, uint64_t x, bool first)
{
	const unsigned long long u = x;

	if (json && kname)
		fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", kname, u);
	else if (json)
		fprintf(f, "%s\"%u\": %llu", first ? "" : ", ", j, u);
	else if (kname)
		fprintf(f, "vcpu%u.%s{kind=%s} %llu\n", id, name, kname, u);
	else
		fprintf(f, "vcpu%u.%s{log2=%u} %llu\n", id, name, j, u);
}

/* One statistic: a single value, or its non-zero values by kind or bucket. */
static void write_stat(FILE *f, bool json, const struct vsched_vcpu *v,
		       const struct vsched_stat_desc *d, const uint64_t *val)
{
	const unsigned id = (unsigned)vsched_vcpu_id(v);
	bool first = true;

	if (d->size == 1) {
		if (json)
			fprintf(f, ", \"%s\": %llu", d->name,
				(unsigned long long)val[0]);
		else
			fprintf(f, "vcpu%u.%s %llu\n", id, d->name,
				(unsigned long long)val[0]);
		return;
	}
	if (json)
		fprintf(f, ", \"%s\": {", d->name);
	for (unsigned j = 0; j < d->size; j++) {
		if (!val[j])
			continue;
		write_one_of(f, json, id, d->name,
			     d->per_kind ? vsched_request_name(vsched_vcpu_vm(v), j)
					 : NULL,
			     j, val[j], first);
		first = false;
	}
	if (json)
		fprintf(f, "}");
}

int vsched_vcpu_stats_write(const struct vsched_vcpu *v, FILE *f, unsigned format)
{
	uint64_t val[VSCHED__STAT_NVALUES];
	const struct vsched_stat_desc *d;
	unsigned n, nv;
	const bool json = format == VSCHED_STATS_JSON;

	if (!v || !f || format > VSCHED_STATS_JSON)
		return VSCHED_EINVAL;
	vsched_vcpu_stat_descs(&d, &n, &nv);
	vsched_vcpu_stat_values(v, val, nv);
	if (json)
		fprintf(f, "{\"vcpu\": %u", (unsigned)vsched_vcpu_id(v));
	for (unsigned i = 0; i < n; i++)
		write_stat(f, json, v, &d[i], &val[d[i].offset]);
	if (json)
		fprintf(f, "}\n");
	/* What is still in the stream's buffer has not been written: flush,
	 * so that a failed write is reported by this call, not lost. */
	return fflush(f) != 0 || ferror(f) ? -EIO : 0;
}
