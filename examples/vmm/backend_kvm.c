/* SPDX-License-Identifier: MIT */
/*
 * vsched-vmm's KVM backend: the built-in guest (guest.S) in 64-bit long
 * mode on /dev/kvm, one thread per vCPU, through libvsched-kvm. The VMM
 * builds what firmware would: identity page tables, a GDT with a 64-bit
 * code segment, an IDT of 64-bit interrupt gates, and the vCPU's control
 * registers with paging and long mode already on.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vsched/kvm.h>
#include <vsched/kvmgov.h>

#include "vmm.h"

/* The guest image, assembled at build time (guest.S -> guest.bin). */
extern const uint8_t _binary_guest_bin_start[];
extern const uint8_t _binary_guest_bin_end[];

struct kvm_vm_state {
	int kvm, vm;
	int run_size;
	struct kvm_cpuid2 *cpuid;
	struct vsched_kvm_gov *gov; /* --governor */
};

struct kvm_vcpu_state {
	int fd;
	struct kvm_run *run;
	struct vsched_kvm_vcpu *kv;
	int stats_fd;
};

bool vmm_kvm_available(void)
{
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	bool ok;

	if (fd < 0)
		return false;
	ok = ioctl(fd, KVM_GET_API_VERSION, 0) == KVM_API_VERSION;
	close(fd);
	return ok;
}

static int fail(const char *what)
{
	int e = errno ? errno : EIO;

	fprintf(stderr, "vsched-vmm: %s: %s\n", what, strerror(e));
	return -e;
}

/* A 64-bit interrupt gate: 16 bytes, offset split 16/16/32, IST 0. */
static void set_gate(uint8_t *mem, unsigned vector, uint32_t handler)
{
	uint8_t *g = mem + G_IDT + vector * 16;
	uint16_t lo = handler & 0xffff, hi = handler >> 16, sel = 0x08;
	uint16_t type = 0x8e00; /* present, DPL 0, 64-bit interrupt gate */

	memset(g, 0, 16); /* offset 63:32 and the reserved word */
	memcpy(g, &lo, 2);
	memcpy(g + 2, &sel, 2);
	memcpy(g + 4, &type, 2);
	memcpy(g + 6, &hi, 2);
}

/* Identity map of guest memory: PML4[0] -> PDPT[0] -> PD of 2 MiB pages. */
static void build_page_tables(uint8_t *mem)
{
	uint64_t *pml4 = (uint64_t *)(mem + G_PML4);
	uint64_t *pdpt = (uint64_t *)(mem + G_PDPT);
	uint64_t *pd = (uint64_t *)(mem + G_PD);
	const uint64_t p = 1, rw = 2, ps = 0x80;

	pml4[0] = G_PDPT | p | rw;
	pdpt[0] = G_PD | p | rw;
	for (uint64_t i = 0; i < G_MEM_SIZE / 0x200000; i++)
		pd[i] = (i * 0x200000) | p | rw | ps;
}

