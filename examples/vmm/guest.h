/* SPDX-License-Identifier: MIT */
/*
 * The built-in guests' ABI, shared by guest.S (KVM) and backend_sim.c (simulated
 * vCPUs): the guest-physical layout, the devices' ports and vectors, and
 * the offsets of the mailbox and of each vCPU's result area. Plain
 * #defines, so the assembler can include it.
 */
#ifndef VMM_GUEST_H
#define VMM_GUEST_H

/* Guest-physical layout (64-bit long mode, identity-mapped by 2 MiB pages
 * over all of G_MEM_SIZE; every address fits in 32 bits). */
#define G_GDT 0x500
#define G_IDT 0x1000 /* 256 16-byte gates */
#define G_PML4 0x2000
#define G_PDPT 0x3000
#define G_PD 0x4000
#define G_MAILBOX 0x8000
#define G_PVA 0x9000 /* + id * G_PVA_SIZE */
#define G_PVA_SIZE 0x100
#define G_CODE 0x10000
#define G_STACKS 0x20000 /* stack top of vCPU id: G_STACKS + (id+1)*0x1000 */
#define G_LOGS 0x100000 /* + id * G_LOG_SIZE: (start, end) tsc pairs */
#define G_LOG_SIZE 0x80000
#define G_MEM_SIZE 0x1000000
#define G_MAX_VCPUS 16
#define G_MAX_ITERS (G_LOG_SIZE / 16)

/* Workload bits (MB_WORKLOAD). */
#define WL_PING 1 /* IPI ping-pong between vCPU pairs (2i, 2i+1) */
#define WL_TIMER 2 /* timer sleeps, every 4th one re-armed before expiry */
#define WL_PMI 4 /* PMU overflow -> PMI delivered as an NMI */
#define WL_SPIN 8 /* spin forever (the kick race) */
#define WL_FAULT 16 /* triple-fault at once (the exit diagnostics' test) */

/* Devices of the userspace irqchip: 32-bit OUT to these ports. */
#define PORT_IPI 0x500 /* value: destination vCPU; vector IPI_VEC */
#define PORT_TIMER 0x504 /* value: delay in us from now (0 disarms) */
#define PORT_PMU 0x508 /* a counter overflow: the host raises a PMI */
#define PORT_DONE 0x50c /* value: the guest's status (0: checks passed) */

#define IPI_VEC 0x40
#define TIMER_VEC 0x41

/* Timer sleeps: the superseded short deadline, and the real one's range. */
#define SHORT_US 20
#define MIN_US 60
#define RANGE_MASK 127

/* Roles in the ping-pong. */
#define ROLE_NONE 0
#define ROLE_INIT 1
#define ROLE_RESP 2

/* Mailbox (G_MAILBOX), written by the host before the run. */
#define MB_WORKLOAD 0
#define MB_KERNEL 4 /* 1: in-kernel LAPIC (x2APIC MSRs), 0: the ports above */
#define MB_ITERS 8
#define MB_NCPUS 12
#define MB_TSC_PER_US 16
#define MB_READY 20 /* guest-written: vCPUs past their setup */

/* Per-vCPU area (G_PVA + id * G_PVA_SIZE); %rdi points at it. */
#define PVA_ID 0
#define PVA_ROLE 4
#define PVA_PARTNER 8
#define PVA_I 12 /* iterations done */
#define PVA_REPLY 16 /* ping: an IPI arrived since the send */
#define PVA_IPIS 20 /* IPIs received */
#define PVA_FIRED 24 /* timer: the current deadline fired */
#define PVA_STALE 28 /* timer interrupts of an earlier arm (spurious) */
#define PVA_TIMERS 32 /* timer interrupts of the current arm */
#define PVA_NMIS 36 /* NMIs received */
#define PVA_SEED 40
#define PVA_TEPOCH 44 /* timer arms so far (the guest counts) */
#define PVA_TIRQ_EPOCH 48 /* userspace irqchip: the arm the interrupt
			   * being injected belongs to (the host writes it,
			   * like a device's status register) */
#define PVA_LOG 52 /* guest address of this vCPU's log */
#define PVA_SPIN 56 /* spin iterations */
#define PVA_STATUS 60 /* 0, or 0xbad after an unexpected vector */

#endif
