/* SPDX-License-Identifier: MIT */
/**
 * @file inline.h
 * @brief Inline fast paths (opt in with VSCHED_INLINE) and the hot vCPU
 * layout they rely on.
 *
 * A hypervisor that defines `VSCHED_INLINE` before it includes any vsched
 * header gets vsched_post(), vsched_service(), vsched_vcpu_enter() and
 * vsched_vcpu_exit() as static inline functions, as liburcu's
 * `_LGPL_SOURCE` and KVM's inline kvm_make_request()/kvm_check_request():
 * - vsched_post(): a kind that may be posted inline (declared, neither
 *   VSCHED_REQ_WAIT nor VSCHED_REQ_PAYLOAD) sets its bit, issues the full
 *   barrier and reads the mode word; a vCPU outside the guest or polling
 *   needs nothing more. Everything else (a kick, a wakeup, a coalesced
 *   post's count, WAIT, payload kinds, errors) calls the library.
 * - vsched_service(): with nothing pending, one load; pending work calls
 *   the library.
 * - vsched_vcpu_enter() / vsched_vcpu_exit(): the mode exchange, the
 *   barrier and the re-check inline; a cancelled entry, a refused state or
 *   a WAIT poster to release calls the library.
 *
 * The library's exported functions are built from these same inline
 * bodies (lib/request.c, lib/vcpu.c, lib/mode.c call them), so both ways
 * run one implementation. Without the macro the exported functions are the
 * ABI, as before. With it, the inline variants differ from the exported
 * ones only in the argument checks they leave to the caller: the vCPU must
 * not be NULL (the exported functions return VSCHED_EINVAL for NULL), and
 * an inline post does not fire the library's `post` USDT probe (kicks,
 * wakeups and cancelled entries still fire theirs, from the library).
 * Requires GCC or Clang (the `__atomic` builtins); compiles as C and C++.
 *
 * **The hot layout is ABI.** Inline code compiled into the hypervisor reads
 * and writes these members of a vCPU directly, so within one
 * VSCHED_VERSION_MAJOR (each 0.MINOR before 1.0) their offsets, sizes and
 * meaning never change (struct vsched_vcpu_hot below, checked by
 * test/abi: abidiff against a committed baseline, and by static
 * assertions in the library against its private struct):
 *
 * | offset | size | member | written by | meaning |
 * |---|---|---|---|---|
 * | 0 | 8 | pending | posters (atomic OR), the vCPU (atomic AND) | bit r: a request of rank r is pending |
 * | 8 | 4 | mode | the vCPU (exchange), posters (CAS) | the mode word: bits 0-2 enum vsched_mode, bit 3 a WAIT poster sleeps on it, bits 4-31 the entry generation |
 * | 16 | 8 | entries | the vCPU only (load + store) | committed entries (the `entries` statistic) |
 * | 64 | 64 | post_rank | the library (create, destroy) | by kind: its rank, or -1 when a post of it must call the library |
 *
 * The memory orders are those of doc/protocol.md: the post's RMW is
 * seq_cst and followed by the full barrier, the entry's exchange too, the
 * exit's exchange is seq_cst; everything else is relaxed.
 */
#ifndef VSCHED_INLINE_H
#define VSCHED_INLINE_H

#include <stddef.h>
#include <stdint.h>
#include <vsched/arch.h>
#include <vsched/version.h>
#include <vsched/request.h>
#include <vsched/vcpu.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The hot state of a vCPU, at the start of every struct vsched_vcpu. */
struct vsched_vcpu_hot {
	/** Bit r: a request of rank r (the service order) is pending. */
	uint64_t pending;
	/** The mode word (doc/protocol.md "The mode word"). */
	uint32_t mode;
	/** Zero. */
	uint32_t reserved0;
	/** Committed entries, written by the vCPU's thread only. */
	uint64_t entries;
	/** Zero: the rest of the posters' and the vCPU's shared line. */
	unsigned char reserved1[40];
	/** By kind: the rank an inline post sets, or -1 (call the library). */
	signed char post_rank[VSCHED_MAX_KINDS];
};

/** @cond VSCHED_INTERNAL (the inline bodies and the library's slow paths
 * they call: not API) */
