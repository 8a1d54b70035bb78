/* SPDX-License-Identifier: MIT */
/*
 * vsched-vmm's report: a run's figures (struct result, from harness.c) as
 * a text table or one JSON object, and for --irqchip both the comparison
 * of each vsched run with the in-kernel irqchip's. Everything goes to
 * stdout; the option names here are also the command line's (main.c).
 */
#include <stdio.h>

#include "vmm.h"

const char *const report_workloads[NWORKLOADS] = {
	"pingpong", "timer", "pmi", "mixed", "kick-race", "fault"
};
const unsigned report_workload_bits[NWORKLOADS] = {
	WL_PING, WL_TIMER, WL_PMI, WL_PING | WL_TIMER | WL_PMI, WL_SPIN, WL_FAULT
};
const char *const report_polls[4] = { "none", "fixed", "kvm", "adaptive" };
const char *const report_cancels[3] = { "keep", "cancel", "adaptive" };

static const char *workload_name(unsigned bits)
{
	for (unsigned i = 0; i < NWORKLOADS; i++)
		if (report_workload_bits[i] == bits)
			return report_workloads[i];
	return "?";
}

void report_table(const struct vmm_options *o, const char *be,
		  const struct result *r)
{
	printf("vsched-vmm: backend %s, irqchip %s, %u vCPUs, workload %s, "
	       "%u iterations, poll %s, timer-cancel %s, order %s\n",
	       be, r->kernel_irqchip ? "kernel" : "user", o->vcpus,
	       workload_name(o->workload), o->iterations,
	       r->kernel_irqchip ? "(KVM's)" : report_polls[o->poll_policy],
	       report_cancels[o->timer_cancel], o->naive_order ? "naive" : "validated");
	if (r->nrt)
		printf("  round trip          median %.2f us, p99 %.2f us (%u)\n",
		       r->rt_median_us, r->rt_p99_us, r->nrt);
	printf("  host CPU            %.3f s in %.3f s wall", r->cpu_s, r->wall_s);
	if (r->nrt)
		printf(", %.3f s per 1000 round trips", r->cpu_s * 1000.0 / r->nrt);
	printf("\n  exits               io %llu, hlt %llu, re-entries %llu "
	       "(kicked %llu), irqs injected %llu, window requests %llu\n",
	       (unsigned long long)r->exits_io, (unsigned long long)r->exits_hlt,
	       (unsigned long long)r->exits_again,
	       (unsigned long long)r->kicked_exits, (unsigned long long)r->irqs,
	       (unsigned long long)r->windows);
	printf("  vsched              polls won %llu of %llu, kicks sent %llu, "
	       "avoided %llu, cancelled entries %llu, wakeups %llu\n",
	       (unsigned long long)r->polls_won,
	       (unsigned long long)r->polls_attempted,
	       (unsigned long long)r->kicks_sent,
	       (unsigned long long)r->kicks_avoided,
	       (unsigned long long)r->cancelled_entries,
	       (unsigned long long)r->wakeups);
	if (o->workload & WL_TIMER)
		printf("  timers              fired %llu, stale cancelled %llu "
		       "(+%llu taken back from the IRR), stale delivered %llu; "
		       "guest: %llu current, %llu stale\n",
		       (unsigned long long)r->timers_fired,
		       (unsigned long long)r->stale_cancelled,
		       (unsigned long long)r->retracted,
		       (unsigned long long)r->stale_delivered,
		       (unsigned long long)r->g_timers,
		       (unsigned long long)r->g_stale);
	if (o->workload & (WL_PMI | WL_PING))
		printf("  guest               IPIs %llu, NMIs %llu (injected %llu, "
		       "PMIs %llu)\n",
		       (unsigned long long)r->g_ipis, (unsigned long long)r->g_nmis,
		       (unsigned long long)r->nmis_sent, (unsigned long long)r->pmis);
	if (o->workload & WL_SPIN)
		printf("  kick race           %u tries, %u lost, longest wait %.1f us\n",
		       r->race_tries, r->race_lost, r->race_max_wait_us);
	if (r->kernel_irqchip) {
		printf("  KVM stats          ");
		for (unsigned k = 0; k < NKVM_STATS; k++)
			printf(" %s %llu%s", harness_kvm_stats[k], (unsigned long long)r->kvm[k],
			       k + 1 < NKVM_STATS ? "," : "\n");
	}
	printf("  checks              %s%s%s\n", r->pass ? "PASS" : "FAIL",
	       r->pass ? "" : ": ", r->pass ? "" : r->why);
}

