/* SPDX-License-Identifier: MIT */
/*
 * vsched-vmm: a small reference VMM on vsched. Runs the built-in guests
 * (guest.S) with N vCPUs on /dev/kvm, or on simulated vCPU threads where
 * there is no /dev/kvm, with a userspace interrupt controller whose halts,
 * IPIs, timers and NMIs all go through vsched; or, for comparison, on
 * KVM's in-kernel irqchip and KVM's own halt polling.
 *
 * This file is the command line: the options, the backend's choice and the
 * runs (harness.c), each printed by report.c. The VMM itself is vmm.c.
 *
 * usage: vsched-vmm [options]   (--help lists them)
 * exit status: 0 every run passed, 1 one failed, 2 bad usage, 77 the
 * backend asked for is not available here
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm.h"

/* The policies a run gets unless told. */
#define DEFAULT_POLL VSCHED_POLL_ADAPTIVE
#define DEFAULT_CANCEL VSCHED_CANCEL_CANCEL

/* What the command line asks for beyond the options of one run. */
struct cmdline {
	struct vmm_options o;
	const char *irqchip; /* user, kernel or both */
	bool poll_given;
};

static int pick(const char *arg, const char *const *names, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(arg, names[i]) == 0)
			return (int)i;
	return -1;
}

/* "a|b|c": every name `name_of` knows, into buf. */
static const char *names_of(const char *(*name_of)(unsigned), char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (unsigned i = 0; name_of(i) && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? "|" : "",
				       name_of(i));
	return buf;
}

static void usage(FILE *f)
{
	char polls[128], cancels[128];

	fprintf(f,
		"usage: vsched-vmm [options]\n"
		"  --backend kvm|sim|auto     vCPUs on /dev/kvm or simulated (auto: kvm if it opens)\n"
		"  --irqchip user|kernel|both userspace irqchip through vsched (default), KVM's\n"
		"                             in-kernel one with KVM's halt polling, or both in turn\n"
		"  --governor                 in-kernel irqchip: libvsched-kvm's governor sets KVM's\n"
		"                             halt-poll cap (KVM_CAP_HALT_POLL); with both, the\n"
		"                             in-kernel run is made with and without it\n"
		"  --workload pingpong|timer|pmi|mixed|kick-race|fault   (default pingpong;\n"
		"                             fault: KVM only, the guest triple-faults at once)\n"
		"  --vcpus N                  1..%d (default 2)\n"
		"  --iterations N             per vCPU (default 2000, at most %d)\n"
		"  --poll %s     vsched's halt-poll policy (default %s)\n"
		"  --timer-cancel %s  stale timer expiries (default %s)\n"
		"  --order validated|naive    request order (naive: NMI before PMU)\n"
		"  --storm US                 PMI storm: a PMU request to each vCPU every US us\n"
		"  --tries N                  kick-race tries (default 100000)\n"
		"  --timeout S                watchdog for the whole run (default 120)\n"
		"  --json                     one JSON object per run\n"
		"  --stats                    also each vCPU's vsched stats (text, or JSON with --json)\n",
		G_MAX_VCPUS, G_MAX_ITERS,
		names_of(vsched_poll_policy_name, polls, sizeof(polls)),
		vsched_poll_policy_name(DEFAULT_POLL),
		names_of(vsched_cancel_policy_name, cancels, sizeof(cancels)),
		vsched_cancel_policy_name(DEFAULT_CANCEL));
}

