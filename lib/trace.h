/* SPDX-License-Identifier: MIT */
/* USDT probes (provider "vsched"), compiled out where <sys/sdt.h> is
 * missing. A probe is a nop until a tracer attaches; doc/tracing.md lists
 * them with a bpftrace one-liner each. */
#ifndef VSCHED__TRACE_H
#define VSCHED__TRACE_H

#ifdef VSCHED_WITH_SDT
#include <sys/sdt.h>
#define VSCHED__TRACE1(n, a) DTRACE_PROBE1(vsched, n, a)
#define VSCHED__TRACE2(n, a, b) DTRACE_PROBE2(vsched, n, a, b)
#define VSCHED__TRACE3(n, a, b, c) DTRACE_PROBE3(vsched, n, a, b, c)
#else
#define VSCHED__TRACE1(n, a) do { } while (0)
#define VSCHED__TRACE2(n, a, b) do { } while (0)
#define VSCHED__TRACE3(n, a, b, c) do { } while (0)
#endif

#endif /* VSCHED__TRACE_H */
