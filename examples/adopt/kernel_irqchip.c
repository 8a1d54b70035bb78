/* SPDX-License-Identifier: MIT */
/*
 * Recipe: a VMM that keeps its interrupt controller in the kernel (QEMU,
 * Firecracker, Cloud Hypervisor, crosvm with KVM_CREATE_IRQCHIP). Its vCPUs
 * halt inside KVM_RUN, so vsched's block engine never runs; what vsched
 * gives it is the halt-polling governor of <vsched/kvmgov.h>, attached to
 * the VM and vCPU fds and ticked from the VMM's own event loop.
 * doc/adopting.md explains it; the test suite runs this file on /dev/kvm
 * (labels kvm and kvm-tcg) and it exits 77 (skipped) where there is none.
 *
 * The VMM here: two vCPUs in 64-bit long mode whose guest is `hlt` in a
 * loop, with an NMI handler that returns to it; a "device" (the main
 * thread's event loop) that sends each vCPU an NMI through
 * KVM_SIGNAL_MSI every so often, so each NMI ends one halt inside KVM.
 *
 * What it checks, on real KVM (function, never speed):
 *   1. attach: KVM_CAP_HALT_POLL is there, every vCPU's stats fd parses;
 *   2. the stats are read: the governor sees the guest's halts;
 *   3. the cap is set and read back through KVM's own stats
 *      (KVM_CHECK_EXTENSION(KVM_CAP_HALT_POLL) returns 1, not the value):
 *      with the cap at 0 KVM attempts no poll at all, with 1 ms it does;
 *   4. the policy decides and sets the cap from the stats, without error.
 * It prints the governed phases' figures; they depend on the machine.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <vsched/error.h>
#include <vsched/kvmgov.h>

#define NVCPUS 2
#define MEM_SIZE 0x200000 /* one 2 MiB page, identity mapped */
#define PML4 0x1000
#define PDPT 0x2000
#define PD 0x3000
#define GDT 0x4000
#define IDT 0x5000
#define CODE 0x8000
#define NMI_HANDLER 0x8010
#define STACKS 0x10000

struct vcpu {
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	int error;
};

static int kvm_fd = -1, vm_fd = -1, run_size;
static uint8_t *mem;
static struct vcpu vcpus[NVCPUS];
static struct kvm_cpuid2 *cpuid;
static atomic_bool stop;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int fail(const char *what)
{
	fprintf(stderr, "kernel_irqchip: %s: %s\n", what, strerror(errno));
	return -1;
}

/* The guest: `hlt; jmp .-1` at CODE, `iretq` at NMI_HANDLER; page tables,
 * a GDT with a 64-bit code segment, an IDT whose vector 2 (NMI) is a
 * 64-bit interrupt gate to the handler. */
static void build_guest(void)
{
	static const uint8_t code[] = { 0xf4, 0xeb, 0xfd };
	static const uint8_t handler[] = { 0x48, 0xcf };
	static const uint64_t gdt[3] = { 0, 0x00af9a000000ffffull,
					 0x00cf92000000ffffull };
	uint64_t *pml4 = (uint64_t *)(mem + PML4), *pdpt = (uint64_t *)(mem + PDPT);
	uint64_t *pd = (uint64_t *)(mem + PD);
	uint8_t *gate = mem + IDT + 2 * 16;
	uint16_t lo = NMI_HANDLER & 0xffff, hi = NMI_HANDLER >> 16, sel = 8;
	uint16_t type = 0x8e00; /* present, DPL 0, 64-bit interrupt gate */

	pml4[0] = PDPT | 3;
	pdpt[0] = PD | 3;
	pd[0] = 0 | 3 | 0x80; /* 2 MiB page */
	memcpy(mem + GDT, gdt, sizeof(gdt));
	memcpy(gate, &lo, 2);
	memcpy(gate + 2, &sel, 2);
	memcpy(gate + 4, &type, 2);
	memcpy(gate + 6, &hi, 2);
	memcpy(mem + CODE, code, sizeof(code));
	memcpy(mem + NMI_HANDLER, handler, sizeof(handler));
}

static void seg(struct kvm_segment *s, unsigned sel, unsigned type, bool code)
{
	*s = (struct kvm_segment){ .limit = 0xffffffff, .selector = sel,
				   .type = type, .present = 1, .db = !code,
				   .s = 1, .l = code, .g = 1 };
}

