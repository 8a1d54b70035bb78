/* SPDX-License-Identifier: MIT */
/*
 * libvsched-kvm: a vsched vCPU on a KVM vCPU fd. Public API only; see
 * <vsched/kvm.h> for the protocol and test/model/kvm.pml for its model.
 */
#include <errno.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vsched/alloc.h>
#include <vsched/block.h>
#include <vsched/error.h>
#include <vsched/kvm.h>
#include <vsched/request.h>
#include <vsched/timer.h>
#include <vsched/vcpu.h>

#include "../abi.h"

struct vsched_kvm_vcpu {
	struct vsched_vcpu *vcpu;
	/* The VM's allocator, copied: detach may come after
	 * vsched_vm_destroy(), which frees the VM and the one it holds. */
	struct vsched_allocator alloc;
	struct kvm_run *run;
	int fd;
	int signo;
	bool kernel_irqchip;
	/* The thread to signal: the one that entered last (pre_run), the
	 * attaching one before. Stored by the vCPU thread before its commit
	 * publishes IN_GUEST, loaded by a kicker that saw IN_GUEST. Its
	 * kernel thread id, not its pthread_t: a kick sent late, after that
	 * thread ended and was joined, gets ESRCH, where glibc hands the
	 * pthread_t of a joined thread to the next thread created. */
	pid_t tid;
	pid_t pid;
	/* Queued vectors (an IRR): vCPU thread only. */
	uint64_t irr[4];
	/* An NMI was queued since the last entry (ends a halt). */
	bool nmi_owed;
	/* KVM_INTERRUPT was issued and no KVM_RUN has run since: kvm_run's
	 * ready_for_interrupt_injection is stale until then, and a second
	 * KVM_INTERRUPT would replace the first (a lost interrupt). */
	bool injected;
	/* What the vCPU thread is doing with the adapter: BUSY_PRE inside
	 * vsched_kvm_pre_run() (its service may run handlers), BUSY_RUN from
	 * its successful commit to vsched_kvm_post_run() (IN_GUEST as far
	 * as vsched knows), BUSY_HALT inside vsched_kvm_halt(). Stored by
	 * the vCPU thread only; detach, on any thread, refuses an adapter in
	 * use rather than free it under its thread (a check, not a lock:
	 * the contract orders them). */
	_Atomic unsigned char busy;
	struct vsched_kvm_stats st;
};

enum { IDLE, BUSY_PRE, BUSY_RUN, BUSY_HALT };

/* One counter of kv->st, from the vCPU thread, its only writer: a whole
 * store that vsched_kvm_read_stats() may load on another thread (no locked
 * instruction, as the core's vsched__count()). */
static void count(uint64_t *c)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
}

/* The calling thread's kernel id, cached per thread: pre_run runs at
 * every entry, and gettid is a syscall. A fork's child is the forking
 * thread's copy, cache included, under a new id: the child handler,
 * registered before the first id is cached, forgets it (else the child's
 * kicks went to the parent's id: tgkill found no such thread, and a vCPU
 * in KVM_RUN was never kicked). */
static __thread pid_t cached_tid;

static void forget_tid(void)
{
	cached_tid = 0;
}

static void register_forget(void)
{
	(void)pthread_atfork(NULL, NULL, forget_tid);
}

static pid_t self_tid(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	if (!cached_tid) {
		(void)pthread_once(&once, register_forget);
		cached_tid = (pid_t)syscall(SYS_gettid);
	}
	return cached_tid;
}

static void kick_handler(int sig)
{
	(void)sig; /* only interrupts KVM_RUN; immediate_exit is already set */
}

/* A signal that can be the kick: not 0, SIGKILL or SIGSTOP (no handler),
 * nor a fault signal (an empty handler that returns turns every later
 * fault into an endless re-fault; a VMM's own handler of one is its crash
 * handler), nor SIGTRAP or SIGSYS (a debugger's, seccomp's), nor one the
 * process itself is sent with a meaning: SIGABRT (abort()), SIGXCPU and
 * SIGXFSZ (its CPU and file size limits; with the kick's empty handler a
 * limit would pass unnoticed). */
static bool kick_signo_ok(int signo)
{
	switch (signo) {
	case SIGKILL: case SIGSTOP: case SIGSEGV: case SIGBUS: case SIGILL:
	case SIGFPE: case SIGTRAP: case SIGSYS: case SIGABRT: case SIGXCPU:
	case SIGXFSZ:
		return false;
	default:
		return signo > 0 && signo < NSIG;
	}
}