static int kvm_vm_init(struct vmm *m)
{
	struct kvm_vm_state *s = calloc(1, sizeof(*s));
	size_t len = (size_t)(_binary_guest_bin_end - _binary_guest_bin_start);
	const uint32_t *hdr = (const uint32_t *)_binary_guest_bin_start;
	static const uint64_t gdt[3] = {
		0, 0x00af9a000000ffffull, /* 0x08: code, 64-bit (L=1, D=0) */
		0x00cf92000000ffffull, /* 0x10: data, flat */
	};
	struct kvm_userspace_memory_region region;
	int nent = 128;

	if (!s)
		return -ENOMEM;
	s->kvm = s->vm = -1;
	m->be_vm = s;
	/* The kick signal (SIGUSR1, the adapter's default) needs a handler
	 * that interrupts KVM_RUN; this VMM has none of its own. */
	if (vsched_kvm_signal_install(SIGUSR1) != 0)
		return fail("sigaction SIGUSR1");
	s->kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (s->kvm < 0)
		return fail("open /dev/kvm");
	s->vm = ioctl(s->kvm, KVM_CREATE_VM, 0);
	if (s->vm < 0)
		return fail("KVM_CREATE_VM");
	s->run_size = ioctl(s->kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (s->run_size <= 0)
		return fail("KVM_GET_VCPU_MMAP_SIZE");
	/* Intel needs a TSS area below 4 GiB for its real-mode handling. */
	(void)ioctl(s->vm, KVM_SET_TSS_ADDR, 0xfffbd000ul);
	m->mem = mmap(NULL, G_MEM_SIZE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m->mem == MAP_FAILED) {
		m->mem = NULL;
		return fail("mmap guest memory");
	}
	region = (struct kvm_userspace_memory_region){
		.slot = 0,
		.guest_phys_addr = 0,
		.memory_size = G_MEM_SIZE,
		.userspace_addr = (uintptr_t)m->mem,
	};
	if (ioctl(s->vm, KVM_SET_USER_MEMORY_REGION, &region) != 0)
		return fail("KVM_SET_USER_MEMORY_REGION");
	if (m->o.kernel_irqchip && ioctl(s->vm, KVM_CREATE_IRQCHIP, 0) != 0)
		return fail("KVM_CREATE_IRQCHIP");
	/* The CPUID the guest sees: all KVM supports (x2APIC included). */
	for (;;) {
		s->cpuid = calloc(1, sizeof(*s->cpuid) +
					     nent * sizeof(struct kvm_cpuid_entry2));
		if (!s->cpuid)
			return -ENOMEM;
		s->cpuid->nent = nent;
		if (ioctl(s->kvm, KVM_GET_SUPPORTED_CPUID, s->cpuid) == 0)
			break;
		free(s->cpuid);
		s->cpuid = NULL;
		if (errno != E2BIG || nent > 4096)
			return fail("KVM_GET_SUPPORTED_CPUID");
		nent *= 2;
	}
	/* The image, its page tables, GDT and IDT (every vector traps to
	 * bad_handler but the three the guest expects). */
	if (len > G_STACKS - G_CODE)
		return -EFBIG;
	memcpy(m->mem + G_CODE, _binary_guest_bin_start, len);
	memcpy(m->mem + G_GDT, gdt, sizeof(gdt));
	build_page_tables(m->mem);
	for (unsigned v = 0; v < 256; v++)
		set_gate(m->mem, v, hdr[4]);
	set_gate(m->mem, 2, hdr[1]);
	set_gate(m->mem, IPI_VEC, hdr[2]);
	set_gate(m->mem, TIMER_VEC, hdr[3]);
	return 0;
}

/* The hidden parts of a segment register, matching its GDT entry: code
 * is 64-bit (L=1, D=0), data flat. */
static void seg(struct kvm_segment *sg, unsigned sel, unsigned type, bool code)
{
	*sg = (struct kvm_segment){
		.base = 0, .limit = 0xffffffff, .selector = sel, .type = type,
		.present = 1, .dpl = 0, .db = !code, .s = 1, .l = code, .g = 1,
	};
}

static int kvm_vcpu_init(struct vcpu *c)
{
	struct vmm *m = c->m;
	struct kvm_vm_state *s = m->be_vm;
	struct kvm_vcpu_state *v = calloc(1, sizeof(*v));
	struct vsched_kvm_config cfg = {
		.size = sizeof(cfg),
		.kernel_irqchip = m->o.kernel_irqchip,
	};
	const uint32_t *hdr = (const uint32_t *)_binary_guest_bin_start;
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	int rc, khz;

	if (!v)
		return -ENOMEM;
	c->be = v;
	v->fd = v->stats_fd = -1;
	v->fd = ioctl(s->vm, KVM_CREATE_VCPU, (unsigned long)c->id);
	if (v->fd < 0)
		return fail("KVM_CREATE_VCPU");
	v->run = mmap(NULL, (size_t)s->run_size, PROT_READ | PROT_WRITE,
		      MAP_SHARED, v->fd, 0);
	if (v->run == MAP_FAILED) {
		v->run = NULL;
		return fail("mmap kvm_run");
	}
	if (ioctl(v->fd, KVM_SET_CPUID2, s->cpuid) != 0)
		return fail("KVM_SET_CPUID2");
	if (ioctl(v->fd, KVM_GET_SREGS, &sregs) != 0)
		return fail("KVM_GET_SREGS");
	seg(&sregs.cs, 0x08, 0xb, true);
	seg(&sregs.ds, 0x10, 0x3, false);
	sregs.es = sregs.fs = sregs.gs = sregs.ss = sregs.ds;
	sregs.gdt.base = G_GDT;
	sregs.gdt.limit = 3 * 8 - 1;
	sregs.idt.base = G_IDT;
	sregs.idt.limit = 256 * 16 - 1;
	sregs.cr3 = G_PML4;
	sregs.cr4 = 0x20; /* PAE */
	sregs.cr0 = 0x80000031; /* PG, NE, ET, PE */
	sregs.efer = 0x500; /* LME, LMA */
	if (ioctl(v->fd, KVM_SET_SREGS, &sregs) != 0)
		return fail("KVM_SET_SREGS");
	memset(&regs, 0, sizeof(regs));
	regs.rflags = 0x2; /* IF=0 */
	regs.rip = hdr[0];
	regs.rsp = G_STACKS + (c->id + 1) * 0x1000;
	regs.rdi = G_PVA + c->id * G_PVA_SIZE;
	if (ioctl(v->fd, KVM_SET_REGS, &regs) != 0)
		return fail("KVM_SET_REGS");
	if (m->o.kernel_irqchip && c->id != 0) {
		/* Application processors start in wait-for-SIPI. */
		struct kvm_mp_state mp = { .mp_state = KVM_MP_STATE_RUNNABLE };

		if (ioctl(v->fd, KVM_SET_MP_STATE, &mp) != 0)
			return fail("KVM_SET_MP_STATE");
	}
	khz = ioctl(v->fd, KVM_GET_TSC_KHZ, 0);
	if (khz > 0 && c->id == 0)
		m->tsc_per_us = (uint64_t)khz / 1000;
#ifdef KVM_GET_STATS_FD
	v->stats_fd = ioctl(v->fd, KVM_GET_STATS_FD, 0);
#endif
	rc = vsched_kvm_attach(c->vs, v->fd, v->run, &cfg, &v->kv);
	if (rc < 0) {
		fprintf(stderr, "vsched-vmm: vsched_kvm_attach: %s\n",
			vsched_strerror(rc));
		return rc;
	}
	return 0;
}

/* Why KVM stopped the guest, in one line a reader can act on. */
static const char *exit_cause(const struct kvm_run *r)
{
	if (r->exit_reason == KVM_EXIT_SHUTDOWN)
		return "the guest triple-faulted: it raised an exception it could "
		       "not deliver (its IDT, GDT, page tables or stack are broken)";
	if (r->exit_reason == KVM_EXIT_FAIL_ENTRY)
		return "the CPU refused VM entry: the vCPU's control registers or "
		       "segments are inconsistent (hardware reason above)";
	switch (r->internal.suberror) {
	case KVM_INTERNAL_ERROR_EMULATION:
		return "KVM could not emulate the instruction at rip; a "
		       "software-assisted KVM (kvm_pvm) emulates no 32-bit "
		       "protected-mode iret and no software int n";
	case KVM_INTERNAL_ERROR_SIMUL_EX:
		return "an exception while delivering another: the guest's IDT "
		       "or stack is broken";
	case KVM_INTERNAL_ERROR_DELIVERY_EV:
		return "a VM exit during event delivery that KVM cannot resume";
	default:
		return "an internal KVM error (see the suberror and data words)";
	}
}

/* On KVM_EXIT_INTERNAL_ERROR, KVM_EXIT_FAIL_ENTRY or KVM_EXIT_SHUTDOWN:
 * what KVM reports, where the guest was, the instruction's bytes (KVM's
 * own copy when it gives one, else guest memory, which the identity map
 * makes rip's physical address) and the cause. The vCPU's thread. */
static void explain_exit(struct vcpu *c, const struct kvm_vcpu_state *v)
{
	const struct kvm_run *r = v->run;
	struct kvm_regs regs;
	const uint8_t *insn = NULL;
	unsigned n = 0;
	bool from_kvm = false;
	bool have_rip = ioctl(v->fd, KVM_GET_REGS, &regs) == 0;

	if (r->exit_reason == KVM_EXIT_INTERNAL_ERROR) {
		fprintf(stderr, "vsched-vmm: vCPU %u: KVM_EXIT_INTERNAL_ERROR, "
			"suberror %u, %u data words:", c->id, r->internal.suberror,
			r->internal.ndata);
		for (unsigned i = 0; i < r->internal.ndata && i < 16; i++)
			fprintf(stderr, " %#llx",
				(unsigned long long)r->internal.data[i]);
		fputc('\n', stderr);
		if (r->internal.suberror == KVM_INTERNAL_ERROR_EMULATION &&
		    r->emulation_failure.ndata >= 3 &&
		    (r->emulation_failure.flags &
		     KVM_INTERNAL_ERROR_EMULATION_FLAG_INSTRUCTION_BYTES)) {
			insn = r->emulation_failure.insn_bytes;
			n = r->emulation_failure.insn_size;
			from_kvm = true;
			if (n > sizeof(r->emulation_failure.insn_bytes))
				n = sizeof(r->emulation_failure.insn_bytes);
		}
	} else if (r->exit_reason == KVM_EXIT_FAIL_ENTRY) {
		fprintf(stderr, "vsched-vmm: vCPU %u: KVM_EXIT_FAIL_ENTRY, hardware "
			"entry failure reason %#llx on host CPU %u\n", c->id,
			(unsigned long long)r->fail_entry.hardware_entry_failure_reason,
			r->fail_entry.cpu);
	} else {
		fprintf(stderr, "vsched-vmm: vCPU %u: KVM_EXIT_SHUTDOWN\n", c->id);
	}
	if (have_rip) {
		struct kvm_sregs sregs;

		fprintf(stderr, "vsched-vmm: vCPU %u: rip %#llx rsp %#llx rflags "
			"%#llx\n", c->id, regs.rip, regs.rsp, regs.rflags);
		/* KVM on AMD SVM INITs a vCPU at a shutdown (the VMCB is
		 * undefined after a SHUTDOWN intercept): its registers are
		 * then the reset state, not where the guest failed. */
		if (r->exit_reason == KVM_EXIT_SHUTDOWN && regs.rip == 0xfff0 &&
		    ioctl(v->fd, KVM_GET_SREGS, &sregs) == 0 &&
		    sregs.cs.base == 0xffff0000) {
			fprintf(stderr, "vsched-vmm: vCPU %u: these registers are "
				"the INIT state: KVM reset the vCPU at the shutdown "
				"(AMD SVM), so the faulting rip and instruction are "
				"lost\n", c->id);
			have_rip = false;
		}
		if (have_rip && !insn && regs.rip < G_MEM_SIZE - 15) {
			insn = c->m->mem + regs.rip;
			n = 15;
		}
	}
	if (insn) {
		fprintf(stderr, "vsched-vmm: vCPU %u: instruction bytes (%s):",
			c->id, from_kvm ? "from KVM" : "guest memory at rip");
		for (unsigned i = 0; i < n; i++)
			fprintf(stderr, " %02x", insn[i]);
		fputc('\n', stderr);
	}
	fprintf(stderr, "vsched-vmm: vCPU %u: cause: %s\n", c->id, exit_cause(r));
}

/* The run loop's body as a VMM that owns KVM_RUN writes it: vsched's
 * pre_run (service, inject, clear immediate_exit, commit), the ioctl,
 * vsched's post_run: vsched_kvm_run()'s three steps, and between them
 * the stop flag looked at after the commit (<vsched/kvm.h>, "An exit
 * request"), which vsched_kvm_run() has no place for: a vmm_stop() that
 * came after the run loop's own look
 * posted K_STOP to a vCPU outside the guest, pre_run's service took it
 * and the commit found nothing pending, and the kick that followed came
 * before the commit, so a guest that never exits by itself would run on.
 * The commit's barrier pairs with the post's: either this load sees the
 * flag, or the post saw IN_GUEST and kicked KVM_RUN out. */
static void kvm_run(struct vcpu *c, struct vexit *e)
{
	struct kvm_vcpu_state *v = c->be;
	int rc = vsched_kvm_pre_run(v->kv);

	if (rc == 0) {
		int ret = atomic_load(&c->m->stop) ? (errno = EINTR, -1)
						   : ioctl(v->fd, KVM_RUN, 0);

		rc = vsched_kvm_post_run(v->kv, ret < 0 ? -errno : 0);
	}

	*e = (struct vexit){ .kind = EXIT_AGAIN };
	switch (rc) {
	case VSCHED_KVM_KICKED:
	case VSCHED_KVM_CANCELLED:
	case KVM_EXIT_IRQ_WINDOW_OPEN:
	case KVM_EXIT_INTR:
		return;
	case KVM_EXIT_HLT:
		e->kind = EXIT_HLT;
		return;
	case KVM_EXIT_IO: {
		struct kvm_run *r = v->run;

		if (r->io.direction == KVM_EXIT_IO_OUT && r->io.size == 4 &&
		    r->io.count == 1) {
			e->kind = EXIT_IO;
			e->port = r->io.port;
			memcpy(&e->value, (uint8_t *)r + r->io.data_offset, 4);
			return;
		}
		fprintf(stderr, "vsched-vmm: vCPU %u: unexpected I/O to port %#x\n",
			c->id, r->io.port);
		e->kind = EXIT_FAIL;
		e->err = -EIO;
		return;
	}
	default:
		e->kind = EXIT_FAIL;
		if (rc < 0) {
			e->err = rc;
			fprintf(stderr, "vsched-vmm: vCPU %u: run: %s\n", c->id,
				vsched_strerror(rc));
		} else if (rc == KVM_EXIT_INTERNAL_ERROR ||
			   rc == KVM_EXIT_FAIL_ENTRY || rc == KVM_EXIT_SHUTDOWN) {
			e->err = -EIO;
			explain_exit(c, v);
		} else {
			e->err = -EIO;
			fprintf(stderr, "vsched-vmm: vCPU %u: unexpected exit "
				"reason %d\n", c->id, rc);
		}
	}
}

static int kvm_halt(struct vcpu *c)
{
	struct kvm_vcpu_state *v = c->be;

	return vsched_kvm_halt(v->kv, VSCHED_DEADLINE_NONE);
}

static void kvm_queue_irq(struct vcpu *c, unsigned vector)
{
	struct kvm_vcpu_state *v = c->be;

	vsched_kvm_queue_irq(v->kv, vector);
}

static int kvm_retract_irq(struct vcpu *c, unsigned vector)
{
	struct kvm_vcpu_state *v = c->be;

	return vsched_kvm_retract_irq(v->kv, vector);
}

static int kvm_queue_nmi(struct vcpu *c)
{
	struct kvm_vcpu_state *v = c->be;

	return vsched_kvm_queue_nmi(v->kv);
}

static void kvm_kick(struct vcpu *c)
{
	struct kvm_vcpu_state *v = c->be;

	if (v && v->kv)
		vsched_kvm_kick(v->kv);
}

static void kvm_report(struct vcpu *c, uint64_t *kicked, uint64_t *irqs,
		       uint64_t *windows, uint64_t *halts_skipped)
{
	struct kvm_vcpu_state *v = c->be;
	struct vsched_kvm_stats st = { .size = sizeof(st) };

	if (!v || !v->kv || vsched_kvm_read_stats(v->kv, &st) != 0)
		return;
	*kicked += st.kicked_exits;
	*irqs += st.irqs_injected;
	*windows += st.window_requests;
	*halts_skipped += st.halts_skipped;
}

/* KVM's binary stats (Linux 5.14+): header, descriptors, then values. */
static uint64_t kvm_stat(struct vcpu *c, const char *name)
{
#ifdef KVM_GET_STATS_FD
	struct kvm_vcpu_state *v = c->be;
	struct kvm_stats_header h;
	size_t dsz;
	uint8_t *descs;
	uint64_t val = 0;

	if (!v || v->stats_fd < 0 ||
	    pread(v->stats_fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return 0;
	dsz = sizeof(struct kvm_stats_desc) + h.name_size;
	descs = malloc(dsz * h.num_desc);
	if (!descs)
		return 0;
	if (pread(v->stats_fd, descs, dsz * h.num_desc, h.desc_offset) ==
	    (ssize_t)(dsz * h.num_desc)) {
		for (unsigned i = 0; i < h.num_desc; i++) {
			struct kvm_stats_desc *d =
				(struct kvm_stats_desc *)(descs + i * dsz);

			if (strncmp(d->name, name, h.name_size) == 0) {
				if (pread(v->stats_fd, &val, sizeof(val),
					  h.data_offset + d->offset) != sizeof(val))
					val = 0;
				break;
			}
		}
	}
	free(descs);
	return val;
#else
	(void)c;
	(void)name;
	return 0;
#endif
}

/* --governor: the halt-polling governor on the VM and every vCPU fd, as
 * a VMM with an in-kernel irqchip attaches it (doc/adopting.md). A sample
 * every 10 ms and a change at most every 50 ms: the demo's runs last a
 * fraction of a second (a long-lived VM keeps the defaults, 100 ms and
 * 1 s). The main thread, once every vCPU exists. */
static int kvm_gov_attach(struct vmm *m)
{
	struct kvm_vm_state *s = m->be_vm;
	struct vsched_kvm_gov_config cfg = {
		.size = sizeof(cfg),
		.interval_ns = 10000000,
		.min_change_ns = 50000000,
	};
	int fds[G_MAX_VCPUS], rc;

	for (unsigned i = 0; i < m->o.vcpus; i++)
		fds[i] = ((struct kvm_vcpu_state *)m->vcpus[i].be)->fd;
	rc = vsched_kvm_gov_create(s->vm, fds, m->o.vcpus, &cfg, &s->gov);
	if (rc < 0)
		fprintf(stderr, "vsched-vmm: the governor: %s\n", vsched_strerror(rc));
	return rc;
}

/* From the main thread's loop (the harness's watch), every millisecond:
 * the governor samples only once its interval has passed. */
static void kvm_gov_tick(struct vmm *m, uint64_t now_ns)
{
	struct kvm_vm_state *s = m->be_vm;

	if (s && s->gov)
		vsched_kvm_gov_tick(s->gov, now_ns);
}

static void kvm_gov_report(struct vmm *m, struct gov_figures *out)
{
	struct kvm_vm_state *s = m->be_vm;
	struct vsched_kvm_gov_stats st = { .size = sizeof(st) };

	if (!s || !s->gov || vsched_kvm_gov_read_stats(s->gov, &st) != 0)
		return;
	*out = (struct gov_figures){
		.samples = st.samples, .decisions = st.decisions,
		.cap_changes = st.cap_changes, .cap_ns = st.cap_ns,
		.window_ns = st.window_ns, .halts = st.halts,
		.halts_polled = st.halts_polled, .polls_failed = st.polls_failed,
		.hist = st.model == VSCHED_KVM_GOV_HIST,
	};
}

/* From the main thread, once the vCPU thread has ended, so no vCPU ioctl
 * waits for a KVM_RUN. */
static void kvm_dump(struct vcpu *c)
{
	struct kvm_vcpu_state *v = c->be;
	struct kvm_regs regs;
	struct kvm_vcpu_events ev;

	if (ioctl(v->fd, KVM_GET_REGS, &regs) == 0) {
		fprintf(stderr, "  vCPU %u: rip %#llx rflags %#llx\n", c->id,
			regs.rip, regs.rflags);
		/* The guest's code lies below 4 GiB: nothing it or this VMM
		 * does can put a higher address there. Nested KVM under qemu
		 * TCG has been seen to store L1's own RIP, just past its
		 * VMRUN. */
		if (regs.rip > UINT32_MAX)
			fprintf(stderr, "  vCPU %u: environment fault: rip is no address "
				"of this guest; the hypervisor below corrupted "
				"the vCPU's state (doc/vmm.md)\n", c->id);
	}
	if (ioctl(v->fd, KVM_GET_VCPU_EVENTS, &ev) == 0)
		fprintf(stderr, "  vCPU %u: nmi injected %d pending %d masked %d, "
			"irq injected %d vector %d, interrupt shadow %d\n", c->id,
			ev.nmi.injected, ev.nmi.pending, ev.nmi.masked,
			ev.interrupt.injected, ev.interrupt.nr, ev.interrupt.shadow);
}

static void kvm_vcpu_fini(struct vcpu *c)
{
	struct kvm_vcpu_state *v = c->be;
	struct kvm_vm_state *s = c->m->be_vm;

	if (!v)
		return;
	if (v->kv)
		vsched_kvm_detach(v->kv);
	if (v->run)
		munmap(v->run, (size_t)s->run_size);
	if (v->stats_fd >= 0)
		close(v->stats_fd);
	if (v->fd >= 0)
		close(v->fd);
	free(v);
	c->be = NULL;
}

static void kvm_vm_fini(struct vmm *m)
{
	struct kvm_vm_state *s = m->be_vm;

	if (m->mem)
		munmap(m->mem, G_MEM_SIZE);
	m->mem = NULL;
	if (!s)
		return;
	if (s->gov)
		vsched_kvm_gov_destroy(s->gov);
	free(s->cpuid);
	if (s->vm >= 0)
		close(s->vm);
	if (s->kvm >= 0)
		close(s->kvm);
	free(s);
	m->be_vm = NULL;
}

const struct backend vmm_kvm_backend = {
	.name = "kvm",
	.vm_init = kvm_vm_init,
	.vcpu_init = kvm_vcpu_init,
	.run = kvm_run,
	.halt = kvm_halt,
	.queue_irq = kvm_queue_irq,
	.retract_irq = kvm_retract_irq,
	.queue_nmi = kvm_queue_nmi,
	.kick = kvm_kick,
	.report = kvm_report,
	.kvm_stat = kvm_stat,
	.dump = kvm_dump,
	.gov_attach = kvm_gov_attach,
	.gov_tick = kvm_gov_tick,
	.gov_report = kvm_gov_report,
	.vcpu_fini = kvm_vcpu_fini,
	.vm_fini = kvm_vm_fini,
};