/* The VM with its in-kernel irqchip and guest memory. */
static int vm_init(void)
{
	struct kvm_userspace_memory_region r = { .memory_size = MEM_SIZE };
	int nent = 256;

	kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm_fd < 0)
		return 77;
	vm_fd = ioctl(kvm_fd, KVM_CREATE_VM, 0);
	if (vm_fd < 0)
		return fail("KVM_CREATE_VM");
	run_size = ioctl(kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (run_size < 0)
		return fail("KVM_GET_VCPU_MMAP_SIZE");
	(void)ioctl(vm_fd, KVM_SET_TSS_ADDR, 0xfffbd000ul);
	if (ioctl(vm_fd, KVM_CREATE_IRQCHIP, 0) != 0)
		return fail("KVM_CREATE_IRQCHIP");
	mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED)
		return fail("mmap");
	r.userspace_addr = (uintptr_t)mem;
	if (ioctl(vm_fd, KVM_SET_USER_MEMORY_REGION, &r) != 0)
		return fail("KVM_SET_USER_MEMORY_REGION");
	build_guest();
	cpuid = calloc(1, sizeof(*cpuid) + nent * sizeof(struct kvm_cpuid_entry2));
	if (!cpuid)
		return fail("calloc");
	cpuid->nent = nent;
	if (ioctl(kvm_fd, KVM_GET_SUPPORTED_CPUID, cpuid) != 0)
		return fail("KVM_GET_SUPPORTED_CPUID");
	return 0;
}

/* vCPU `i` in long mode at the guest's hlt loop. */
static int vcpu_init(unsigned i)
{
	struct vcpu *c = &vcpus[i];
	struct kvm_sregs s;
	struct kvm_regs r = { .rip = CODE, .rflags = 2,
			      .rsp = STACKS + (i + 1) * 0x1000 };

	c->fd = ioctl(vm_fd, KVM_CREATE_VCPU, (unsigned long)i);
	if (c->fd < 0)
		return fail("KVM_CREATE_VCPU");
	c->run = mmap(NULL, (size_t)run_size, PROT_READ | PROT_WRITE,
		      MAP_SHARED, c->fd, 0);
	if (c->run == MAP_FAILED)
		return fail("mmap kvm_run");
	if (ioctl(c->fd, KVM_SET_CPUID2, cpuid) != 0 ||
	    ioctl(c->fd, KVM_GET_SREGS, &s) != 0)
		return fail("KVM_SET_CPUID2/GET_SREGS");
	seg(&s.cs, 8, 0xb, true);
	seg(&s.ds, 0x10, 0x3, false);
	s.es = s.fs = s.gs = s.ss = s.ds;
	s.gdt.base = GDT;
	s.gdt.limit = 23;
	s.idt.base = IDT;
	s.idt.limit = 256 * 16 - 1;
	s.cr3 = PML4;
	s.cr4 = 0x20;
	s.cr0 = 0x80000031;
	s.efer = 0x500;
	if (ioctl(c->fd, KVM_SET_SREGS, &s) != 0 ||
	    ioctl(c->fd, KVM_SET_REGS, &r) != 0)
		return fail("KVM_SET_SREGS/REGS");
	if (i) { /* application processors start in wait-for-SIPI */
		struct kvm_mp_state mp = { .mp_state = KVM_MP_STATE_RUNNABLE };

		if (ioctl(c->fd, KVM_SET_MP_STATE, &mp) != 0)
			return fail("KVM_SET_MP_STATE");
	}
	return 0;
}

/* Everything vm_init() and vcpu_init() made, and the VMM's own stats fds
 * (the governor reads duplicates of them: they stay the VMM's to close),
 * once the vCPU threads are gone. */
static void vm_fini(const int *sfds)
{
	for (unsigned i = 0; i < NVCPUS; i++) {
		if (sfds && sfds[i] >= 0)
			close(sfds[i]);
		if (vcpus[i].run && vcpus[i].run != MAP_FAILED)
			munmap(vcpus[i].run, (size_t)run_size);
		if (vcpus[i].fd >= 0)
			close(vcpus[i].fd);
	}
	free(cpuid);
	if (mem && mem != MAP_FAILED)
		munmap(mem, MEM_SIZE);
	if (vm_fd >= 0)
		close(vm_fd);
	if (kvm_fd >= 0)
		close(kvm_fd);
}

