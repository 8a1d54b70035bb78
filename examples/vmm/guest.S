/* SPDX-License-Identifier: MIT */
/*
 * vsched-vmm's built-in guests: one 64-bit long-mode image, loaded at
 * G_CODE. The host builds the identity page tables, the GDT and the IDT
 * (64-bit interrupt gates) and enters it at `start` in 64-bit mode with
 * IF=0, %rdi pointing at the vCPU's result area (never changed) and a
 * stack. The mailbox's workload bits select what each iteration does; see
 * guest.h. Handlers return with iretq: long mode is what every guest OS
 * runs in, and software-assisted KVMs (kvm_pvm) emulate neither a 32-bit
 * protected-mode iret nor a software `int n`, so the guest uses neither.
 * On a nested KVM every guest instruction may be emulated (about 1 us
 * each), so the paths are short and rdtsc (3-5 us there) is read only
 * around the ping-pong round trip.
 */
#include "guest.h"

#define MB(f) (G_MAILBOX + f)

	.code64
	.text
	/* Header read by the host: entry point and handler addresses. */
	.long start, nmi_handler, ipi_handler, timer_handler, bad_handler

start:
	testl $WL_FAULT, MB(MB_WORKLOAD)
	jnz fault
	cmpl $0, MB(MB_KERNEL)
	je 1f
	/* In-kernel LAPIC: x2APIC mode, software-enabled, one-shot timer
	 * at TIMER_VEC counting at the bus clock (1 GHz in KVM). */
	mov $0x1b, %ecx
	rdmsr
	or $0xc00, %eax
	wrmsr
	xor %edx, %edx
	mov $0x80f, %ecx
	mov $0x1ff, %eax
	wrmsr
	mov $0x83e, %ecx
	mov $0xb, %eax
	wrmsr
	mov $0x832, %ecx
	mov $TIMER_VEC, %eax
	wrmsr
	/* Start together: a fixed IPI to a LAPIC that is not enabled yet
	 * (or not yet in x2APIC mode) is dropped. */
1:	lock incl MB(MB_READY)
2:	mov MB(MB_READY), %eax
	cmp MB(MB_NCPUS), %eax
	jb 2b
	testl $WL_SPIN, MB(MB_WORKLOAD)
	jnz spin
loop:
	mov PVA_I(%rdi), %eax
	cmp MB(MB_ITERS), %eax
	jae finish
	testl $WL_PING, MB(MB_WORKLOAD)
	jz 2f
	cmpl $ROLE_INIT, PVA_ROLE(%rdi)
	jne 2f
	call do_ping
2:	testl $WL_TIMER, MB(MB_WORKLOAD)
	jz 3f
	call do_timer
3:	testl $WL_PMI, MB(MB_WORKLOAD)
	jz 4f
	call do_pmi
4:	incl PVA_I(%rdi)
	jmp loop

finish:
	/* A responder stays until it has answered every ping. */
	testl $WL_PING, MB(MB_WORKLOAD)
	jz 6f
	cmpl $ROLE_RESP, PVA_ROLE(%rdi)
	jne 6f
5:	cli
	mov PVA_IPIS(%rdi), %eax
	cmp MB(MB_ITERS), %eax
	jae 6f
	call wait_irq
	jmp 5b
6:	cli
	mov PVA_STATUS(%rdi), %eax
	mov $PORT_DONE, %dx
	out %eax, %dx
7:	hlt
	jmp 7b

spin:
	incl PVA_SPIN(%rdi)
	jmp spin

/* No IDT, then an exception: #UD cannot be delivered, nor the #DF after
 * it, so the CPU shuts down (KVM_EXIT_SHUTDOWN). */
fault:
	lidt null_idtr
	ud2
null_idtr:
	.word 0
	.quad 0

/* Wait for an interrupt: IF=0 on entry and on return. `sti; hlt` relies
 * on the one-instruction interrupt shadow after sti; an interrupt that is
 * delivered inside it anyway (nested KVM under TCG does this) would return
 * into the hlt with its wakeup spent, so the handlers step a return address
 * that points at idle_hlt past it (skip_hlt). */
wait_irq:
	sti
idle_hlt:
	hlt
	cli
	ret

/* In a handler, with 3 registers pushed: the interrupted rip at 24(%rsp). */
#define SKIP_HLT \
	cmpq $idle_hlt, 24(%rsp); \
	jne 9f; \
	incq 24(%rsp); \
9:

/* One ping-pong round trip, timed with rdtsc into this vCPU's log. */
do_ping:
	cli
	rdtsc
	mov PVA_LOG(%rdi), %ebx
	mov PVA_I(%rdi), %ecx
	shl $4, %ecx
	add %rcx, %rbx
	mov %eax, (%rbx)
	mov %edx, 4(%rbx)
	movl $0, PVA_REPLY(%rdi)
	mov PVA_PARTNER(%rdi), %eax
	call send_ipi
1:	cmpl $0, PVA_REPLY(%rdi)
	jne 2f
	call wait_irq
	jmp 1b
2:	rdtsc
	mov %eax, 8(%rbx)
	mov %edx, 12(%rbx)
	ret

/* Sleep until the timer fires; every 4th time a short deadline is armed
 * first and superseded at once, so its expiry, if already posted, is stale. */
do_timer:
	cli
	movl $0, PVA_FIRED(%rdi)
	mov PVA_SEED(%rdi), %eax
	imul $1103515245, %eax, %eax
	add $12345, %eax
	mov %eax, PVA_SEED(%rdi)
	testl $3, PVA_I(%rdi)
	jnz 1f
	push %rax
	mov $SHORT_US, %eax
	call timer_arm
	pop %rax
1:	shr $16, %eax
	and $RANGE_MASK, %eax
	add $MIN_US, %eax
	call timer_arm
2:	cmpl $0, PVA_FIRED(%rdi)
	jne 3f
	call wait_irq
	jmp 2b
3:	ret

/* Arm the timer %eax us from now: a new epoch. IF=0 here. */
timer_arm:
	incl PVA_TEPOCH(%rdi)
	cmpl $0, MB(MB_KERNEL)
	jne 1f
	mov $PORT_TIMER, %dx
	out %eax, %dx
	ret
1:	imul $1000, %eax, %eax
	xor %edx, %edx
	mov $0x838, %ecx
	wrmsr
	ret

/* A PMU counter overflow; the host answers with an NMI, delivered at the
 * next entry, so the count has moved by the next instruction. */
do_pmi:
	mov PVA_NMIS(%rdi), %ebx
	mov $PORT_PMU, %dx
	out %eax, %dx
1:	cmp PVA_NMIS(%rdi), %ebx
	je 1b
	ret

/* IPI to vCPU %eax. Clobbers %eax, %ecx, %edx. */
send_ipi:
	cmpl $0, MB(MB_KERNEL)
	jne 1f
	mov $PORT_IPI, %dx
	out %eax, %dx
	ret
1:	mov %eax, %edx
	mov $IPI_VEC, %eax
	mov $0x830, %ecx
	wrmsr
	ret

eoi:
	cmpl $0, MB(MB_KERNEL)
	je 1f
	mov $0x80b, %ecx
	xor %eax, %eax
	xor %edx, %edx
	wrmsr
1:	ret

nmi_handler:
	incl PVA_NMIS(%rdi)
	iretq

ipi_handler:
	push %rax
	push %rcx
	push %rdx
	SKIP_HLT
	incl PVA_IPIS(%rdi)
	movl $1, PVA_REPLY(%rdi)
	cmpl $ROLE_RESP, PVA_ROLE(%rdi)
	jne 1f
	mov PVA_PARTNER(%rdi), %eax
	call send_ipi
1:	call eoi
	pop %rdx
	pop %rcx
	pop %rax
	iretq

/* Counts as fired only for the current arm: the host's epoch register
 * (userspace irqchip) or, in-kernel, a one-shot LAPIC timer that has run
 * out (current count 0); anything else is a stale, spurious interrupt. */
timer_handler:
	push %rax
	push %rcx
	push %rdx
	SKIP_HLT
	cmpl $0, MB(MB_KERNEL)
	jne 1f
	mov PVA_TIRQ_EPOCH(%rdi), %eax
	cmp PVA_TEPOCH(%rdi), %eax
	jne 3f
	jmp 2f
1:	mov $0x839, %ecx
	rdmsr
	test %eax, %eax
	jnz 3f
2:	movl $1, PVA_FIRED(%rdi)
	incl PVA_TIMERS(%rdi)
	jmp 4f
3:	incl PVA_STALE(%rdi)
4:	call eoi
	pop %rdx
	pop %rcx
	pop %rax
	iretq

/* Any other vector: report and stop. */
bad_handler:
	cli
	movl $0xbad, PVA_STATUS(%rdi)
	mov $0xbad, %eax
	mov $PORT_DONE, %dx
	out %eax, %dx
1:	hlt
	jmp 1b