#if defined(__cplusplus)
#define VSCHED__INLINE_ASSERT(c, m) static_assert(c, m)
#else
#define VSCHED__INLINE_ASSERT(c, m) _Static_assert(c, m)
#endif
VSCHED__INLINE_ASSERT(offsetof(struct vsched_vcpu_hot, pending) == 0, "pending at 0");
VSCHED__INLINE_ASSERT(offsetof(struct vsched_vcpu_hot, mode) == 8, "mode at 8");
VSCHED__INLINE_ASSERT(offsetof(struct vsched_vcpu_hot, entries) == 16, "entries at 16");
VSCHED__INLINE_ASSERT(offsetof(struct vsched_vcpu_hot, post_rank) == 64, "post_rank at 64");
VSCHED__INLINE_ASSERT(sizeof(struct vsched_vcpu_hot) == 128, "two cache lines");

/* The mode word's encoding (lib/mode.h, which uses these). */
#define VSCHED__MODE_MASK 0x7u
#define VSCHED__ACK_WAITERS 0x8u
#define VSCHED__GEN_ONE 0x10u
#define VSCHED__GEN_MASK (~0xfu)
/* Bit (m & 31) of these says whether mode word m is in the set: the mode
 * is bits 0-2, so each byte repeats the set of enum vsched_mode values. */
#define VSCHED__MODES_POST_ACT 0x32323232u  /* IN_GUEST, BLOCKED, DESTROYED */
#define VSCHED__MODES_IN_GUEST 0x06060606u  /* IN_GUEST, EXITING_GUEST */
#define VSCHED__MODE_IN(set, m) (((set) >> ((m) & 31u)) & 1u)

#if defined(__GNUC__)
#define VSCHED__INLINE_LIKELY(x) __builtin_expect(!!(x), 1)
#define VSCHED__INLINE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define VSCHED__INLINE_LIKELY(x) (x)
#define VSCHED__INLINE_UNLIKELY(x) (x)
#endif

/*
 * The full barrier after the post's and the entry's RMW: the arch layer's
 * (<vsched/arch.h>), the same instruction as the library's
 * vsched__mb_after_rmw(), checked in the library and in an inline test
 * binary by test/tools/check-fences.sh.
 */
#define VSCHED__INLINE_MB_AFTER_RMW(word) VSCHED__MB_AFTER_RMW_ON(word)

/* The library's slow paths, for the inline bodies only (not API: their
 * arguments are what the inline code has at hand). */
VSCHED_API int vsched__post_slow(struct vsched_vcpu *vcpu, unsigned kind);
VSCHED_API int vsched__post_finish(struct vsched_vcpu *vcpu, unsigned kind,
				   uint32_t mode, int coalesced);
VSCHED_API int vsched__service_slow(struct vsched_vcpu *vcpu);
VSCHED_API int vsched__vcpu_enter_refused(struct vsched_vcpu *vcpu);
VSCHED_API int vsched__vcpu_enter_cancel(struct vsched_vcpu *vcpu,
					 uint64_t pending);
VSCHED_API int vsched__vcpu_exit_refused(struct vsched_vcpu *vcpu);
VSCHED_API void vsched__vcpu_exit_wake(struct vsched_vcpu *vcpu);

#ifndef VSCHED__INLINE_POST_HOOK
#define VSCHED__INLINE_POST_HOOK(vcpu, kind) ((void)0)
#endif

static inline struct vsched_vcpu_hot *vsched__hot(struct vsched_vcpu *v)
{
	return (struct vsched_vcpu_hot *)(void *)v;
}

/* protocol.md "The Dekker pair", poster side, its one implementation (the
 * inline post and the library's slow post both call it): set `bit` in the
 * pending word (release: the handler sees what the poster wrote before),
 * full barrier, read the mode word into *m. Pairs with vsched_vcpu_enter()
 * and vsched_vcpu_block(). Returns the bit's old value. */
static inline uint64_t vsched__post_bit(struct vsched_vcpu_hot *h, uint64_t bit,
					uint32_t *m)
{
	uint64_t old = __atomic_fetch_or(&h->pending, bit, __ATOMIC_SEQ_CST) & bit;
	VSCHED__INLINE_MB_AFTER_RMW(&h->pending);
	*m = __atomic_load_n(&h->mode, __ATOMIC_RELAXED);
	return old;
}