static const struct option options[] = {
	{ "backend", required_argument, NULL, 'b' },
	{ "irqchip", required_argument, NULL, 'i' },
	{ "governor", no_argument, NULL, 'g' },
	{ "workload", required_argument, NULL, 'w' },
	{ "vcpus", required_argument, NULL, 'n' },
	{ "iterations", required_argument, NULL, 'N' },
	{ "poll", required_argument, NULL, 'p' },
	{ "timer-cancel", required_argument, NULL, 'c' },
	{ "order", required_argument, NULL, 'o' },
	{ "storm", required_argument, NULL, 's' },
	{ "tries", required_argument, NULL, 't' },
	{ "timeout", required_argument, NULL, 'T' },
	{ "json", no_argument, NULL, 'j' },
	{ "stats", no_argument, NULL, 'S' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

/* The long name of option `opt`, for a message. */
static const char *opt_name(int opt)
{
	for (const struct option *o = options; o->name; o++)
		if (o->val == opt)
			return o->name;
	return "?";
}

/* `arg`, all of it a decimal number from min to max, into *out; else a
 * message naming the option, and -1. (strtoul alone takes "2abc" for 2,
 * "-1" for ULONG_MAX, "010" for 8 with base 0, and the (unsigned) cast
 * made 4294967298 vCPUs 2.) */
static int number(int opt, const char *arg, unsigned long min,
		  unsigned long max, unsigned *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (*arg < '0' || *arg > '9' || *end || errno || v < min || v > max) {
		fprintf(stderr, "vsched-vmm: --%s %s: not a number from %lu to %lu\n",
			opt_name(opt), arg, min, max);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

/* A value that is none of the option's names: say which. */
static int unknown(int opt, const char *arg)
{
	fprintf(stderr, "vsched-vmm: --%s %s: unknown value\n", opt_name(opt), arg);
	return -1;
}

/* Apply option `opt` with argument `arg`: 0, 1 for --help, -1 for a bad
 * one (with a message on stderr naming it). */
static int set_option(struct cmdline *cl, int opt, const char *arg)
{
	struct vmm_options *o = &cl->o;
	int v;

	switch (opt) {
	case 'b':
		o->backend = strcmp(arg, "auto") ? arg : NULL;
		break;
	case 'i':
		cl->irqchip = arg;
		break;
	case 'g':
		o->governor = true;
		break;
	case 'w':
		if ((v = pick(arg, report_workloads, NWORKLOADS)) < 0)
			return unknown(opt, arg);
		o->workload = report_workload_bits[v];
		break;
	case 'n':
		return number(opt, arg, 1, G_MAX_VCPUS, &o->vcpus);
	case 'N':
		return number(opt, arg, 1, G_MAX_ITERS, &o->iterations);
	case 'p':
		/* One this VMM was built to know (plan[] is sized by it). */
		if ((v = vsched_poll_policy_parse(arg)) < 0 ||
		    v >= VSCHED_POLL_NPOLICIES)
			return unknown(opt, arg);
		o->poll_policy = (unsigned)v;
		cl->poll_given = true;
		break;
	case 'c':
		if ((v = vsched_cancel_policy_parse(arg)) < 0)
			return unknown(opt, arg);
		o->timer_cancel = (unsigned)v;
		break;
	case 'o':
		if (strcmp(arg, "naive") && strcmp(arg, "validated"))
			return unknown(opt, arg);
		o->naive_order = strcmp(arg, "naive") == 0;
		break;
	case 's':
		/* At most 1 s: the run waits out the storm's last sleep. */
		return number(opt, arg, 0, 1000000, &o->storm_us);
	case 't':
		/* At least one try: 0 would pass a race never run. */
		return number(opt, arg, 1, UINT_MAX, &o->kick_race);
	case 'T':
		return number(opt, arg, 1, UINT_MAX, &o->timeout_s);
	case 'j':
		o->json = true;
		break;
	case 'S':
		o->stats = true;
		break;
	case 'h':
		return 1;
	default:
		return -1;
	}
	return 0;
}

/* Parse the options into `cl`: 0, 1 for --help, -1 on a bad one. */
static int parse_options(int argc, char **argv, struct cmdline *cl)
{
	struct vmm_options *o = &cl->o;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		rc = set_option(cl, opt, optarg);
		if (rc)
			return rc;
	}
	if (optind != argc) {
		fprintf(stderr, "vsched-vmm: %s: not an option\n", argv[optind]);
		return -1;
	}
	if (strcmp(cl->irqchip, "user") && strcmp(cl->irqchip, "kernel") &&
	    strcmp(cl->irqchip, "both"))
		return unknown('i', cl->irqchip);
	if (o->governor && strcmp(cl->irqchip, "user") == 0) {
		fprintf(stderr, "vsched-vmm: --governor steers KVM's in-kernel "
				"irqchip: --irqchip kernel or both\n");
		return -1;
	}
	/* Ping-pong pairs vCPUs: with one there is nothing to run or check. */
	if ((o->workload & WL_PING) && o->vcpus < 2) {
		fprintf(stderr, "vsched-vmm: the pingpong and mixed workloads "
				"need 2 vCPUs or more\n");
		return -1;
	}
	return 0;
}

#ifndef VMM_WITH_KVM
bool vmm_kvm_available(void)
{
	return false;
}
#endif

/* The backend asked for (auto: kvm if /dev/kvm runs guests), or the exit
 * status when there is none: 77 not available here, 2 it cannot run what
 * was asked, -1 an unknown name. */
static int choose_backend(struct cmdline *cl, const struct backend **be)
{
	struct vmm_options *o = &cl->o;
	const bool chosen = o->backend != NULL;

	if (!chosen)
		o->backend = vmm_kvm_available() ? "kvm" : "sim";
	if (strcmp(o->backend, "kvm") == 0) {
#ifdef VMM_WITH_KVM
		if (!vmm_kvm_available()) {
			fprintf(stderr, "vsched-vmm: /dev/kvm is not usable here; "
					"use --backend sim\n");
			return 77;
		}
		*be = &vmm_kvm_backend;
#else
		fprintf(stderr, "vsched-vmm: built without the KVM backend\n");
		return 77;
#endif
	} else if (strcmp(o->backend, "sim") == 0) {
		*be = &vmm_sim_backend;
		/* Asked for what only KVM runs, with no backend named: KVM is
		 * not available here (a skip), not a bad command line. */
		if (!chosen && ((o->workload & WL_FAULT) || strcmp(cl->irqchip, "user"))) {
			fprintf(stderr, "vsched-vmm: %s needs /dev/kvm, which is not "
					"usable here\n",
				o->workload & WL_FAULT ? "the fault workload"
						       : "the in-kernel irqchip");
			return 77;
		}
		if (o->workload & WL_FAULT) {
			fprintf(stderr, "vsched-vmm: the fault workload needs "
					"real guest code: --backend kvm\n");
			return 2;
		}
		if (strcmp(cl->irqchip, "user")) {
			fprintf(stderr, "vsched-vmm: the sim backend has only the "
					"userspace irqchip\n");
			return 2;
		}
	} else {
		return unknown('b', o->backend);
	}
	return 0;
}

/* One run of the plan: at most one per poll policy, then the in-kernel
 * irqchip's two. */
#define MAX_RUNS (VSCHED_POLL_NPOLICIES + 2)
struct run_plan {
	unsigned poll; /* vsched's policy (userspace irqchip) */
	bool kernel_irqchip, governor;
};

/* The runs: the userspace irqchip through vsched, with the policy given
 * or, for --irqchip both without --poll, with each policy; then KVM's
 * in-kernel irqchip with KVM's own halt polling, and with --governor
 * governed (--irqchip kernel --governor: governed only). At most MAX_RUNS go
 * to plan[]; returns how many, and in *base the in-kernel default one (-1:
 * none). */
static int plan_runs(const struct cmdline *cl, struct run_plan *plan, int *base)
{
	bool both = strcmp(cl->irqchip, "both") == 0;
	int nrun = 0;

	*base = -1;
	if (strcmp(cl->irqchip, "kernel")) {
		bool each = both && !cl->poll_given;

		for (unsigned p = 0; p < VSCHED_POLL_NPOLICIES; p++)
			if (each ? true : p == cl->o.poll_policy)
				plan[nrun++] = (struct run_plan){ p, false, false };
	}
	if (strcmp(cl->irqchip, "user") && (both || !cl->o.governor)) {
		*base = nrun;
		plan[nrun++] = (struct run_plan){ cl->o.poll_policy, true, false };
	}
	if (cl->o.governor)
		plan[nrun++] = (struct run_plan){ cl->o.poll_policy, true, true };
	return nrun;
}

/* A run's name in the comparison. */
static const char *run_label(const struct run_plan *p, char *buf, size_t len)
{
	if (p->kernel_irqchip)
		return p->governor ? "in-kernel, governed" : "in-kernel, KVM polling";
	snprintf(buf, len, "vsched, poll %s", vsched_poll_policy_name(p->poll));
	return buf;
}

int main(int argc, char **argv)
{
	struct cmdline cl = {
		.o = {
			.vcpus = 2,
			.workload = WL_PING,
			.iterations = 2000,
			.poll_policy = DEFAULT_POLL,
			.timer_cancel = DEFAULT_CANCEL,
			.kick_race = 100000,
			.timeout_s = 120,
		},
		.irqchip = "user",
	};
	struct vmm_options *o = &cl.o;
	const struct backend *be = NULL;
	bool all_pass = true;
	/* --irqchip both: each poll policy (or the one given), then kernel
	 * (and kernel governed). */
	struct result res[MAX_RUNS];
	struct run_plan plan[MAX_RUNS];
	char names[MAX_RUNS][40];
	const char *label[MAX_RUNS];
	int nrun, base, rc;

	rc = parse_options(argc, argv, &cl);
	if (rc > 0) {
		usage(stdout);
		return 0;
	}
	if (rc == 0)
		rc = choose_backend(&cl, &be);
	if (rc < 0) {
		usage(stderr);
		return 2;
	}
	if (rc > 0)
		return rc;
	if (o->workload & WL_SPIN)
		o->iterations = 1;
	if (o->governor && strcmp(be->name, "kvm")) {
		fprintf(stderr, "vsched-vmm: --governor needs --backend kvm\n");
		return 2;
	}
	nrun = plan_runs(&cl, plan, &base);
	for (int k = 0; k < nrun; k++) {
		o->kernel_irqchip = plan[k].kernel_irqchip;
		o->governor = plan[k].governor;
		o->poll_policy = plan[k].poll;
		label[k] = run_label(&plan[k], names[k], sizeof(names[k]));
		if (harness_run(o, be, &res[k]) < 0)
			res[k].pass = false;
		if (o->json)
			report_json(o, be->name, &res[k]);
		else
			report_table(o, be->name, &res[k]);
		if (res[k].stats) {
			fputs(res[k].stats, stdout);
			free(res[k].stats);
			res[k].stats = NULL;
		}
		all_pass &= res[k].pass;
	}
	if (strcmp(cl.irqchip, "both") == 0 && base >= 0 && res[base].nrt)
		report_comparison(o, res, label, nrun, base);
	return all_pass ? 0 : 1;
}