static void on_kick(int sig)
{
	(void)sig; /* only interrupts KVM_RUN */
}

/* The VMM's own run loop, untouched by vsched: the halts never leave
 * KVM_RUN. A kick (immediate_exit, then SIGUSR1) ends it. */
static void *vcpu_thread(void *arg)
{
	struct vcpu *c = arg;

	while (!atomic_load(&stop)) {
		if (ioctl(c->fd, KVM_RUN, 0) != 0) {
			if (errno == EINTR)
				continue;
			c->error = errno;
			break;
		}
		if (c->run->exit_reason != KVM_EXIT_INTR) {
			fprintf(stderr, "kernel_irqchip: unexpected exit %u\n",
				c->run->exit_reason);
			c->error = EIO;
			break;
		}
	}
	return NULL;
}

/* The device: an NMI to vCPU `i` (an MSI in NMI delivery mode). */
static void send_nmi(unsigned i)
{
	struct kvm_msi msi = { .address_lo = 0xfee00000u | (i << 12),
			       .data = 0x400 };

	(void)ioctl(vm_fd, KVM_SIGNAL_MSI, &msi);
}

/* The VMM's event loop for `ms` milliseconds: an NMI to every vCPU each
 * `period_us`, and the governor's tick. */
static void event_loop(struct vsched_kvm_gov *gov, unsigned ms,
		       unsigned period_us)
{
	uint64_t end = now_ns() + ms * 1000000ull;
	struct timespec p = { 0, (long)period_us * 1000 };
	uint64_t now;

	while ((now = now_ns()) < end) {
		for (unsigned i = 0; i < NVCPUS; i++)
			send_nmi(i);
		vsched_kvm_gov_tick(gov, now); /* returns at once between samples */
		nanosleep(&p, NULL);
	}
}

static struct vsched_kvm_gov_stats stats(struct vsched_kvm_gov *gov)
{
	struct vsched_kvm_gov_stats st = { .size = sizeof(st) };

	vsched_kvm_gov_read_stats(gov, &st);
	return st;
}

static bool check(bool ok, const char *what)
{
	printf("kernel_irqchip: %s: %s\n", ok ? "ok" : "FAIL", what);
	return ok;
}

/* Set the cap, let every vCPU finish the halt it was in, then count KVM's
 * poll attempts over 200 ms of halts. Returns them, or -1 for no halts. */
