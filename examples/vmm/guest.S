/* SPDX-License-Identifier: MIT */
/*
 * vsched-vmm's built-in guests: one 32-bit flat protected-mode image,
 * loaded at G_CODE. The host enters it at `start` with IF=0, %edi pointing
 * at the vCPU's result area (never changed) and a stack. The mailbox's
 * workload bits select what each iteration does; see guest.h.
 * On this machine's nested KVM every guest instruction may be emulated
 * (about 1 us each), so the paths are short and rdtsc (3-5 us there) is
 * read only around the ping-pong round trip.
 */
#include "guest.h"

#define MB(f) (G_MAILBOX + f)

	.code32
	.text
	/* Header read by the host: entry point and handler addresses. */
	.long start, nmi_handler, ipi_handler, timer_handler, bad_handler

start:
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
	mov PVA_I(%edi), %eax
	cmp MB(MB_ITERS), %eax
	jae finish
	testl $WL_PING, MB(MB_WORKLOAD)
	jz 2f
	cmpl $ROLE_INIT, PVA_ROLE(%edi)
	jne 2f
	call do_ping
2:	testl $WL_TIMER, MB(MB_WORKLOAD)
	jz 3f
	call do_timer
3:	testl $WL_PMI, MB(MB_WORKLOAD)
	jz 4f
	call do_pmi
4:	incl PVA_I(%edi)
	jmp loop

finish:
	/* A responder stays until it has answered every ping. */
	testl $WL_PING, MB(MB_WORKLOAD)
	jz 6f
	cmpl $ROLE_RESP, PVA_ROLE(%edi)
	jne 6f
5:	cli
	mov PVA_IPIS(%edi), %eax
	cmp MB(MB_ITERS), %eax
	jae 6f
	call wait_irq
	jmp 5b
6:	cli
	mov PVA_STATUS(%edi), %eax
	mov $PORT_DONE, %dx
	out %eax, %dx
7:	hlt
	jmp 7b

spin:
	incl PVA_SPIN(%edi)
	jmp spin

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

/* In a handler, with 3 registers pushed: the interrupted eip at 12(%esp). */
#define SKIP_HLT \
	cmpl $idle_hlt, 12(%esp); \
	jne 9f; \
	incl 12(%esp); \
9:

/* One ping-pong round trip, timed with rdtsc into this vCPU's log. */
do_ping:
	cli
	rdtsc
	mov PVA_LOG(%edi), %ebx
	mov PVA_I(%edi), %ecx
	shl $4, %ecx
	add %ecx, %ebx
	mov %eax, (%ebx)
	mov %edx, 4(%ebx)
	movl $0, PVA_REPLY(%edi)
	mov PVA_PARTNER(%edi), %eax
	call send_ipi
1:	cmpl $0, PVA_REPLY(%edi)
	jne 2f
	call wait_irq
	jmp 1b
2:	rdtsc
	mov %eax, 8(%ebx)
	mov %edx, 12(%ebx)
	ret

/* Sleep until the timer fires; every 4th time a short deadline is armed
 * first and superseded at once, so its expiry, if already posted, is stale. */
do_timer:
	cli
	movl $0, PVA_FIRED(%edi)
	mov PVA_SEED(%edi), %eax
	imul $1103515245, %eax, %eax
	add $12345, %eax
	mov %eax, PVA_SEED(%edi)
	testl $3, PVA_I(%edi)
	jnz 1f
	push %eax
	mov $SHORT_US, %eax
	call timer_arm
	pop %eax
1:	shr $16, %eax
	and $RANGE_MASK, %eax
	add $MIN_US, %eax
	call timer_arm
2:	cmpl $0, PVA_FIRED(%edi)
	jne 3f
	call wait_irq
	jmp 2b
3:	ret

/* Arm the timer %eax us from now: a new epoch. IF=0 here. */
timer_arm:
	incl PVA_TEPOCH(%edi)
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
	mov PVA_NMIS(%edi), %ebx
	mov $PORT_PMU, %dx
	out %eax, %dx
1:	cmp PVA_NMIS(%edi), %ebx
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
	incl PVA_NMIS(%edi)
	iret

ipi_handler:
	push %eax
	push %ecx
	push %edx
	SKIP_HLT
	incl PVA_IPIS(%edi)
	movl $1, PVA_REPLY(%edi)
	cmpl $ROLE_RESP, PVA_ROLE(%edi)
	jne 1f
	mov PVA_PARTNER(%edi), %eax
	call send_ipi
1:	call eoi
	pop %edx
	pop %ecx
	pop %eax
	iret

/* Counts as fired only for the current arm: the host's epoch register
 * (userspace irqchip) or, in-kernel, a one-shot LAPIC timer that has run
 * out (current count 0); anything else is a stale, spurious interrupt. */
timer_handler:
	push %eax
	push %ecx
	push %edx
	SKIP_HLT
	cmpl $0, MB(MB_KERNEL)
	jne 1f
	mov PVA_TIRQ_EPOCH(%edi), %eax
	cmp PVA_TEPOCH(%edi), %eax
	jne 3f
	jmp 2f
1:	mov $0x839, %ecx
	rdmsr
	test %eax, %eax
	jnz 3f
2:	movl $1, PVA_FIRED(%edi)
	incl PVA_TIMERS(%edi)
	jmp 4f
3:	incl PVA_STALE(%edi)
4:	call eoi
	pop %edx
	pop %ecx
	pop %eax
	iret

/* Any other vector: report and stop. */
bad_handler:
	cli
	movl $0xbad, PVA_STATUS(%edi)
	mov $0xbad, %eax
	mov $PORT_DONE, %dx
	out %eax, %dx
1:	hlt
	jmp 1b