/* vsched_post(), v non-NULL. protocol.md "The Dekker pair", poster side. */
static inline int vsched__post_fast(struct vsched_vcpu *v, unsigned kind)
{
	struct vsched_vcpu_hot *h = vsched__hot(v);
	uint64_t bit, old;
	uint64_t r;
	uint32_t m;

	if (VSCHED__INLINE_UNLIKELY(kind >= VSCHED_MAX_KINDS))
		return vsched__post_slow(v, kind);
	r = (unsigned char)__atomic_load_n(&h->post_rank[kind], __ATOMIC_RELAXED);
	if (VSCHED__INLINE_UNLIKELY(r & 0x80u)) /* -1: the slow path */
		return vsched__post_slow(v, kind);
	bit = (uint64_t)1 << r;
	old = vsched__post_bit(h, bit, &m);
	VSCHED__INLINE_POST_HOOK(v, kind);
	if (VSCHED__INLINE_UNLIKELY(old))
		return vsched__post_finish(v, kind, m, 1);
	/* Outside the guest or polling: nothing more. */
	if (VSCHED__INLINE_UNLIKELY(VSCHED__MODE_IN(VSCHED__MODES_POST_ACT, m)))
		return vsched__post_finish(v, kind, m, 0);
	return 0;
}

/* vsched_service(), v non-NULL: nothing pending is one load. */
static inline int vsched__service_fast(struct vsched_vcpu *v)
{
	if (VSCHED__INLINE_LIKELY(!__atomic_load_n(&vsched__hot(v)->pending,
						   __ATOMIC_RELAXED)))
		return 0;
	return vsched__service_slow(v);
}

/* vsched_vcpu_enter(), v non-NULL. protocol.md "The Dekker pair", vCPU
 * side: write the mode, full barrier, read the requests. */
static inline int vsched__vcpu_enter_fast(struct vsched_vcpu *v)
{
	struct vsched_vcpu_hot *h = vsched__hot(v);
	uint32_t m = __atomic_load_n(&h->mode, __ATOMIC_RELAXED);
	uint64_t p;

	if (VSCHED__INLINE_UNLIKELY(m & VSCHED__MODE_MASK)) /* not OUTSIDE */
		return vsched__vcpu_enter_refused(v);
	__atomic_exchange_n(&h->mode,
			    (m & VSCHED__GEN_MASK) +
				    (VSCHED__GEN_ONE | (uint32_t)VSCHED_MODE_IN_GUEST),
			    __ATOMIC_SEQ_CST);
	VSCHED__INLINE_MB_AFTER_RMW(&h->mode);
	p = __atomic_load_n(&h->pending, __ATOMIC_RELAXED);
	if (VSCHED__INLINE_UNLIKELY(p))
		return vsched__vcpu_enter_cancel(v, p);
	/* Owner-only counter: no locked instruction. */
	__atomic_store_n(&h->entries,
			 __atomic_load_n(&h->entries, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
	return 0;
}

/* vsched_vcpu_exit(), v non-NULL. protocol.md "WAIT acknowledgement":
 * leave guest mode with an exchange, keeping the generation. */
static inline int vsched__vcpu_exit_fast(struct vsched_vcpu *v)
{
	struct vsched_vcpu_hot *h = vsched__hot(v);
	uint32_t m = __atomic_load_n(&h->mode, __ATOMIC_RELAXED);

	if (VSCHED__INLINE_UNLIKELY(!VSCHED__MODE_IN(VSCHED__MODES_IN_GUEST, m)))
		return vsched__vcpu_exit_refused(v);
	if (VSCHED__INLINE_UNLIKELY(
		    __atomic_exchange_n(&h->mode, m & VSCHED__GEN_MASK,
					__ATOMIC_SEQ_CST) &
		    VSCHED__ACK_WAITERS))
		vsched__vcpu_exit_wake(v);
	return 0;
}

/** @endcond */

#ifdef VSCHED_INLINE
#if !defined(__GNUC__)
#error "VSCHED_INLINE needs GCC or Clang (__atomic builtins)"
#endif
/* The opt-in: the API functions themselves, inline (see the file comment
 * for the two differences: non-NULL vCPU, no `post` probe). */
static inline int vsched_post(struct vsched_vcpu *vcpu, unsigned kind)
{
	return vsched__post_fast(vcpu, kind);
}

static inline int vsched_service(struct vsched_vcpu *vcpu)
{
	return vsched__service_fast(vcpu);
}

static inline int vsched_vcpu_enter(struct vsched_vcpu *vcpu)
{
	return vsched__vcpu_enter_fast(vcpu);
}

static inline int vsched_vcpu_exit(struct vsched_vcpu *vcpu)
{
	return vsched__vcpu_exit_fast(vcpu);
}
#endif

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_INLINE_H */