static long long attempts_with_cap(struct vsched_kvm_gov *gov, uint64_t cap)
{
	struct vsched_kvm_gov_stats a, b;
	int rc = vsched_kvm_gov_set_cap(gov, cap, now_ns());

	if (rc) {
		fprintf(stderr, "kernel_irqchip: set cap: %s\n", vsched_strerror(rc));
		return -2;
	}
	event_loop(gov, 50, 100);
	a = stats(gov);
	event_loop(gov, 200, 100);
	b = stats(gov);
	printf("kernel_irqchip: cap %llu ns: %llu halts, %llu polls won, %llu "
	       "failed\n", (unsigned long long)cap,
	       (unsigned long long)(b.halts - a.halts),
	       (unsigned long long)(b.halts_polled - a.halts_polled),
	       (unsigned long long)(b.polls_failed - a.polls_failed));
	if (b.halts == a.halts)
		return -1;
	return (long long)(b.halts_polled - a.halts_polled + b.polls_failed -
			   a.polls_failed);
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_kick }; /* no SA_RESTART */
	int fds[NVCPUS], sfds[NVCPUS], rc;
	struct vsched_kvm_gov_config cfg = {
		.size = sizeof(cfg),
		.interval_ns = 20000000,    /* a sample every 20 ms */
		.min_change_ns = 3600ull * 1000000000ull, /* read-back: no policy moves */
	};
	struct vsched_kvm_gov *gov;
	bool ok = true;
	long long n0, n1;

	setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows even if killed */
	for (unsigned i = 0; i < NVCPUS; i++)
		vcpus[i].fd = sfds[i] = -1; /* nothing to close yet */
	rc = vm_init();
	if (rc == 77) {
		printf("kernel_irqchip: no /dev/kvm here: skipped\n");
		return 77;
	}
	if (rc)
		return 1;
	sigaction(SIGUSR1, &sa, NULL);
	for (unsigned i = 0; i < NVCPUS; i++) {
		if (vcpu_init(i))
			return 1;
		fds[i] = vcpus[i].fd;
		/* The VMM's own stats fd of each vCPU, opened before it runs:
		 * KVM_GET_STATS_FD is a vCPU ioctl and waits while the vCPU is
		 * in KVM_RUN, halted or not. */
		sfds[i] = ioctl(fds[i], KVM_GET_STATS_FD, 0);
	}
	/* 1. Attach before the vCPUs run: the governor opens the stats fds. */
	rc = vsched_kvm_gov_create(vm_fd, fds, NVCPUS, &cfg, &gov);
	if (rc == -EOPNOTSUPP || rc == -ENOTTY || rc == -EINVAL ||
	    rc == -ENODATA) {
		/* kvmgov.h: no KVM_CAP_HALT_POLL (before 5.8), no stats fd
		 * (before 5.14), or stats without the halt counters */
		printf("kernel_irqchip: this kernel has no KVM_CAP_HALT_POLL or "
		       "no halt stats (%s): skipped\n", vsched_strerror(rc));
		vm_fini(sfds);
		return 77;
	}
	if (!check(rc == 0, "attach"))
		return 1;
	printf("kernel_irqchip: attached; model %s\n",
	       stats(gov).model == VSCHED_KVM_GOV_HIST ? "histograms" : "sums");
	for (unsigned i = 0; i < NVCPUS; i++)
		pthread_create(&vcpus[i].thread, NULL, vcpu_thread, &vcpus[i]);
	printf("kernel_irqchip: vCPUs running\n");

	/* 2, 3. The stats are read, and the cap read back through them. */
	n0 = attempts_with_cap(gov, 0);
	n1 = attempts_with_cap(gov, 1000000);
	ok &= check(n0 >= 0 && n1 >= 0, "the governor sees the guest's halts");
	ok &= check(n0 == 0, "cap 0: KVM attempted no poll");
	ok &= check(n1 > 0, "cap 1 ms: KVM polled");
	vsched_kvm_gov_destroy(gov);

	/* 4. The policy at work: short halts, then long ones. This governor
	 * attaches while the vCPUs run: from the stats fds opened before. */
	cfg.min_change_ns = 100000000;
	cfg.stats_fds = sfds[0] >= 0 && sfds[1] >= 0 ? sfds : NULL;
	if (!cfg.stats_fds) {
		fprintf(stderr, "kernel_irqchip: KVM_GET_STATS_FD: %s\n", strerror(errno));
		return 1;
	}
	rc = vsched_kvm_gov_create(vm_fd, fds, NVCPUS, &cfg, &gov);
	ok &= check(rc == 0, "attach again");
	if (rc == 0) {
		struct vsched_kvm_gov_stats st;

		event_loop(gov, 400, 20);
		st = stats(gov);
		printf("kernel_irqchip: NMIs every 20 us: cap %llu ns (window %llu)\n",
		       (unsigned long long)st.cap_ns, (unsigned long long)st.window_ns);
		event_loop(gov, 600, 5000);
		st = stats(gov);
		printf("kernel_irqchip: NMIs every 5 ms: cap %llu ns (window %llu)\n",
		       (unsigned long long)st.cap_ns, (unsigned long long)st.window_ns);
		vsched_kvm_gov_stats_write(gov, stdout, VSCHED_STATS_TEXT);
		ok &= check(st.decisions > 0 && st.cap_changes > 0 &&
				    st.cap_ns != UINT64_MAX,
			    "the policy decided and set the cap");
		ok &= check(!st.read_errors && !st.set_errors, "no errors");
		vsched_kvm_gov_destroy(gov);
	}

	printf("kernel_irqchip: stopping the vCPUs\n");
	atomic_store(&stop, true);
	for (unsigned i = 0; i < NVCPUS; i++) {
		__atomic_store_n(&vcpus[i].run->immediate_exit, 1, __ATOMIC_SEQ_CST);
		pthread_kill(vcpus[i].thread, SIGUSR1);
		pthread_join(vcpus[i].thread, NULL);
		ok &= check(!vcpus[i].error, "vCPU ran until stopped");
	}
	vm_fini(sfds);
	return ok ? 0 : 1;
}
