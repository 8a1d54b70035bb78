/* SPDX-License-Identifier: MIT */
/*
 * vsched-vmm: the header its files share.
 *
 *   vmm.c          the VMM proper, what an adopter reads: setup (VM, request
 *                  table, vCPUs, timer service), the vCPU run loop, exit
 *                  handling (I/O ports, HLT), stop and teardown
 *   backend_kvm.c  real guests on /dev/kvm (kvm_run(), kvm_halt(): the
 *                  recipe of doc/adopting.md for a VMM that owns KVM_RUN)
 *   backend_sim.c  simulated vCPU threads running a C rendering of the guest
 *   guest.S        the built-in guests; guest.h is their ABI
 *   harness.c      one run of a workload: the kick race, the PMI storm, the
 *                  watchdog, the guests' checks and the figures
 *   report.c       the figures of a run: text table, JSON, the comparison of
 *                  --irqchip both
 *   main.c         the command line: options, backend choice, the runs
 *
 * Calls go one way: main.c -> harness.c, report.c; harness.c -> vmm.c and
 * the backends' report hooks (report, kvm_stat, dump, and kick for a lost
 * kick's second try) and governor hooks (gov_attach, gov_tick, gov_report); vmm.c -> a backend through struct backend. The
 * backends call back only vmm_now_ns() and the inline helpers below.
 */
#ifndef VMM_H
#define VMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <vsched/vsched.h>

#include "guest.h"

/* Request kinds of the VMM's table. */
enum {
	K_STOP = 0,
	K_PMU = 1, /* counter overflow: raises K_NMI (the PMI is an NMI) */
	K_NMI = 2,
	K_TIMER = 3, /* the guest timer's expiry */
	K_IPI = 4,
	K_PING = 5, /* the kick-race test's request */
};

/* How a guest entry ended. */
enum exit_kind {
	EXIT_AGAIN, /* kicked, cancelled, interrupt window: just re-enter */
	EXIT_HLT,
	EXIT_IO, /* OUT to `port` with `value` */
	EXIT_FAIL,
};

struct vexit {
	enum exit_kind kind;
	unsigned port;
	uint32_t value;
	int err; /* EXIT_FAIL: what went wrong */
};

struct vmm;

/* What the governor did in a run (--governor). */
struct gov_figures {
	uint64_t samples, decisions, cap_changes, cap_ns, window_ns;
	uint64_t halts, halts_polled, polls_failed;
	bool hist; /* the histogram model; else the sums */
};

struct vcpu {
	struct vmm *m;
	unsigned id;
	pthread_t thread;
	struct vsched_vcpu *vs;
	struct vsched_timer *timer;
	void *be; /* the backend's per-vCPU state */
	/* Exits by kind, and the guest's DONE. */
	uint64_t exits_io, exits_hlt, exits_again;
	_Atomic bool done;
	uint32_t status;
	int error;
	/* Counters of the VMM's handlers. */
	uint64_t nmis_sent, pmis, timer_retracted;
	/* The guest timer: arms so far and the current arm's deadline. */
	uint32_t timer_epoch;
	uint64_t timer_deadline;
	_Atomic uint64_t pings_serviced;
};

struct backend {
	const char *name;
	/* VM-wide setup: memory with the guest, irqchip. */
	int (*vm_init)(struct vmm *m);
	/* On the vCPU's thread: registers, the adapter. */
	int (*vcpu_init)(struct vcpu *c);
	/* One guest entry (service, inject, commit, run). */
	void (*run)(struct vcpu *c, struct vexit *e);
	/* The guest halted: block until an interrupt is owed. */
	int (*halt)(struct vcpu *c);
	/* From request handlers, on the vCPU's thread. */
	void (*queue_irq)(struct vcpu *c, unsigned vector);
	/* Take back a queued, not yet injected vector: 1 if it was queued. */
	int (*retract_irq)(struct vcpu *c, unsigned vector);
	int (*queue_nmi)(struct vcpu *c);
	/* The host `kick` callback. */
	void (*kick)(struct vcpu *c);
	/* Backend figures for the report (may be NULL). */
	void (*report)(struct vcpu *c, uint64_t *kicked, uint64_t *irqs,
		       uint64_t *windows, uint64_t *halts_skipped);
	/* KVM's own binary stats of a vCPU, by name (0 when missing). */
	uint64_t (*kvm_stat)(struct vcpu *c, const char *name);
	/* Print the vCPU's guest state after a timeout or a lost kick, once
	 * its thread has ended (may be NULL). */
	void (*dump)(struct vcpu *c);
	/* --governor (in-kernel irqchip): attach libvsched-kvm's halt-polling
	 * governor to the VM once every vCPU exists, tick it from the main
	 * thread's loop, read what it decided (may be NULL: no governor). */
	int (*gov_attach)(struct vmm *m);
	void (*gov_tick)(struct vmm *m, uint64_t now_ns);
	void (*gov_report)(struct vmm *m, struct gov_figures *out);
	void (*vcpu_fini)(struct vcpu *c);
	void (*vm_fini)(struct vmm *m);
};

struct vmm_options {
	const char *backend; /* "kvm", "sim", or NULL: kvm if /dev/kvm opens */
	bool kernel_irqchip;
	bool governor; /* the halt-polling governor steers KVM's (kernel irqchip) */
	unsigned vcpus;
	unsigned workload; /* WL_* bits */
	unsigned iterations;
	unsigned poll_policy; /* enum vsched_poll_policy */
	unsigned timer_cancel; /* enum vsched_timer_cancel */
	bool naive_order; /* NMI before PMU: the order the table check rejects */
	unsigned storm_us; /* PMI storm: a PMU post every this many us (0: off) */
	unsigned kick_race; /* tries of the kick race (WL_SPIN) */
	unsigned timeout_s;
	bool stats; /* print each vCPU's vsched stats (vsched_vcpu_stats_write) */
	bool json;
};