void report_json(const struct vmm_options *o, const char *be,
		 const struct result *r)
{
	printf("{\"backend\":\"%s\",\"irqchip\":\"%s\",\"vcpus\":%u,"
	       "\"workload\":\"%s\",\"iterations\":%u,\"poll\":\"%s\","
	       "\"timer_cancel\":\"%s\",\"order\":\"%s\","
	       "\"round_trip_us\":{\"n\":%u,\"median\":%.3f,\"p99\":%.3f},"
	       "\"host_cpu_s\":%.4f,\"wall_s\":%.4f,\"cpu_s_per_1000_rt\":%.4f,"
	       "\"exits\":{\"io\":%llu,\"hlt\":%llu,\"reentry\":%llu,"
	       "\"kicked\":%llu,\"irqs_injected\":%llu,\"window_requests\":%llu},"
	       "\"vsched\":{\"polls_won\":%llu,\"polls_attempted\":%llu,"
	       "\"kicks_sent\":%llu,\"kicks_avoided\":%llu,"
	       "\"cancelled_entries\":%llu,\"wakeups\":%llu,"
	       "\"timers_fired\":%llu,\"stale_timers_cancelled\":%llu,"
	       "\"stale_timers_delivered\":%llu,\"timer_irqs_retracted\":%llu},"
	       "\"guest\":{\"ipis\":%llu,\"timers_current\":%llu,"
	       "\"timers_stale\":%llu,\"nmis\":%llu,\"nmis_injected\":%llu},"
	       "\"kick_race\":{\"tries\":%u,\"lost\":%u,\"max_wait_us\":%.1f},"
	       "\"kvm\":{",
	       be, r->kernel_irqchip ? "kernel" : "user", o->vcpus,
	       workload_name(o->workload), o->iterations,
	       r->kernel_irqchip ? "kvm-kernel" : report_polls[o->poll_policy],
	       report_cancels[o->timer_cancel], o->naive_order ? "naive" : "validated",
	       r->nrt, r->rt_median_us, r->rt_p99_us, r->cpu_s, r->wall_s,
	       r->nrt ? r->cpu_s * 1000.0 / r->nrt : 0.0,
	       (unsigned long long)r->exits_io, (unsigned long long)r->exits_hlt,
	       (unsigned long long)r->exits_again,
	       (unsigned long long)r->kicked_exits, (unsigned long long)r->irqs,
	       (unsigned long long)r->windows, (unsigned long long)r->polls_won,
	       (unsigned long long)r->polls_attempted,
	       (unsigned long long)r->kicks_sent,
	       (unsigned long long)r->kicks_avoided,
	       (unsigned long long)r->cancelled_entries,
	       (unsigned long long)r->wakeups,
	       (unsigned long long)r->timers_fired,
	       (unsigned long long)r->stale_cancelled,
	       (unsigned long long)r->stale_delivered,
	       (unsigned long long)r->retracted,
	       (unsigned long long)r->g_ipis, (unsigned long long)r->g_timers,
	       (unsigned long long)r->g_stale, (unsigned long long)r->g_nmis,
	       (unsigned long long)r->nmis_sent, r->race_tries, r->race_lost,
	       r->race_max_wait_us);
	for (unsigned k = 0; k < NKVM_STATS; k++)
		printf("\"%s\":%llu%s", harness_kvm_stats[k], (unsigned long long)r->kvm[k],
		       k + 1 < NKVM_STATS ? "," : "");
	printf("},\"pass\":%s,\"why\":\"%s\"}\n", r->pass ? "true" : "false",
	       r->why);
}

/* --irqchip both: each vsched run against the in-kernel one (the last),
 * as a table with ratios or, with --json, one object. */
void report_comparison(const struct vmm_options *o, const struct result *res,
		       const unsigned *poll, int nrun)
{
	const struct result *k = &res[nrun - 1];
	double kcpu = k->cpu_s * 1000.0 / k->nrt;

	if (o->json)
		printf("{\"comparison\":\"user irqchip through vsched against "
		       "the in-kernel irqchip\",\"kernel\":{\"median_us\":%.3f,"
		       "\"p99_us\":%.3f,\"cpu_s_per_1000_rt\":%.4f},\"vsched\":[",
		       k->rt_median_us, k->rt_p99_us, kcpu);
	else
		printf("\nIPI round trip, %u vCPUs, %u iterations: vsched "
		       "(userspace irqchip) against KVM's in-kernel irqchip\n"
		       "  %-22s %10s %10s %14s %8s %8s %8s\n", o->vcpus,
		       o->iterations, "run", "median us", "p99 us",
		       "CPU s/1000 rt", "x med", "x p99", "x CPU");
	for (int i = 0; i < nrun - 1; i++) {
		const struct result *r = &res[i];
		double cpu = r->nrt ? r->cpu_s * 1000.0 / r->nrt : 0;

		if (!r->nrt)
			continue;
		if (o->json)
			printf("%s{\"poll\":\"%s\",\"median_us\":%.3f,"
			       "\"p99_us\":%.3f,\"cpu_s_per_1000_rt\":%.4f,"
			       "\"median_ratio\":%.3f,\"p99_ratio\":%.3f,"
			       "\"cpu_ratio\":%.3f}", i ? "," : "", report_polls[poll[i]],
			       r->rt_median_us, r->rt_p99_us, cpu,
			       r->rt_median_us / k->rt_median_us,
			       r->rt_p99_us / k->rt_p99_us, cpu / kcpu);
		else
			printf("  vsched, poll %-9s %10.2f %10.2f %14.4f %7.2fx "
			       "%7.2fx %7.2fx\n", report_polls[poll[i]], r->rt_median_us,
			       r->rt_p99_us, cpu, r->rt_median_us / k->rt_median_us,
			       r->rt_p99_us / k->rt_p99_us, cpu / kcpu);
	}
	if (o->json)
		printf("]}\n");
	else
		printf("  %-22s %10.2f %10.2f %14.4f %8s %8s %8s\n",
		       "in-kernel, KVM polling", k->rt_median_us, k->rt_p99_us,
		       kcpu, "1", "1", "1");
}
