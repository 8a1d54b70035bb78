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
	       !r->kernel_irqchip ? vsched_poll_policy_name(o->poll_policy) :
	       r->governed	  ? "(KVM's, governed)" : "(KVM's)",
	       vsched_cancel_policy_name(o->timer_cancel), o->naive_order ? "naive" : "validated");
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
	if (o->workload & WL_SPIN) {
		if (r->race_starved)
			printf("  kick race           %u of %u tries (the run's deadline came "
			       "first), %u lost, longest wait %.1f us\n",
			       r->race_tries, o->kick_race, r->race_lost, r->race_max_wait_us);
		else
			printf("  kick race           %u tries, %u lost, longest wait %.1f us\n",
			       r->race_tries, r->race_lost, r->race_max_wait_us);
	}
	if (r->kernel_irqchip) {
		printf("  KVM stats          ");
		for (unsigned k = 0; k < NKVM_STATS; k++)
			printf(" %s %llu%s", harness_kvm_stats[k], (unsigned long long)r->kvm[k],
			       k + 1 < NKVM_STATS ? "," : "\n");
	}
	if (r->governed)
		printf("  governor            cap %lld ns (last window %llu ns), %llu "
		       "decisions in %llu samples, %llu cap changes; %llu halts, "
		       "%llu polls won, %llu lost (%s)\n",
		       r->gov.cap_ns == UINT64_MAX ? -1LL : (long long)r->gov.cap_ns,
		       (unsigned long long)r->gov.window_ns,
		       (unsigned long long)r->gov.decisions,
		       (unsigned long long)r->gov.samples,
		       (unsigned long long)r->gov.cap_changes,
		       (unsigned long long)r->gov.halts,
		       (unsigned long long)r->gov.halts_polled,
		       (unsigned long long)r->gov.polls_failed,
		       r->gov.hist ? "histograms" : "sums");
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
	       !r->kernel_irqchip ? vsched_poll_policy_name(o->poll_policy) :
	       r->governed	  ? "kvm-kernel-governed" : "kvm-kernel",
	       vsched_cancel_policy_name(o->timer_cancel), o->naive_order ? "naive" : "validated",
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
	printf("}");
	if (r->governed)
		printf(",\"governor\":{\"cap_ns\":%lld,\"window_ns\":%llu,"
		       "\"samples\":%llu,\"decisions\":%llu,\"cap_changes\":%llu,"
		       "\"halts\":%llu,\"polls_won\":%llu,\"polls_lost\":%llu,"
		       "\"model\":\"%s\"}",
		       r->gov.cap_ns == UINT64_MAX ? -1LL : (long long)r->gov.cap_ns,
		       (unsigned long long)r->gov.window_ns,
		       (unsigned long long)r->gov.samples,
		       (unsigned long long)r->gov.decisions,
		       (unsigned long long)r->gov.cap_changes,
		       (unsigned long long)r->gov.halts,
		       (unsigned long long)r->gov.halts_polled,
		       (unsigned long long)r->gov.polls_failed,
		       r->gov.hist ? "hist" : "sums");
	printf(",\"pass\":%s,\"why\":\"%s\"}\n", r->pass ? "true" : "false",
	       r->why);
}

/* KVM's poll time per round trip (us), won and lost, from its own stats
 * (harness_kvm_stats: 3 halt_poll_success_ns, 4 halt_poll_fail_ns). */
static double kvm_poll_us(const struct result *r, unsigned k)
{
	return r->kernel_irqchip && r->nrt ? r->kvm[k] / 1e3 / r->nrt : 0;
}

/* One run of the comparison against `k` (CPU `kcpu` s per 1000 round
 * trips): a JSON object, or a table row. */
static void comparison_row(const struct vmm_options *o, const char *label,
			   const struct result *r, const struct result *k,
			   double kcpu)
{
	double cpu = r->cpu_s * 1000.0 / r->nrt;

	if (o->json) {
		printf("{\"run\":\"%s\",\"median_us\":%.3f,\"p99_us\":%.3f,"
		       "\"cpu_s_per_1000_rt\":%.4f,\"median_ratio\":%.3f,"
		       "\"p99_ratio\":%.3f,\"cpu_ratio\":%.3f,"
		       "\"kvm_poll_won_us_per_rt\":%.3f,"
		       "\"kvm_poll_lost_us_per_rt\":%.3f}",
		       label, r->rt_median_us, r->rt_p99_us, cpu,
		       r->rt_median_us / k->rt_median_us, r->rt_p99_us / k->rt_p99_us,
		       cpu / kcpu, kvm_poll_us(r, 3), kvm_poll_us(r, 4));
		return;
	}
	printf("  %-24s %10.2f %10.2f %14.4f %7.2fx %7.2fx %7.2fx", label,
	       r->rt_median_us, r->rt_p99_us, cpu, r->rt_median_us / k->rt_median_us,
	       r->rt_p99_us / k->rt_p99_us, cpu / kcpu);
	if (r->kernel_irqchip)
		printf(" %11.2f %11.2f\n", kvm_poll_us(r, 3), kvm_poll_us(r, 4));
	else
		printf(" %11s %11s\n", "-", "-");
}

/* --irqchip both: each run against the in-kernel one with KVM's default
 * polling (res[base]), as a table with ratios or, with --json, one object:
 * "kernel" the base, "vsched" the userspace runs, "kernel_governed" the
 * governed in-kernel run if there was one. */
void report_comparison(const struct vmm_options *o, const struct result *res,
		       const char *const *label, int nrun, int base)
{
	const struct result *k = &res[base];
	double kcpu = k->cpu_s * 1000.0 / k->nrt;
	bool first = true;

	if (o->json)
		printf("{\"comparison\":\"each run against the in-kernel irqchip "
		       "with KVM's default polling\",\"kernel\":{\"median_us\":%.3f,"
		       "\"p99_us\":%.3f,\"cpu_s_per_1000_rt\":%.4f,"
		       "\"kvm_poll_won_us_per_rt\":%.3f,\"kvm_poll_lost_us_per_rt\":%.3f},"
		       "\"vsched\":[",
		       k->rt_median_us, k->rt_p99_us, kcpu, kvm_poll_us(k, 3),
		       kvm_poll_us(k, 4));
	else
		printf("\nIPI round trip, %u vCPUs, %u iterations: each run against "
		       "KVM's in-kernel irqchip with its default halt polling\n"
		       "  %-24s %10s %10s %14s %8s %8s %8s %11s %11s\n", o->vcpus,
		       o->iterations, "run", "median us", "p99 us",
		       "CPU s/1000 rt", "x med", "x p99", "x CPU",
		       "KVM won/rt", "KVM lost/rt");
	/* The userspace runs, then the governed one. */
	for (int i = 0; i < nrun; i++) {
		if (i == base || !res[i].nrt || res[i].kernel_irqchip)
			continue;
		if (o->json && !first)
			printf(",");
		comparison_row(o, label[i], &res[i], k, kcpu);
		first = false;
	}
	if (o->json)
		printf("]");
	for (int i = 0; i < nrun; i++) {
		if (i == base || !res[i].nrt || !res[i].kernel_irqchip)
			continue;
		if (o->json)
			printf(",\"kernel_governed\":");
		comparison_row(o, label[i], &res[i], k, kcpu);
	}
	if (o->json)
		printf("}\n");
	else
		printf("  %-24s %10.2f %10.2f %14.4f %8s %8s %8s %11.2f %11.2f\n",
		       label[base], k->rt_median_us, k->rt_p99_us, kcpu, "1", "1",
		       "1", kvm_poll_us(k, 3), kvm_poll_us(k, 4));
}