struct vmm {
	struct vmm_options o;
	const struct backend *be;
	void *be_vm; /* the backend's VM state */
	uint8_t *mem; /* guest memory (both backends use the same layout) */
	struct vsched_vm *vm;
	struct vsched_timer_service *ts;
	pthread_t ts_thread;
	struct vcpu vcpus[G_MAX_VCPUS];
	uint64_t tsc_per_us;
	bool ts_running; /* ts_thread was started */
	_Atomic bool stop;
	_Atomic unsigned ready; /* vCPU threads initialised, + 1 once released */
};

/* Pointers into guest memory. */
static inline volatile uint32_t *vmm_mailbox(struct vmm *m, unsigned off)
{
	return (volatile uint32_t *)(m->mem + G_MAILBOX + off);
}

static inline volatile uint32_t *vmm_pva(struct vmm *m, unsigned id,
					 unsigned off)
{
	return (volatile uint32_t *)(m->mem + G_PVA + id * G_PVA_SIZE + off);
}

/* ---- the VMM (vmm.c) ---- */

/* CLOCK_MONOTONIC in ns; any thread. */
uint64_t vmm_now_ns(void);

/* Set up a zeroed `m` to run `o` on `be`: the backend's VM, the vsched VM
 * and its request table, the guest's mailbox, each vCPU with its timer,
 * and the timer service with its thread. On the main thread, once. On
 * failure, what was set up stays recorded in `m` for vmm_fini(). */
int vmm_init(struct vmm *m, const struct vmm_options *o,
	     const struct backend *be);

/* Start the vCPU threads and wait until each has set up its backend vCPU
 * (vCPU 0 has then measured the TSC rate, which this writes to the
 * mailbox). The threads wait for vmm_release() before their first entry.
 * After vmm_init() succeeded; on failure the threads started are stopped
 * and joined. */
int vmm_start(struct vmm *m);

/* Let the vCPU threads enter their guests, together. After vmm_start(). */
void vmm_release(struct vmm *m);

/* Stop every vCPU: set `stop`, post K_STOP and kick each. Any thread, any
 * number of times. The vCPU threads return from their run loops; the
 * caller joins them (vcpus[i].thread) before vmm_fini(). */
void vmm_stop(struct vmm *m);

/* Undo vmm_init() however far it got: stop and join the timer service,
 * end each vCPU, destroy the VM and the backend's VM. On the main thread,
 * with no vCPU thread left running. Does not free `m`. */
void vmm_fini(struct vmm *m);

extern const struct backend vmm_kvm_backend;
extern const struct backend vmm_sim_backend;
/* True when /dev/kvm can be opened and runs guests. */
bool vmm_kvm_available(void);

/* ---- the harness (harness.c) ---- */

/* KVM's binary stats of a vCPU that the report shows with the in-kernel
 * irqchip, by name (harness_kvm_stats[k] is result.kvm[k]). */
#define NKVM_STATS 6
extern const char *const harness_kvm_stats[NKVM_STATS];

/* One run's figures and verdict. */
struct result {
	bool kernel_irqchip;
	bool governed; /* the governor ran (struct gov_figures gov) */
	struct gov_figures gov;
	double wall_s, cpu_s;
	unsigned nrt;
	double rt_median_us, rt_p99_us;
	uint64_t exits_io, exits_hlt, exits_again, kicked_exits, irqs, windows,
		halts_skipped;
	uint64_t polls_won, polls_attempted, kicks_sent, kicks_avoided,
		cancelled_entries, wakeups;
	uint64_t timers_fired, stale_cancelled, stale_delivered, retracted;
	uint64_t g_ipis, g_timers, g_stale, g_nmis, nmis_sent, pmis;
	uint64_t kvm[NKVM_STATS]; /* KVM's own, by harness_kvm_stats[] */
	unsigned race_tries, race_lost;
	/* The run's deadline ended the kick race before its tries (a host
	 * too slow or too loaded for them), none lost so far. */
	bool race_starved;
	double race_max_wait_us;
	bool timed_out, pass;
	char why[160];
	char *stats; /* --stats: vsched_vcpu_stats_write() of every vCPU */
};

/* Run the workload of `o` once on `be` and fill `r` (the caller frees
 * r->stats). Negative when the run could not be set up: the caller counts
 * it failed. On the main thread. */
int harness_run(const struct vmm_options *o, const struct backend *be,
		struct result *r);

/* ---- the report (report.c) ---- */

/* The command line's workload names and their bits (the policies' names
 * are the library's: vsched_poll_policy_name(), vsched_cancel_policy_name()). */
#define NWORKLOADS 6
extern const char *const report_workloads[NWORKLOADS];
extern const unsigned report_workload_bits[NWORKLOADS];

/* One run, as a text table or a JSON object on stdout. */
void report_table(const struct vmm_options *o, const char *be,
		  const struct result *r);
void report_json(const struct vmm_options *o, const char *be,
		 const struct result *r);
/* --irqchip both: every run of res[0 .. nrun-1] (res[i] named label[i])
 * against the in-kernel one with KVM's default polling, res[base], which has
 * round trips. */
void report_comparison(const struct vmm_options *o, const struct result *res,
		       const char *const *label, int nrun, int base);

#endif