int vsched_kvm_signal_install(int signo)
{
	struct sigaction sa;

	if (!kick_signo_ok(signo))
		return VSCHED_EINVAL;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = kick_handler; /* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	return sigaction(signo, &sa, NULL) == 0 ? 0 : -errno;
}

/* A kick with the default action would end the process, an ignored one
 * would never interrupt KVM_RUN: the VMM must have a handler installed. */
static int check_handler(int signo)
{
	struct sigaction old;

	if (sigaction(signo, NULL, &old) != 0)
		return VSCHED_EINVAL;
	/* sa_handler and sa_sigaction share storage: with SA_SIGINFO a NULL
	 * sa_sigaction is SIG_DFL to the kernel (and SIG_IGN's value is
	 * ignore), so test the one pointer whichever way it was set. */
	uintptr_t h = (old.sa_flags & SA_SIGINFO) ? (uintptr_t)old.sa_sigaction
						  : (uintptr_t)old.sa_handler;
	if (h == (uintptr_t)SIG_DFL || h == (uintptr_t)SIG_IGN)
		return VSCHED_ENOHANDLER;
	/* A one-shot handler (SA_RESETHAND) is the default action from the
	 * second signal on: the second kick would end the process. */
	if (old.sa_flags & SA_RESETHAND)
		return VSCHED_ENOHANDLER;
	return 0;
}

int vsched_kvm_attach(struct vsched_vcpu *vcpu, int vcpu_fd,
		      struct kvm_run *run, const struct vsched_kvm_config *cfg,
		      struct vsched_kvm_vcpu **out)
{
	const struct vsched_allocator *a;
	struct vsched_kvm_config c = { .size = sizeof(c) };
	struct vsched_kvm_vcpu *kv;
	int signo = SIGUSR1, rc;

	if (!vcpu || vcpu_fd < 0 || !run || !out)
		return VSCHED_EINVAL;
	if (cfg && vsched__struct_in(&c, sizeof(c), cfg,
				     VSCHED__SIZE_TO(struct vsched_kvm_config,
						     kernel_irqchip)))
		return VSCHED_EINVAL;
	if (c.signo)
		signo = c.signo;
	if (!kick_signo_ok(signo))
		return VSCHED_EINVAL;
	rc = check_handler(signo);
	if (rc)
		return rc;
	/* Before the vCPU runs (kvm.h): a destroyed vCPU has nothing to run,
	 * and one in the guest or inside vsched_vcpu_block() is its thread's
	 * (the kick would go to the attaching thread). */
	rc = vsched_vcpu_mode(vcpu);
	if (rc == VSCHED_MODE_DESTROYED)
		return VSCHED_EDESTROYED;
	if (rc != VSCHED_MODE_OUTSIDE_GUEST)
		return rc < 0 ? rc : VSCHED_ESTATE;
	a = vsched_vm_allocator(vsched_vcpu_vm(vcpu));
	if (!a)
		return VSCHED_EINVAL;
	kv = a->alloc(sizeof(*kv), 64, a->ctx);
	if (!kv)
		return VSCHED_ENOMEM;
	memset(kv, 0, sizeof(*kv));
	atomic_init(&kv->busy, IDLE);
	kv->vcpu = vcpu;
	kv->alloc = *a;
	kv->run = run;
	kv->fd = vcpu_fd;
	kv->signo = signo;
	kv->kernel_irqchip = c.kernel_irqchip;
	kv->tid = self_tid();
	kv->pid = getpid();
	kv->st.size = sizeof(kv->st);
	*out = kv;
	return 0;
}

int vsched_kvm_detach(struct vsched_kvm_vcpu *kv)
{
	struct vsched_allocator a;

	if (!kv)
		return VSCHED_EINVAL;
	/* Its thread is between pre_run and post_run, or in a halt: freed,
	 * the adapter would be written by that thread's next step. */
	if (atomic_load_explicit(&kv->busy, memory_order_acquire) != IDLE)
		return VSCHED_ESTATE;
	a = kv->alloc; /* not read from the memory being freed */
	a.free(kv, sizeof(*kv), a.ctx);
	return 0;
}

int vsched_kvm_kick(struct vsched_kvm_vcpu *kv)
{
	if (!kv)
		return VSCHED_EINVAL;
	/* Order matters: immediate_exit first, then the signal. A signal that
	 * arrives before KVM_RUN is lost (its handler runs in userspace), but
	 * then KVM_RUN's entry sees immediate_exit; one that arrives inside
	 * KVM_RUN forces the exit. The vCPU cleared immediate_exit before it
	 * published IN_GUEST, which we observed, so this store is the later
	 * one. */
	__atomic_store_n(&kv->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_tgkill, kv->pid, __atomic_load_n(&kv->tid, __ATOMIC_RELAXED),
		kv->signo);
	return 0;
}

int vsched_kvm_queue_irq(struct vsched_kvm_vcpu *kv, unsigned vector)
{
	/* With KVM's in-kernel irqchip nothing here injects a queued vector
	 * (inject() returns at once), and an owed one would end every halt
	 * at once: the VMM raises its lines with KVM_IRQ_LINE/KVM_SIGNAL_MSI. */
	if (!kv || kv->kernel_irqchip)
		return VSCHED_EINVAL;
	if (vector < 32 || vector > 255)
		return VSCHED_ERANGE;
	kv->irr[vector / 64] |= UINT64_C(1) << (vector % 64);
	return 0;
}

int vsched_kvm_retract_irq(struct vsched_kvm_vcpu *kv, unsigned vector)
{
	uint64_t bit = UINT64_C(1) << (vector % 64);

	if (!kv)
		return VSCHED_EINVAL;
	if (vector < 32 || vector > 255)
		return VSCHED_ERANGE;
	if (!(kv->irr[vector / 64] & bit))
		return 0;
	kv->irr[vector / 64] &= ~bit;
	return 1;
}

int vsched_kvm_queue_nmi(struct vsched_kvm_vcpu *kv)
{
	if (!kv)
		return VSCHED_EINVAL;
	if (ioctl(kv->fd, KVM_NMI) != 0)
		return -errno;
	count(&kv->st.nmis_injected);
	kv->nmi_owed = true;
	return 0;
}

static bool irr_any(const struct vsched_kvm_vcpu *kv)
{
	return kv->irr[0] | kv->irr[1] | kv->irr[2] | kv->irr[3];
}

bool vsched_kvm_irq_owed(const struct vsched_kvm_vcpu *kv)
{
	return kv && (irr_any(kv) || kv->nmi_owed);
}

/* Highest queued vector (x86 priority), removed from the IRR. */
static unsigned take_highest(struct vsched_kvm_vcpu *kv)
{
	for (int w = 3; w >= 0; w--) {
		if (kv->irr[w]) {
			unsigned b = 63u - (unsigned)__builtin_clzll(kv->irr[w]);
			kv->irr[w] &= ~(UINT64_C(1) << b);
			return (unsigned)w * 64 + b;
		}
	}
	return 0;
}

/* Userspace irqchip: inject when the guest can take an interrupt now,
 * otherwise ask KVM to exit as soon as it can. */
static int inject(struct vsched_kvm_vcpu *kv)
{
	struct kvm_run *run = kv->run;

	if (kv->kernel_irqchip)
		return 0;
	if (irr_any(kv) && !kv->injected && run->ready_for_interrupt_injection &&
	    run->if_flag) {
		struct kvm_interrupt irq = { .irq = take_highest(kv) };

		if (ioctl(kv->fd, KVM_INTERRUPT, &irq) != 0) {
			int e = -errno;

			vsched_kvm_queue_irq(kv, irq.irq); /* still owed */
			return e;
		}
		count(&kv->st.irqs_injected);
		kv->injected = true;
	}
	run->request_interrupt_window = irr_any(kv);
	if (run->request_interrupt_window)
		count(&kv->st.window_requests);
	return 0;
}

int vsched_kvm_pre_run(struct vsched_kvm_vcpu *kv)
{
	int rc;

	if (!kv)
		return VSCHED_EINVAL;
	if (atomic_load_explicit(&kv->busy, memory_order_relaxed) != IDLE)
		return VSCHED_ESTATE; /* an entry open, or a handler of pre_run or halt */
	atomic_store_explicit(&kv->busy, BUSY_PRE, memory_order_relaxed);
	rc = vsched_service(kv->vcpu);
	if (rc >= 0)
		rc = inject(kv);
	if (rc < 0)
		goto idle;
	/* Clear before the commit publishes IN_GUEST: a kicker that sees
	 * IN_GUEST stores 1 after this (test/model/kvm.pml, CLEAR_LATE). */
	__atomic_store_n(&kv->run->immediate_exit, 0, __ATOMIC_RELAXED);
	/* The kick signals the thread that runs KVM_RUN, whichever attached:
	 * stored before the commit, as immediate_exit is. */
	__atomic_store_n(&kv->tid, self_tid(), __ATOMIC_RELAXED);
	rc = vsched_vcpu_enter(kv->vcpu);
	if (rc == VSCHED_ENTRY_CANCELLED)
		rc = VSCHED_KVM_CANCELLED;
	if (rc != 0)
		goto idle;
	kv->nmi_owed = false; /* KVM delivers it at this entry */
	count(&kv->st.runs);
	/* Only now may post_run close the entry: from a handler of the
	 * service above, the guest was not entered yet. */
	atomic_store_explicit(&kv->busy, BUSY_RUN, memory_order_relaxed);
	return 0;
idle:
	/* Release: a detach that sees IDLE sees this thread done with it. */
	atomic_store_explicit(&kv->busy, IDLE, memory_order_release);
	return rc;
}

int vsched_kvm_post_run(struct vsched_kvm_vcpu *kv, int run_ret)
{
	/* KVM_RUN gives 0 or -1 with an errno (1..4095): anything else is
	 * not its result, and is refused before the entry is closed. */
	uint32_t reason;

	if (!kv || run_ret > 0 || run_ret < -4095)
		return VSCHED_EINVAL;
	if (atomic_load_explicit(&kv->busy, memory_order_relaxed) != BUSY_RUN)
		return VSCHED_ESTATE;
	kv->injected = false; /* kvm_run's injection fields are fresh again */
	vsched_vcpu_exit(kv->vcpu);
	if (run_ret == -EINTR)
		count(&kv->st.kicked_exits);
	reason = kv->run->exit_reason;
	atomic_store_explicit(&kv->busy, IDLE, memory_order_release);
	if (run_ret == -EINTR)
		return VSCHED_KVM_KICKED;
	if (run_ret < 0)
		return run_ret;
	/* KVM's exit reasons are small numbers: one at or above the
	 * adapter's own results would be taken for them (or, above INT_MAX,
	 * for an errno). `run` is not the vCPU's kvm_run mapping. */
	if (reason >= VSCHED_KVM_KICKED)
		return VSCHED_EINVAL;
	return (int)reason;
}

int vsched_kvm_run(struct vsched_kvm_vcpu *kv)
{
	int rc = vsched_kvm_pre_run(kv);

	if (rc != 0)
		return rc;
	rc = ioctl(kv->fd, KVM_RUN, 0);
	return vsched_kvm_post_run(kv, rc == 0 ? 0 : -errno);
}

int vsched_kvm_halt(struct vsched_kvm_vcpu *kv, uint64_t deadline_ns)
{
	int reason = 0, rc;

	if (!kv)
		return VSCHED_EINVAL;
	/* Between pre_run and post_run the vCPU is IN_GUEST: KVM_RUN has not
	 * returned, so there is no halt to handle (and nothing is counted);
	 * nor inside a halt (from a request handler of its service). */
	if (atomic_load_explicit(&kv->busy, memory_order_relaxed) != IDLE)
		return VSCHED_ESTATE;
	atomic_store_explicit(&kv->busy, BUSY_HALT, memory_order_relaxed);
	if (vsched_kvm_irq_owed(kv)) {
		/* Owed from an earlier service (the guest had IF=0): the
		 * guest must not sleep on it. */
		count(&kv->st.halts);
		count(&kv->st.halts_skipped);
		goto out;
	}
	for (bool counted = false;;) {
		rc = vsched_vcpu_block(kv->vcpu, deadline_ns);
		if (rc < 0) {
			reason = rc; /* refused: counted only once handled */
			goto out;
		}
		if (!counted) {
			count(&kv->st.halts);
			counted = true;
		}
		reason = rc;
		if (rc == VSCHED_WAKE_DEADLINE)
			vsched_vcpu_fire_timers(kv->vcpu);
		rc = vsched_service(kv->vcpu);
		if (rc < 0) {
			reason = rc;
			goto out;
		}
		if (vsched_kvm_irq_owed(kv) || reason == VSCHED_WAKE_DEADLINE ||
		    reason == VSCHED_WAKE_SIGNAL || reason == VSCHED_WAKE_FD ||
		    reason == VSCHED_WAKE_EVENT)
			goto out;
	}
out:
	atomic_store_explicit(&kv->busy, IDLE, memory_order_release);
	return reason;
}

int vsched_kvm_read_stats(const struct vsched_kvm_vcpu *kv,
			  struct vsched_kvm_stats *out)
{
	struct vsched_kvm_stats snap = { .size = sizeof(snap) };

	if (!kv)
		return VSCHED_EINVAL;
	/* Each counter loaded whole (the vCPU thread stores them meanwhile),
	 * then the extensible-struct copy of the snapshot. */
#define LOAD(f) snap.f = __atomic_load_n(&kv->st.f, __ATOMIC_RELAXED)
	LOAD(runs);
	LOAD(kicked_exits);
	LOAD(irqs_injected);
	LOAD(nmis_injected);
	LOAD(window_requests);
	LOAD(halts_skipped);
	LOAD(halts);
#undef LOAD
	_Static_assert(sizeof(snap) == sizeof(size_t) + 7 * sizeof(uint64_t),
		       "vsched_kvm_read_stats() loads every counter");
	return vsched__struct_out(out, &snap, sizeof(snap));
}

struct vsched_vcpu *vsched_kvm_vcpu(const struct vsched_kvm_vcpu *kv)
{
	return kv ? kv->vcpu : NULL;
}
