/* SPDX-License-Identifier: MIT */
/*
 * Stateful, multi-threaded API fuzzer (issue 22). One input is a VM with
 * 1-3 vCPUs, an optional generic waiter, 0-2 guest timers per vCPU, and a
 * script per thread (2-4 threads) of public-API calls: posts, payload
 * posts, broadcasts, kicks, blocks and waits (short deadlines, some long
 * or none), service + guest entry/exit, fd_add/fd_del/close/write on real
 * pipes, eventfds and stream, datagram and seqpacket socket pairs (plain
 * or as doorbells; messages of length 0; the writer side shut down or
 * closed: end of file, hang-up; the reader shut for reading), timer
 * arm/disarm/set_ctl/fire, set_poll, destroy; statistics read by
 * threads other than the owner (every reader, text and JSON writers, timer
 * reads) and the guest's poll control set from them; handlers that post
 * to their own vCPU (their may-raise kinds) and to others, kick and
 * broadcast; per input, the VM's timer service run by a thread of its own
 * (vsched_timer_service_run(), or its fd and dispatch() in a poll loop),
 * stopped or destroyed by a script while the timer writers arm.
 * The threads run their scripts concurrently against real futexes, epoll
 * and the real clock or, per input, an injected VM clock that a script
 * makes stand still (up to 1 s an input) or jump forward (kicking every
 * sleeper after, as block.h asks, or not); a watchdog thread and a
 * reference model check the expectations below as the calls run, and
 * again after teardown. The VM's `wake` host callback is the futex wake
 * plus, per input, a second FUTEX_WAKE of the same word 0.1-3 ms later (a
 * waker delayed by preemption): spurious returns of the default futex
 * wait, which vm.h allows. Per input, the arch `blocking`/`unblocking`
 * hooks and the waiter's sleep hooks are set (they must alternate, E9,
 * and make M7's calls), and payload_drop re-posts each payload to the
 * next vCPU (E3 follows it; during vsched_vm_destroy() the re-post must
 * be refused with VSCHED_EDESTROYED, and the vCPUs are not serviced at
 * teardown so that payloads reach it). The other callbacks are the
 * defaults.
 *
 * Built two ways: with libFuzzer (clang, -fsanitize=fuzzer, target
 * fuzz_state, and fuzz_state_tsan under ThreadSanitizer) and as a plain
 * program (target fuzz_state_run, any compiler):
 *   fuzz_state_run [-t seconds] [-s seed] [input files...]
 * runs the given inputs, then random inputs from the seed until the time
 * is up. A failure prints the decoded script, the merged per-thread call
 * log and the expectation broken, then aborts (libFuzzer saves the input;
 * run `fuzz_state crash-<hash>` or `fuzz_state_run -t 0 crash-<hash>` again:
 * the calls are the same, the interleaving varies).
 * Environment: FUZZ_STATE_NO_MISUSE=1 runs the contract calls only;
 * FUZZ_STATE_MISUSE=close_reg,dead_calls makes only those misuse calls
 * (names: destroy fd_add fd_del wfd_add dead_calls close_reg hook wait2);
 * FUZZ_STATE_LATE=0..3 overrides the input's late-wake mode;
 * FUZZ_STATE_IGNORE=E5,M5,<text> counts failures with those tags, or whose
 * message contains <text>, instead of failing on them (to hunt past a known
 * finding; CI sets neither); FUZZ_STATE_TRACE=1 prints each input's
 * script and calls after it ran.
 *
 * EXPECTATIONS (each failure message names one as [E<n>])
 *
 * Contract (calls made as the headers allow: vCPU-thread calls only from
 * the vCPU's owner thread, fd_add/fd_del on a vCPU by its owner, timer
 * writes by one writer thread per vCPU, waiter wait/fd_add by its
 * consumer, vCPU destroy by its owner once it stopped using it):
 *  E1  every call returns 0, a positive result or a negative code that
 *      vsched_strerror() knows; a block/wait on a live object returns a
 *      wake reason (> 0).
 *  E2  every accepted post is serviced: after teardown, a live vCPU has no
 *      request pending once its thread serviced it, and for each plain kind
 *      the library's posted count (serviced + coalesced + pending, over
 *      all vCPUs) equals the posts that returned 0 (broadcast: its count);
 *      each handler call matches one counted service.
 *  E3  every accepted payload is handed over exactly once: to the handler
 *      or, for a destroyed vCPU, to payload_drop (that is what the API
 *      reports at destroy; plain requests pending at destroy are dropped
 *      silently); a refused payload post never reaches either.
 *  E4  no sleeper stays asleep with a reason to run: a vCPU thread or
 *      waiter consumer inside block/wait whose thread the kernel reports
 *      sleeping ('S'/'D' in /proc/self/task/<tid>/stat), for 1.5 s of
 *      sampled time in all, while it has a waking request pending, a
 *      registered fd readable, a guest timer past due, a waiter condition
 *      true, or was destroyed. Time where a waker is inside its call, or
 *      the thread is runnable but starved, does not count.
 *  E5  a sleep burns no CPU: a block/wait that lasted >= 50 ms of wall
 *      time used at most max(20 ms, wall / 8) (under TSan max(60 ms,
 *      wall / 4)) + 0.3 ms per wakeup (its
 *      returns from sleep and re-sleeps, plus every FUTEX_WAKE the host
 *      callbacks sent meanwhile) of its thread's CPU time: a spinning
 *      thread on a loaded machine gets a share of a CPU, not all of it.
 *      The wakeups vsched counts are credited only up to 4 per call that
 *      may wake the object (post, kick, broadcast, timer write, fd write
 *      or hang-up, clock move, waiter kick, teardown post) or FUTEX_WAKE
 *      sent, plus 16 (and 1 a ms with the injected clock); and a block or
 *      wait in which vsched counts more than 8 per such call, plus 64
 *      (and 2 a ms with the injected clock: a clock that stands still is
 *      looked at again at most every 1 ms, block.h), loops on a wake
 *      source whatever CPU share it got.
 *  E6  destroyed objects refuse: after vsched_vcpu_destroy() returned 0,
 *      post, payload post, kick, block, enter, exit, timer arm/create/
 *      set_ctl and a second destroy return VSCHED_EDESTROYED; service runs no handler; the
 *      mode stays DESTROYED (checked by the watchdog on every tick and
 *      after each call): never resurrected.
 *  E7  no fd is leaked: /proc/self/fd has as many epoll, eventfd and
 *      timerfd entries after the input (VM, waiter and the harness's own fds
 *      closed) as before it (only those: a sanitizer's symbolizer pipes
 *      come and go on their own).
 *  E8  fd bookkeeping: fd_add of a registered fd says VSCHED_EEXIST,
 *      fd_del of a registered fd succeeds, fd_del of one closed while
 *      registered returns 0, -EBADF or -ENOENT (block.h); a WAKE_FD result
 *      names only tags of live registrations (or one deleted during that
 *      call; a registration closed under a dup is live until its fd_del
 *      or its number's reuse), each ready when the call returned (only
 *      its owner reads it: no other file's readiness under its tag), and
 *      a doorbell's only once its writer hung up or shut down, or its
 *      reader was shut for reading (shutdown(SHUT_RD) of any socket pair:
 *      EPOLLRDHUP, readable for ever, a datagram socket's reads finding
 *      nothing; E5 holds its sleeps), never a ring (vsched never reports
 *      one: a datagram or seqpacket message of length 0 is one too, and a
 *      datagram socket whose writer shut down or closed has not hung up:
 *      the kernel tells its reader nothing); a check-once block
 *      (deadline 0) on a vCPU with no registered fd makes no fd check
 *      (result.fd_checks == 0).
 *  E9  handlers run outside guest mode on a live vCPU; the waiter's
 *      before_sleep/after_sleep hooks alternate, and so do a vCPU's
 *      blocking/unblocking hooks.
 *  E10 no input hangs: every thread finishes within 30 s (after the
 *      teardown posts a stop request to every vCPU and kicks the waiter).
 *  E11 statistics read by one thread never go back: a kind's serviced
 *      and coalesced counts, a timer's fired and delivered; a kind's
 *      posted (derived: serviced + coalesced + the pending bit, read at two
 *      moments) by at most 1 below the most it read before (a read inside
 *      a service counts the request pending and serviced; 224-1,498 times
 *      in 6-8 million reads against a thread posting and servicing).
 *  E12 (input bit h4 bit 7: the timers' kinds are VSCHED_REQ_NO_WAKEUP;
 *      their pending expiries are then no reason to run for E4) a timer
 *      arm, set_ctl or fire_timers by a thread other than the owner, made
 *      while the owner is seen BLOCKED inside one vsched_vcpu_block() (the
 *      same block before the look and after the call), that posted an
 *      expiry (a timer's `fired` count rose across the call), ends that
 *      block: for E4's watchdog the posted expiry is a reason to run until
 *      the block returns (timers.h: an expiry posted by another thread
 *      re-wakes a blocked vCPU whatever its kind).
 *  E13 (timer service run() mode) while the service's thread is inside
 *      run() (it set a flag just before the call, which sleeps nowhere
 *      before its one-at-a-time check, and is seen asleep 'S' after; every
 *      stop is made under a mutex the check holds, and none was made): a
 *      second vsched_timer_service_run() from a worker (OP_TSVC b bit 2)
 *      and vsched_timer_service_destroy() (b bit 3) return VSCHED_ESTATE
 *      and the service stays usable (its fd; E4/E5 go on judging its
 *      expiries); with the misuse bit and no waiter, vsched_vm_destroy()
 *      at teardown, before the service is stopped, returns VSCHED_ESTATE.
 *  E14 (with the injected clock, input bit h1 bit 5) the clock is read as
 *      it is, not held at its largest value: OP_CLOCK's freeze instead
 *      steps it back by 1-200 ms or (b bit 4) makes it run backwards (each
 *      read below the last) for that long, 1 s an input at most; E1-E11
 *      hold as before (no hang, E10; no poll window that runs on, E5's
 *      count and CPU with the stand-still credit; no sleeper left past a
 *      due timer, E4).
 *  (E5 also holds the timer service's thread: its CPU to E5's share of
 *  its lifetime plus 0.3 ms per call that may move a deadline, and its fd
 *  readable at most 256 times plus 4 a ms.)
 *
 * Misuse (only when the input's misuse bit is set, and the environment has
 * no FUZZ_STATE_NO_MISUSE; each one requires a refusal or correct
 * behaviour, never a hang, crash or resurrection). M1-M4 are made while
 * the owner sleeps: a vCPU seen in mode BLOCKED inside vsched_vcpu_block(),
 * a waiter's consumer seen sleeping in the kernel inside
 * vsched_waiter_wait(); the owner is held out of its next call until the
 * misuse call has returned, so only that documented conflict is exercised
 * (the sleeper may still wake between the look and the call):
 *  M1  vsched_vcpu_destroy() by another thread: refused (< 0), or it
 *      succeeds and then E4 (the destroyed sleeper must return) and E6
 *      (it stays DESTROYED) hold.
 *  M2  vsched_vcpu_fd_add() by another thread: refused, or accepted and
 *      every later wakeup still arrives (E4).
 *  M3  vsched_vcpu_fd_del() of that foreign fd, likewise.
 *  M4  vsched_waiter_fd_add() by a thread other than the consumer:
 *      refused, or kicks still wake it (E4).
 *  M5  on a destroyed vCPU: fd_add, fd_del and set_poll are refused.
 *  M6  the owner closes a registered fd without fd_del: the fd number,
 *      reused and added again, is one registration (E8's fd_checks rule
 *      once it is deleted again), and nothing leaks (E7). Per call, a dup
 *      of it is held (its file, written by fd_write, stays in the kernel's
 *      epoll set): once fd_del'ed or its number reused, that file's
 *      readiness must neither wake the owner in a loop (E5) nor be
 *      reported under another tag (E8). A pipe or socket doorbell closed
 *      so without a dup here lives on in vsched's own dup (block.h): its
 *      tag stays live, and it is reported hung up (a datagram socket's only
 *      if it was shut for reading: its peer's close is no hang-up), until
 *      its fd_del or its number's reuse.
 *  M7  the owner's thread calls vsched_vcpu_destroy() or
 *      vsched_vcpu_block() from the vCPU's blocking or unblocking hook,
 *      vsched_waiter_destroy() or vsched_waiter_wait() from the waiter's
 *      before_sleep or after_sleep hook: VSCHED_ESTATE (doc/protocol.md,
 *      "Destroy against a sleeper"; VSCHED_EDESTROYED after M1).
 *  M8  another thread calls vsched_waiter_wait() while the consumer is
 *      held inside one (in its condition, until that call returned):
 *      VSCHED_ESTATE (waiter.h). (Calls made while the consumer sleeps in
 *      the kernel are made too, not judged: seeing it still inside after
 *      the call returned does not prove it was inside during the call.)
 *
 * What it finds on the code of issue 22 (seeds in corpus_state/, written
 * by state_seeds.py): bug 1, the futex sleep that spins after a spurious
 * wake (E5, with the late-wake `wake` callback: contract calls only);
 * bug 2, fd_add while the vCPU or waiter sleeps (E4; TSan: the fd count
 * raced); bug 3, destroy of a BLOCKED vCPU (E6 resurrection; E4 when
 * nothing ends the sleep, always when it sleeps in epoll; ASan
 * heap-use-after-free when a registered fd fires after); the fd reuse
 * drift (M6/E8); set_poll/fd_add/fd_del on a destroyed vCPU (M5);
 * vsched_vcpu_fire_timers() on a destroyed vCPU reporting an expiry it
 * could not post (E6); set_poll from another thread racing the owner's
 * destroy (TSan: sleeper_fini's relaxed exchange of own_poll).
 * E12-E14 were added for the guest-timer, polling-policy and KVM-governor
 * reviews' fixes (bb55dfa, 74df99a): seeds nowake_timer_past_arm*,
 * tsvc_run_twice_destroy, clock_back_*.
 * And, each reverted in turn, the fixes of 7320643 and 7ded4fb (doc/
 * testing.md has the times): a payload_drop re-post during vm_destroy
 * accepted (E3); timer_set_ctl on a destroyed vCPU accepted (E6); a stale
 * registration after fd_del (E5) or after its number's reuse (E8); a
 * socket doorbell at end of file ringing for ever (E5); destroy and block
 * from the hooks (M7); a second consumer let in (M8); a poll window and
 * 1 us sleeps on a clock that stands still (E5).
 * And the fix of 0ed494c, each half reverted in turn: a doorbell's
 * EPOLLRDHUP not reported (lib/sleeper.h), a datagram or seqpacket socket
 * shut for reading then spins every sleep (E5, 1.4 s from the seeds
 * doorbell_shut_rd_dgram_*, doorbell_seqpacket_empty_then_shut_rd,
 * sock_doorbells_mix; not found in 60 s without them); a seqpacket
 * message of length 0 taken for a hang-up (lib/os.c), a ring reported
 * (E8, 1.8 s: doorbell_seqpacket_empty_then_shut_rd, sock_doorbells_mix).
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <linux/futex.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <vsched/vsched.h>

#define MAX_THREADS 4
#define MAX_VCPUS 3
#define MAX_TIMERS 2
#define MAX_FDS 4
#define MAX_OPS 48       /* per thread */
#define NODES 16         /* payload nodes per thread */
#define LOG_N 256        /* call log entries per thread */
#define SLEEP_BOUND_NS 1500000000ull
#define HANG_NS 30000000000ull
/* E5's CPU floor and share of a sleep. Under TSan every atomic and call
 * costs several times more: a waiter's ADAPTIVE wait with no wakeup used
 * 22.9 ms of CPU in 134 ms on the loaded CI machine (seed
 * contract_waiter_fds, the fixed library), over the 20 ms floor. A spin
 * still fails (E5's count catches the loops that count themselves). */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FUZZ_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(FUZZ_TSAN)
#define SLEEP_CPU_MIN 60000000ull
#define SLEEP_CPU_DIV 4
#else
#define SLEEP_CPU_MIN 20000000ull
#define SLEEP_CPU_DIV 8
#endif

/* Request kinds: three plain, one payload, the two timers' (one timer per
 * kind per vCPU), the teardown's. */
enum { K_A, K_B, K_NOWAKE, K_PAY, K_TIMER, K_TIMER2, K_STOP, NKINDS };

enum op {
	OP_POST, OP_PAYLOAD, OP_BROADCAST, OP_KICK, OP_BLOCK, OP_RUN,
	OP_WAIT, OP_WKICK, OP_FD_OPEN, OP_FD_ADD, OP_FD_DEL, OP_FD_CLOSE,
	OP_FD_WRITE, OP_TIMER_ARM, OP_TIMER_CTL, OP_SET_POLL, OP_DESTROY,
	OP_FIRE, OP_CHECK_ONCE, OP_FD_HUP, OP_CLOCK,
	/* misuse */
	OP_M_DESTROY, OP_M_FD_ADD, OP_M_FD_DEL, OP_M_WFD_ADD, OP_M_DEAD_CALLS,
	OP_M_CLOSE_REG, OP_M_HOOK, OP_M_WAIT2,
	/* contract calls added after the misuse ones (their numbers were
	 * posts before: the committed seeds keep their meaning) */
	OP_TSVC, OP_STATS, OP_REPOST,
	NOPS
};
#define FIRST_MISUSE OP_M_DESTROY
#define LAST_MISUSE OP_M_WAIT2
_Static_assert(NOPS <= 32, "an op is 5 bits of the input");

static const char *const op_name[NOPS] = {
	"post", "post_payload", "broadcast", "kick", "block", "service+enter+exit",
	"waiter_wait", "waiter_kick", "fd_open", "fd_add", "fd_del", "fd_close",
	"fd_write", "timer_arm", "timer_set_ctl", "set_poll", "destroy(own)",
	"fire_timers", "block(check-once)", "fd_hangup(writer side; b bit 2: reader SHUT_RD)",
	"clock(freeze/jump)",
	"MISUSE destroy(foreign, owner in block)",
	"MISUSE fd_add(foreign, owner in block)",
	"MISUSE fd_del(foreign, owner in block)",
	"MISUSE waiter_fd_add(foreign, consumer in wait)",
	"MISUSE calls on destroyed vCPU", "MISUSE close registered fd",
	"MISUSE destroy/block/wait from the engine's hooks",
	"MISUSE second waiter consumer",
	"timer_service(fd/stop/destroy)", "stats(foreign reader)+set_guest_poll",
	"arm handler re-posts",
};

struct script_op {
	uint8_t op, a, b;
};

struct fslot {
	int fd, wfd;   /* read (registered) end; write end (pipe, socket) or fd */
	int type;      /* 0 empty, 1 pipe, 2 eventfd, 3 stream, 4 datagram,
			* 5 seqpacket socket pair (AF_UNIX) */
	int reg;       /* 0 no, 1 registered, 2 closed while registered */
	int held;      /* reg 2: a dup of the closed fd (its file lives), or -1 */
	bool vheld;    /* reg 2, no dup here: a doorbell vsched reads (a pipe's
			* or a socket's) lives on in vsched's own dup until
			* its fd_del or its number's reuse (block.h) */
	bool bell;     /* registered with VSCHED_FD_DOORBELL */
	bool hup;      /* the writer side hung up (pipe) or shut down (stream,
			* seqpacket socket), or the reader was shut for
			* reading (any socket, SHUT_RD): hung up for good */
	uint64_t tag;
};

/* Files whose registration outlived their fd number (closed under a dup,
 * then fd_del'ed or the number reused): kept open, and written by
 * fd_write, so that a registration left in the kernel's epoll set fires. */
#define MAX_LINGER 8

/* A vCPU or the waiter, with its owner thread's model. */
struct obj {
	bool is_waiter;
	struct vsched_vcpu *v;
	struct vsched_waiter *w;
	int owner;                 /* owner (consumer) thread */
	int writer;                /* timer writer thread */
	struct vsched_timer *timers[MAX_TIMERS];
	unsigned ntimers;
	bool level[MAX_TIMERS];
	_Atomic int dead;          /* 1: destroy returned 0 */
	_Atomic int dying;         /* a destroy call has begun */
	_Atomic int dead_by_misuse;
	_Atomic int in_call;       /* owner inside block/wait */
	_Atomic uint64_t block_seq; /* vsched_vcpu_block calls begun (E12) */
	_Atomic uint64_t nw_due_seq; /* E12: the block an expiry was posted in */
	_Atomic int gate;          /* misuse call in flight: owner holds */
	_Atomic int waking;        /* posters/kickers inside their call */
	_Atomic int tid;
	_Atomic uint64_t asleep_ns;
	_Atomic uint64_t del_during_call_tag;
	pthread_mutex_t misuse_lock;
	pthread_mutex_t fdlock;    /* the fd slots below */
	struct fslot fds[MAX_FDS];
	int linger_r[MAX_LINGER], linger_w[MAX_LINGER];
	unsigned nlinger;
	int foreign_fd;            /* registered by M2 (an eventfd of main's) */
	uint64_t foreign_tag;
	int foreign_reg;           /* 1 while registered */
	/* waiter condition */
	_Atomic uint64_t tokens, consumed;
	_Atomic int hook_armed;
	/* handler counts (vCPU) */
	_Atomic uint64_t handled[NKINDS];
	_Atomic uint64_t wake_calls; /* calls that may wake it (E5's allowance) */
	_Atomic int hook_act;      /* M7: the action armed for a hook */
	_Atomic int in_blocking;   /* between the blocking and unblocking hooks */
	_Atomic int consumer_in;   /* the consumer's cond ran in this wait (M8) */
	_Atomic int wait2;         /* a second consumer is trying (M8) */
	_Atomic int hold_req;      /* M8: the consumer's cond is asked to hold */
	_Atomic int held;          /* M8: the consumer holds in its cond */
	_Atomic int repost_left;   /* OP_REPOST: handler actions left */
	_Atomic unsigned repost_how; /* OP_REPOST: which action, to whom */
};

struct payload_node {
	struct vsched_payload p;
	_Atomic int state; /* 0 ours, 1 vsched's, 2 delivered or dropped */
};

struct log_ent {
	uint64_t t;
	uint8_t op, a, b;
	int rc;
};

struct worker {
	int idx;
	pthread_t th;
	struct script_op ops[MAX_OPS];
	unsigned nops;
	_Atomic int done;
	_Atomic int in_sleep; /* inside a block/wait (for the teardown) */
	struct payload_node nodes[NODES];
	struct log_ent log[LOG_N];
	_Atomic unsigned nlog;
	_Atomic int cur_op;
};

/* ---- the input's world ---- */
static struct vsched_vm *vm;
static unsigned nthreads, nvcpus;
static bool have_waiter, misuse, hooks, clock_inj, reroute;
static bool nw_timers;  /* the timers' kinds are VSCHED_REQ_NO_WAKEUP (E12) */
static bool clk_back;   /* the injected clock steps and runs back (E14) */
static _Atomic int in_vm_destroy;
static _Thread_local bool tl_consumer;
static unsigned late_mode, deadline_bias;
static struct obj objs[MAX_VCPUS + 1];
static unsigned nobjs;
static struct worker workers[MAX_THREADS];
static _Atomic int stopping, failed, watchdog_stop;
static _Atomic uint64_t accepted[NKINDS];
static _Atomic uint64_t tag_seq;
static uint64_t input_t0;
static char script_text[8192];
static int misuse_fd = -1; /* an eventfd used by M2 */
static int misuse_wfd = -1; /* an eventfd used by M4 */
/* The VM's timer service (input bits): run() or fd + dispatch() on a
 * thread of the harness; OP_TSVC reads its fd, stops or destroys it. */
static struct vsched_timer_service *tsvc;
static unsigned tsvc_mode;     /* 0 none, 1 run(), 2 fd + dispatch() */
static pthread_t tsvc_th;
static _Atomic int tsvc_state; /* 0 none, 1 live, 2 being destroyed, 3 destroyed */
static _Atomic int tsvc_quit;  /* the dispatch loop's own stop */
static pthread_rwlock_t tsvc_lock = PTHREAD_RWLOCK_INITIALIZER;
/* E13: every vsched_timer_service_stop() is made under tsvc_stop_mx and
 * sets tsvc_stopped first; tsvc_in_run is 1 from just before the thread's
 * run() to just after it returned; tsvc_tid is that thread's. */
static pthread_mutex_t tsvc_stop_mx = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int tsvc_stopped, tsvc_in_run, tsvc_tid;
static _Atomic unsigned e13_judged, e12_judged;
static _Atomic uint64_t e13_run_t0; /* a second run() in flight since (E13) */
static _Atomic int no_reposts; /* teardown: handlers re-post nothing */
static _Atomic unsigned reposts; /* handler actions taken (trace) */
static _Atomic unsigned m8_judged; /* M8 calls made with the consumer held */
static FILE *devnull;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- failure report ---- */
struct log_row {
	struct log_ent e;
	int thread;
};

static int log_cmp(const void *a, const void *b)
{
	const struct log_row *x = a, *y = b;
	return x->e.t < y->e.t ? -1 : x->e.t > y->e.t;
}

static void dump(void)
{
	static struct log_row all[MAX_THREADS * LOG_N];
	unsigned n = 0;

	fprintf(stderr, "---- input ----\n%s", script_text);
	for (unsigned i = 0; i < nthreads; i++) {
		unsigned k = atomic_load(&workers[i].nlog);
		int c = atomic_load(&workers[i].cur_op);
		for (unsigned j = 0; j < k && j < LOG_N; j++)
			all[n++] = (struct log_row){ workers[i].log[j], (int)i };
		fprintf(stderr, "thread %u: %s, in op %s%s\n", i,
			atomic_load(&workers[i].done) ? "done" : "running",
			c >= 0 && c < NOPS ? op_name[c] : "-",
			atomic_load(&workers[i].in_sleep) ? " (inside block/wait)" : "");
	}
	qsort(all, n, sizeof(all[0]), log_cmp);
	fprintf(stderr, "handler re-post actions: %u, M8 calls judged: %u, E13 looks judged: %u, E12 expiries judged: %u\n",
		atomic_load(&reposts), atomic_load(&m8_judged), atomic_load(&e13_judged),
		atomic_load(&e12_judged));
	fprintf(stderr, "---- calls that returned, in time order (us since start) ----\n");
	for (unsigned i = 0; i < n; i++)
		fprintf(stderr, "%10.1f T%d %-46s a=%u b=%u -> %d (%s)\n",
			(double)(all[i].e.t - input_t0) / 1e3, all[i].thread,
			op_name[all[i].e.op], all[i].e.a, all[i].e.b, all[i].e.rc,
			all[i].e.rc < 0 ? vsched_strerror(all[i].e.rc) : "ok");
}

/* String compares of our own: libFuzzer's strcmp/strstr hooks record
 * their arguments in its tables without a lock, which TSan reports when
 * the fuzzer's threads call them. */
static bool str_eq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

static const char *str_find(const char *h, const char *n)
{
	for (; *h; h++) {
		size_t i = 0;
		while (n[i] && h[i] == n[i])
			i++;
		if (!n[i])
			return h;
	}
	return NULL;
}

/* FUZZ_STATE_IGNORE="E5,M5,fire_timers on destroyed": failures to count
 * instead of failing on (for hunting past a known finding; never in CI). */
static _Atomic unsigned ignored_hits;

static void report_ignored(void)
{
	if (atomic_load(&ignored_hits))
		fprintf(stderr, "fuzz_state: %u failure(s) ignored (FUZZ_STATE_IGNORE)\n",
			atomic_load(&ignored_hits));
}

/* A token of FUZZ_STATE_IGNORE matches a message with the tag [token], or
 * (longer than 4 characters) a message that contains it. */
static bool ignored(const char *msg)
{
	const char *env = getenv("FUZZ_STATE_IGNORE");
	static _Atomic int registered;
	char tok[128], tag[132];

	while (env && *env) {
		size_t l = 0;
		while (env[l] && env[l] != ',')
			l++;
		snprintf(tok, sizeof(tok), "%.*s", (int)l, env);
		snprintf(tag, sizeof(tag), "[%s]", tok);
		env += l + (env[l] == ',');
		if (!l || (!str_find(msg, tag) && (l <= 4 || !str_find(msg, tok))))
			continue;
		if (!atomic_exchange(&registered, 1))
			atexit(report_ignored);
		if (atomic_fetch_add(&ignored_hits, 1) < 100)
			fprintf(stderr, "fuzz_state: ignoring %s\n", msg);
		return true;
	}
	return false;
}

/* The input being run, saved by fail() as fuzz_state-failed-<pid> in the
 * working directory before it aborts: under TSan, libFuzzer's handler of
 * that abort (from a thread of the harness) can hang before it writes its
 * crash- file (seen on 2026-12-02, "signal-unsafe call inside of a
 * signal"). */
static const uint8_t *cur_data;
static size_t cur_size;

static void save_input(void)
{
	char path[64];
	int fd;
	snprintf(path, sizeof(path), "fuzz_state-failed-%d", (int)getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, cur_data, cur_size) == (ssize_t)cur_size)
		fprintf(stderr, "fuzz_state: input saved as %s\n", path);
	close(fd);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
	char msg[512];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ignored(msg))
		return;
	pthread_mutex_lock(&once); /* one report; the process ends here */
	atomic_store(&failed, 1);
	fprintf(stderr, "\nfuzz_state: FAIL: %s\n", msg);
	save_input();
	dump();
	abort();
}

static bool known_rc(int rc)
{
	return rc >= 0 || !str_eq(vsched_strerror(rc), "unknown vsched error");
}

#define CHECK_RC(rc, what)                                                      \
	do {                                                                    \
		if (!known_rc(rc))                                              \
			fail("[E1] %s returned %d, unknown to vsched_strerror", \
			     what, rc);                                         \
	} while (0)

static void logop(struct worker *wk, uint8_t op, uint8_t a, uint8_t b, int rc)
{
	unsigned i = atomic_fetch_add(&wk->nlog, 1);
	if (i < LOG_N)
		wk->log[i] = (struct log_ent){ now_ns(), op, a, b, rc };
}

/* ---- host callbacks ---- */

/* Late wakes: the `wake` callback wakes at once, as the default does, and
 * with the input's late-wake mode sends one more FUTEX_WAKE on the same
 * word 0.1-3 ms later, from a thread of its own: a previous halt's wake
 * delayed by preemption, i.e. a spurious return of the next futex wait
 * (vm.h allows them). */
#define LATE_N 64
static struct {
	pthread_mutex_t lock;
	uint32_t *word[LATE_N];
	uint64_t at[LATE_N];
	unsigned n;
	_Atomic int stop;
	pthread_t th;
} late = { .lock = PTHREAD_MUTEX_INITIALIZER };

static _Atomic uint64_t futex_wakes; /* every FUTEX_WAKE the callbacks send */

static void futex_wake(uint32_t *word)
{
	atomic_fetch_add(&futex_wakes, 1);
	syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL,
		NULL, 0);
}

static void host_wake(uint32_t *word, void *ctx)
{
	(void)ctx;
	futex_wake(word);
	if (!late_mode)
		return;
	static const uint64_t delay[4] = { 0, 100000, 700000, 3000000 };
	pthread_mutex_lock(&late.lock);
	if (late.n < LATE_N) {
		late.word[late.n] = word;
		late.at[late.n] = now_ns() + delay[late_mode & 3];
		late.n++;
	}
	pthread_mutex_unlock(&late.lock);
}

static void *late_thread(void *arg)
{
	(void)arg;
	for (;;) {
		bool stop = atomic_load(&late.stop);
		uint64_t t = now_ns();
		pthread_mutex_lock(&late.lock);
		for (unsigned i = 0; i < late.n;) {
			if (stop || late.at[i] <= t) {
				futex_wake(late.word[i]);
				late.word[i] = late.word[late.n - 1];
				late.at[i] = late.at[late.n - 1];
				late.n--;
			} else {
				i++;
			}
		}
		pthread_mutex_unlock(&late.lock);
		if (stop)
			return NULL;
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
}

static _Atomic uint64_t kicks;
static void host_kick(struct vsched_vcpu *v, void *ctx)
{
	(void)v, (void)ctx;
	atomic_fetch_add(&kicks, 1);
}

static struct obj *obj_of(const struct vsched_vcpu *v)
{
	for (unsigned i = 0; i < nvcpus; i++)
		if (objs[i].v == v)
			return &objs[i];
	return NULL;
}

/* With the input's re-route bit, payload_drop hands the payload to the
 * next vCPU (vm.h allows any thread to post): during a vCPU's destroy an
 * accepted re-post puts it in flight again (E3 follows it), a refused one
 * drops it; during vsched_vm_destroy() every vCPU must refuse it with
 * VSCHED_EDESTROYED (vm.c marks all destroyed before freeing any). */
static void payload_drop(struct vsched_vcpu *v, unsigned kind,
			 struct vsched_payload *p, void *ctx)
{
	struct payload_node *nd = (struct payload_node *)p;
	int one = 1;
	(void)ctx;
	if (kind != K_PAY)
		fail("[E3] payload_drop for kind %u", kind);
	if (atomic_load(&nd->state) != 1)
		fail("[E3] payload dropped in state %d (not posted, or twice)",
		     atomic_load(&nd->state));
	if (reroute && nvcpus > 1) {
		struct obj *o = obj_of(v);
		unsigned to = o ? ((unsigned)(o - objs) + 1) % nvcpus : 0;
		int rc = vsched_post_payload(objs[to].v, K_PAY, p);
		CHECK_RC(rc, "vsched_post_payload (from payload_drop)");
		if (atomic_load(&in_vm_destroy) && rc != VSCHED_EDESTROYED)
			fail("[E3] payload_drop's re-post to vCPU %u during vsched_vm_destroy() "
			     "returned %d (VSCHED_EDESTROYED expected)", to, rc);
		if (rc == 0)
			return; /* in flight again */
		if (rc != VSCHED_EDESTROYED)
			fail("[E1] payload_drop's re-post to vCPU %u returned %d", to, rc);
	}
	if (!atomic_compare_exchange_strong(&nd->state, &one, 2))
		fail("[E3] payload dropped in state %d (not posted, or twice)", one);
}

/* The injected clock (input bit): CLOCK_MONOTONIC plus an offset that
 * OP_CLOCK moves, never read backwards (the largest value returned so
 * far): a freeze lowers the offset, and the clock stands still until
 * CLOCK_MONOTONIC catches up; a jump raises it. */
static _Atomic uint64_t clk_off, clk_last, clk_frozen_total;
/* E14 (clk_back): a backward run in progress, from back_start to
 * back_until (CLOCK_MONOTONIC; back_until 0: none): the clock reads its
 * value at back_start less the time since (it runs backwards, never
 * reading a later value than the last); after it, the offset less twice
 * the run (op_clock folds that into clk_off, then clears back_until). */
static _Atomic uint64_t back_start, back_until;
static pthread_mutex_t clk_mx = PTHREAD_MUTEX_INITIALIZER;

static uint64_t vm_clock(void *ctx)
{
	if (clk_back) {
		/* read as it is, backwards too */
		uint64_t bu = atomic_load(&back_until), bs = atomic_load(&back_start);
		uint64_t t = now_ns(), off = atomic_load(&clk_off);
		if (!bu || bs > bu || t < bs)
			return t + off;
		if (t < bu)
			return bs + off - (t - bs);
		return t + off - 2 * (bu - bs);
	}
	uint64_t v = now_ns() + atomic_load_explicit(&clk_off, memory_order_relaxed);
	uint64_t l = atomic_load(&clk_last);
	(void)ctx;
	while (v > l && !atomic_compare_exchange_weak(&clk_last, &l, v))
		;
	return v > l ? v : l;
}

static void hook_action(struct obj *o, int hook);

/* The thread CPU of 65,536 reads of the injected clock standing still
 * (measured once: it depends on the build's sanitizer). */
static uint64_t still_window_ns;

static void measure_still_window(void)
{
	uint64_t off = atomic_load(&clk_off), c0;
	if (still_window_ns)
		return;
	(void)vm_clock(NULL);
	atomic_fetch_sub(&clk_off, 1000000000000ull / 2); /* stands still */
	c0 = thread_cpu_ns();
	for (unsigned i = 0; i < 65536; i++)
		(void)vm_clock(NULL);
	still_window_ns = thread_cpu_ns() - c0 + 1;
	atomic_store(&clk_off, off);
	atomic_store(&clk_last, 0);
}

/* Service priorities (lower first); a handler may raise on its own vCPU
 * the plain kinds serviced after its own (K_B, K_NOWAKE: its may-raise
 * set, request.h). */
static const unsigned kind_prio[NKINDS] = { 2, 3, 4, 1, 0, 0, 5 };

static uint64_t may_raise(unsigned kind)
{
	uint64_t m = 0;
	if (kind_prio[kind] < kind_prio[K_B])
		m |= VSCHED_KIND_BIT(K_B);
	if (kind_prio[kind] < kind_prio[K_NOWAKE])
		m |= VSCHED_KIND_BIT(K_NOWAKE);
	return kind == K_PAY || kind == K_STOP ? 0 : m;
}

/* OP_REPOST armed the vCPU: its handler (of any kind that may raise one)
 * posts K_B or K_NOWAKE, kicks, or broadcasts K_NOWAKE, to itself (only
 * the kinds of its may-raise set) or to another vCPU (request.h: a
 * handler may post to other vCPUs). E2 counts these posts like the
 * scripts'; a refusal must be VSCHED_EDESTROYED of a dying target. */
static void handler_repost(struct obj *o, unsigned kind)
{
	unsigned how = atomic_load(&o->repost_how), self = (unsigned)(o - objs);
	unsigned to = (self + ((how >> 2) & 3)) % nvcpus, k = (how & 1) ? K_NOWAKE : K_B;
	struct obj *t = &objs[to];
	int left = atomic_load(&o->repost_left), rc;

	if (!may_raise(kind) || atomic_load(&no_reposts))
		return;
	do {
		if (left <= 0)
			return;
	} while (!atomic_compare_exchange_weak(&o->repost_left, &left, left - 1));
	atomic_fetch_add(&reposts, 1);
	if (to == self && !(may_raise(kind) & VSCHED_KIND_BIT(k)))
		k = K_NOWAKE;
	switch (how & 3) {
	case 0:
	case 1:
		atomic_fetch_add(&t->wake_calls, 1);
		atomic_fetch_add(&t->waking, 1);
		rc = vsched_post(t->v, k);
		if (rc == 0)
			atomic_fetch_add(&accepted[k], 1);
		atomic_fetch_sub(&t->waking, 1);
		CHECK_RC(rc, "vsched_post (from a handler)");
		if (rc && !(rc == VSCHED_EDESTROYED && atomic_load(&t->dying)))
			fail("[E1] post of kind %u from vCPU %u's handler (kind %u) to vCPU %u "
			     "returned %d", k, self, kind, to, rc);
		break;
	case 2:
		atomic_fetch_add(&t->wake_calls, 1);
		atomic_fetch_add(&t->waking, 1);
		rc = vsched_vcpu_kick(t->v);
		atomic_fetch_sub(&t->waking, 1);
		CHECK_RC(rc, "vsched_vcpu_kick (from a handler)");
		if (rc && !(rc == VSCHED_EDESTROYED && atomic_load(&t->dying)))
			fail("[E1] kick of vCPU %u from vCPU %u's handler returned %d", to,
			     self, rc);
		break;
	default:
		for (unsigned j = 0; j < nvcpus; j++)
			atomic_fetch_add(&objs[j].wake_calls, 1);
		rc = vsched_broadcast(vm, NULL, 0, K_NOWAKE);
		CHECK_RC(rc, "vsched_broadcast (from a handler)");
		if (rc < 0)
			fail("[E1] broadcast from vCPU %u's handler returned %d", self, rc);
		else
			atomic_fetch_add(&accepted[K_NOWAKE], (uint64_t)rc);
		break;
	}
}

static void handler(struct vsched_vcpu *v, unsigned kind,
		    struct vsched_payload *p, void *arg)
{
	struct obj *o = obj_of(v);
	int m = vsched_vcpu_mode(v);
	(void)arg;
	if (m != VSCHED_MODE_OUTSIDE_GUEST)
		fail("[E9] handler of kind %u ran in mode %d", kind, m);
	if (o && atomic_load(&o->dead))
		fail("[E6] handler of kind %u ran on a destroyed vCPU", kind);
	if (kind == K_PAY) {
		struct payload_node *nd = (struct payload_node *)p;
		int one = 1;
		if (!p)
			fail("[E3] payload handler without a payload");
		if (!atomic_compare_exchange_strong(&nd->state, &one, 2))
			fail("[E3] payload delivered in state %d (not posted, or twice)", one);
	} else if (p) {
		fail("[E3] plain kind %u got a payload", kind);
	}
	if (o) {
		atomic_fetch_add(&o->handled[kind], 1);
		handler_repost(o, kind);
	}
}

static bool waiter_cond(void *arg)
{
	struct obj *o = arg;
	if (tl_consumer && !atomic_load_explicit(&o->consumer_in, memory_order_relaxed))
		atomic_store(&o->consumer_in, 1);
	/* M8: held inside the wait (up to 5 ms) while a second consumer
	 * calls, so that its refusal is certain to be due */
	if (tl_consumer && atomic_load(&o->hold_req)) {
		uint64_t until = now_ns() + 5000000;
		atomic_store(&o->held, 1);
		while (atomic_load(&o->hold_req) && now_ns() < until)
			sched_yield();
		atomic_store(&o->held, 0);
	}
	return atomic_load(&o->tokens) != atomic_load(&o->consumed) ||
	       atomic_load(&stopping);
}

static void before_sleep(struct vsched_waiter *w, void *arg)
{
	struct obj *o = arg;
	int zero = 0;
	(void)w;
	if (!atomic_compare_exchange_strong(&o->hook_armed, &zero, 1))
		fail("[E9] before_sleep twice without after_sleep");
	hook_action(o, 2);
}

static void after_sleep(struct vsched_waiter *w, void *arg)
{
	struct obj *o = arg;
	int one = 1;
	(void)w;
	if (!atomic_compare_exchange_strong(&o->hook_armed, &one, 0))
		fail("[E9] after_sleep without before_sleep");
	hook_action(o, 3);
}

/* The vCPU's arch hooks (with the input's hooks bit): they alternate (E9),
 * and run M7's armed action. */
static void vcpu_blocking(struct vsched_vcpu *v, void *ctx)
{
	struct obj *o = obj_of(v);
	int zero = 0;
	(void)ctx;
	if (!o)
		return;
	if (!atomic_compare_exchange_strong(&o->in_blocking, &zero, 1))
		fail("[E9] vCPU blocking hook twice without unblocking");
	hook_action(o, 0);
}

static void vcpu_unblocking(struct vsched_vcpu *v, void *ctx)
{
	struct obj *o = obj_of(v);
	int one = 1;
	(void)ctx;
	if (!o)
		return;
	if (!atomic_compare_exchange_strong(&o->in_blocking, &one, 0))
		fail("[E9] vCPU unblocking hook without blocking");
	hook_action(o, 1);
}

/* ---- the watchdog (E4, E6 resurrection, E10) ---- */

static bool thread_sleeping(int tid)
{
	char path[64], buf[256];
	int fd, n;
	if (!tid)
		return false;
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	char *e = strrchr(buf, ')');
	return e && (e[2] == 'S' || e[2] == 'D');
}

static bool fd_readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* The reason the object has to run, or NULL. */
static const char *reason_to_run(struct obj *o)
{
	if (o->is_waiter) {
		if (waiter_cond(o))
			return "waiter condition true";
	} else {
		struct vsched_vcpu_stats s = { .size = sizeof(s) };
		uint64_t next = UINT64_MAX;
		if (atomic_load(&o->dead))
			return atomic_load(&o->dead_by_misuse) ? "destroyed under it (M1)" : NULL;
		vsched_vcpu_read_stats(o->v, &s);
		for (unsigned k = 0; k < NKINDS; k++)
			if (k != K_NOWAKE && !(nw_timers && (k == K_TIMER || k == K_TIMER2)) &&
			    s.kind[k].posted > s.kind[k].serviced + s.kind[k].coalesced)
				return k == K_STOP ? "teardown stop request pending"
						   : "waking request pending";
		vsched_vcpu_next_timer(o->v, &next);
		if (next != UINT64_MAX && next + 1000000 < vsched_now_ns(vm))
			return "guest timer past due";
		/* E12: the block this expiry was posted in is still the one */
		uint64_t due = atomic_load(&o->nw_due_seq);
		if (nw_timers && due && due == atomic_load(&o->block_seq))
			return "[E12] an expiry of its NO_WAKEUP timer kind was posted by "
			       "another thread while it was BLOCKED in this block";
	}
	const char *r = NULL;
	pthread_mutex_lock(&o->fdlock);
	for (unsigned i = 0; i < MAX_FDS && !r; i++) {
		struct fslot *f = &o->fds[i];
		/* a registration: open, or closed under a dup that keeps its
		 * file (and its epoll registration) alive */
		int fd = f->reg == 1 ? f->fd : f->reg == 2 ? f->held : -1;
		if (fd < 0)
			continue;
		if (!f->bell && fd_readable(fd))
			r = "registered fd readable";
		else if (f->bell && f->hup && f->type != 2)
			r = "registered doorbell hung up (to be reported)";
	}
	pthread_mutex_unlock(&o->fdlock);
	return r;
}

static void *watchdog(void *arg)
{
	uint64_t last = now_ns(), start = last;
	(void)arg;
	while (!atomic_load(&watchdog_stop)) {
		uint64_t t = now_ns(), dt = t - last;
		last = t;
		for (unsigned i = 0; i < nobjs; i++) {
			struct obj *o = &objs[i];
			if (!o->is_waiter && atomic_load(&o->dead) &&
			    vsched_vcpu_mode(o->v) != VSCHED_MODE_DESTROYED)
				fail("[E6] destroyed vCPU %u is back in mode %d", i,
				     vsched_vcpu_mode(o->v));
			/* a waker owes it a wakeup: hold */
			if (atomic_load(&o->waking) || !atomic_load(&o->in_call)) {
				atomic_store(&o->asleep_ns, 0);
				continue;
			}
			const char *why = reason_to_run(o);
			if (!why || !thread_sleeping(atomic_load(&o->tid))) {
				atomic_store(&o->asleep_ns, 0);
				continue;
			}
			uint64_t a = atomic_load(&o->asleep_ns) + (dt < 20000000 ? dt : 20000000);
			atomic_store(&o->asleep_ns, a);
			if (a > SLEEP_BOUND_NS)
				fail("[E4] %s %u (thread %d) asleep %.2f s in %s with a reason "
				     "to run: %s", o->is_waiter ? "waiter" : "vCPU", i, o->owner,
				     (double)a / 1e9, o->is_waiter ? "vsched_waiter_wait"
								  : "vsched_vcpu_block", why);
		}
		uint64_t r0 = atomic_load(&e13_run_t0);
		if (r0 && t > r0 && t - r0 > 2000000000u)
			fail("[E13] a second vsched_timer_service_run() while the service's "
			     "thread is inside run() has not returned in 2 s (accepted: "
			     "VSCHED_ESTATE at once expected)");
		if (t - start > HANG_NS)
			fail("[E10] the input did not finish in %llu s",
			     (unsigned long long)(HANG_NS / 1000000000u));
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* ---- the operations ---- */

static uint64_t deadline_for(unsigned a, bool *long_sleep)
{
	static const uint64_t tbl[8] = { 0, 100000, 1000000, 5000000, 20000000,
					 60000000, 200000000, VSCHED_DEADLINE_NONE };
	unsigned i = (a + deadline_bias) % 8;
	if (atomic_load(&stopping))
		i = 0;
	*long_sleep = i >= 5;
	return vsched_deadline_in(vm, tbl[i]);
}

/* Times the object's thread came back from a kernel sleep (or could
 * have): its returns from sleep, its re-sleeps after a spurious wake (a
 * vCPU's), and every FUTEX_WAKE sent meanwhile (any object's: an upper
 * bound). Each may cost the thread some CPU. */
/* Its parts, for E5's report: FUTEX_WAKEs, spurious wakeups, fast-path
 * skips and stores, halt wakeups (we_now: at the last call on this thread;
 * we_start: copied by the block or wait when it starts). */
static _Thread_local uint64_t we_now[6], we_start[6];

static uint64_t wake_events(struct obj *o, uint64_t *calls)
{
	struct vsched_halt_stats h;
	uint64_t n = atomic_load(&futex_wakes), sp = 0;
	*calls = n + atomic_load(&o->wake_calls);
	if (o->is_waiter) {
		struct vsched_waiter_stats ws = { .size = sizeof(ws) };
		vsched_waiter_read_stats(o->w, &ws);
		h = ws.halt;
		sp = ws.spurious_wakeups;
	} else {
		struct vsched_vcpu_stats st = { .size = sizeof(st) };
		vsched_vcpu_read_stats(o->v, &st);
		h = st.halt;
		sp = st.spurious_wakeups;
	}
	we_now[0] = n;
	we_now[1] = sp;
	we_now[2] = h.idle_fastpath_skips;
	we_now[3] = h.idle_fastpath_stores;
	we_now[4] = h.halt_wakeup;
	we_now[5] = h.halt_attempted_poll; /* not a wakeup: E5's still-clock credit */
	return n + sp + h.idle_fastpath_skips + h.idle_fastpath_stores + h.halt_wakeup;
}

/* After a block/wait: did it spin? (E5) The wakeups that vsched counted
 * are credited only up to what the harness can account for: 4 per call
 * that may wake the object or FUTEX_WAKE sent, 16, and with the injected
 * clock 1 a millisecond (a clock that stands still is looked at again
 * about every 1 ms, block.h): a loop that counts its own passes as
 * wakeups earns no CPU by it. */
static void check_cpu(const char *what, unsigned oi, uint64_t wall, uint64_t cpu,
		      uint64_t wakes, uint64_t calls)
{
	/* E5 also bounds the count itself: a loop that returns from its
	 * sleep at once and sleeps again (a registration left readable, a
	 * doorbell at end of file, 1 us sleeps on a clock that stands
	 * still) makes thousands, whatever CPU share it got. */
	uint64_t most = 8 * calls + 64 + (clock_inj ? wall / 500000 : 0);
	if (wakes > most)
		fail("[E5] %s of object %u: %llu wakeups counted by vsched in %.1f ms "
		     "(the harness accounts for at most %llu: %llu waking calls and "
		     "FUTEX_WAKEs%s): it loops on a wake source (spurious %llu, fast-path "
		     "skips %llu, stores %llu, halt wakeups %llu)", what, oi,
		     (unsigned long long)wakes, (double)wall / 1e6, (unsigned long long)most,
		     (unsigned long long)calls, clock_inj ? ", 2 a ms of injected clock" : "",
		     (unsigned long long)(we_now[1] - we_start[1]),
		     (unsigned long long)(we_now[2] - we_start[2]),
		     (unsigned long long)(we_now[3] - we_start[3]),
		     (unsigned long long)(we_now[4] - we_start[4]));
	uint64_t bound = 4 * calls + 16 + (clock_inj ? wall / 1000000 : 0);
	if (wakes > bound)
		wakes = bound;
	uint64_t lim = (wall / SLEEP_CPU_DIV > SLEEP_CPU_MIN ? wall / SLEEP_CPU_DIV : SLEEP_CPU_MIN) +
		       wakes * 300000;
	/* A poll window on a clock that stands still ends after 65,536 passes
	 * on one reading (block.h, doc/protocol.md): its CPU is that many
	 * clock reads and checks, a window (3 times the reads' cost measured
	 * here: 26 ms of CPU under TSan, where the CPU check alone failed). */
	if (clock_inj)
		lim += (we_now[5] - we_start[5]) * 3 * still_window_ns;
	if (wall >= 50000000 && cpu > lim)
		fail("[E5] %s of object %u: %.1f ms of CPU in %.1f ms asleep (limit %.1f ms "
		     "with %llu wakeup(s); late wake mode %u)", what, oi, (double)cpu / 1e6,
		     (double)wall / 1e6, (double)lim / 1e6, (unsigned long long)wakes,
		     late_mode);
}

/* The owner waits for a misuse call aimed at its object to return. */
static void owner_hold(struct obj *o)
{
	while (atomic_load(&o->gate))
		sched_yield();
}

static struct fslot *slot_of_tag(struct obj *o, uint64_t tag)
{
	for (unsigned i = 0; i < MAX_FDS; i++)
		if ((o->fds[i].reg == 1 ||
		     (o->fds[i].reg == 2 && (o->fds[i].held >= 0 || o->fds[i].vheld))) &&
		    o->fds[i].tag == tag)
			return &o->fds[i];
	return NULL;
}

static bool fd_ready_any(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1 && p.revents;
}

static bool tag_live(struct obj *o, uint64_t tag)
{
	if (slot_of_tag(o, tag))
		return true;
	if (o->foreign_reg && o->foreign_tag == tag)
		return true;
	return tag && atomic_load(&o->del_during_call_tag) == tag;
}

static unsigned regs_in_model(struct obj *o)
{
	unsigned n = o->foreign_reg ? 1 : 0;
	for (unsigned i = 0; i < MAX_FDS; i++)
		n += o->fds[i].reg != 0;
	return n;
}

/* Drain the registered fds the result named (the owner's own ones). */
static void drain_ready(struct obj *o, const struct vsched_block_result *r, unsigned oi)
{
	pthread_mutex_lock(&o->fdlock);
	for (unsigned j = 0; j < r->nready; j++) {
		if (!tag_live(o, r->tags[j]))
			fail("[E8] object %u: WAKE_FD names tag %llu, not a live registration",
			     oi, (unsigned long long)r->tags[j]);
		struct fslot *f = slot_of_tag(o, r->tags[j]);
		if (!f)
			continue; /* the foreign fd (M2/M4) */
		int fd = f->reg == 1 ? f->fd : f->held;
		/* Only this thread reads its fds (and vsched a pipe doorbell,
		 * which it reports only hung up): what it named is ready
		 * (a doorbell closed here lives in vsched's dup alone: hung
		 * up, since its write end went with it, and not to be looked
		 * at from here). A ring reported is named as such first
		 * (vsched read it: the doorbell is not ready either). */
		if (f->bell && !f->hup)
			fail("[E8] object %u: WAKE_FD names doorbell tag %llu, not hung up "
			     "(vsched never reports a ring)", oi, (unsigned long long)r->tags[j]);
		if (fd >= 0 && !fd_ready_any(fd))
			fail("[E8] object %u: WAKE_FD names tag %llu (fd %d%s), which is not "
			     "ready: another file's readiness reported under its tag", oi,
			     (unsigned long long)r->tags[j], fd, f->reg == 2 ? ", closed under a dup" : "");
		if (!f->bell) {
			/* a message socket's read of 0 is a message of length
			 * 0 (or, shut down, its end: bounded) */
			char buf[256];
			bool msgs = f->type == 4 || f->type == 5;
			ssize_t k;
			for (unsigned n = 0; n < 64 && (k = read(fd, buf, sizeof(buf))) >= 0 &&
					     (k > 0 || msgs); n++)
				;
		}
	}
	pthread_mutex_unlock(&o->fdlock);
	atomic_store(&o->del_during_call_tag, 0);
}

static void op_block(struct worker *wk, struct obj *o, unsigned oi, unsigned a)
{
	bool long_sleep;
	uint64_t dl = deadline_for(a, &long_sleep);
	struct vsched_block_result r = { .size = sizeof(r) };
	bool was_dead = atomic_load(&o->dead);
	uint64_t c0_calls = 0, c1_calls;
	uint64_t e0 = was_dead ? 0 : wake_events(o, &c0_calls);
	memcpy(we_start, we_now, sizeof(we_now));
	uint64_t w0 = now_ns(), c0 = thread_cpu_ns();

	atomic_store(&wk->in_sleep, 1);
	atomic_fetch_add(&o->block_seq, 1);
	atomic_store(&o->in_call, 1);
	int rc = vsched_vcpu_block_ex(o->v, dl, &r);
	atomic_store(&o->in_call, 0);
	atomic_store(&wk->in_sleep, 0);
	uint64_t wall = now_ns() - w0, cpu = thread_cpu_ns() - c0;
	logop(wk, OP_BLOCK, (uint8_t)oi, (uint8_t)a, rc);
	owner_hold(o);
	CHECK_RC(rc, "vsched_vcpu_block_ex");
	if (was_dead) {
		if (rc != VSCHED_EDESTROYED)
			fail("[E6] block on destroyed vCPU %u returned %d", oi, rc);
		return;
	}
	if (atomic_load(&o->dead)) { /* destroyed under it (M1) */
		if (vsched_vcpu_mode(o->v) != VSCHED_MODE_DESTROYED)
			fail("[E6] vCPU %u destroyed during its block is back in mode %d "
			     "after the block returned %d", oi, vsched_vcpu_mode(o->v), rc);
		return;
	}
	if (rc <= 0)
		fail("[E1] block of live vCPU %u returned %d (%s)", oi, rc,
		     vsched_strerror(rc));
	uint64_t e1 = wake_events(o, &c1_calls);
	check_cpu("vsched_vcpu_block", oi, wall, cpu, e1 - e0, c1_calls - c0_calls);
	if (rc == VSCHED_WAKE_FD)
		drain_ready(o, &r, oi);
	(void)long_sleep;
}

static void op_check_once(struct worker *wk, struct obj *o, unsigned oi)
{
	struct vsched_block_result r = { .size = sizeof(r) };
	bool dead = atomic_load(&o->dead);
	int rc = vsched_vcpu_block_ex(o->v, 0, &r);
	logop(wk, OP_CHECK_ONCE, (uint8_t)oi, 0, rc);
	CHECK_RC(rc, "vsched_vcpu_block_ex(0)");
	if (dead) {
		if (rc != VSCHED_EDESTROYED)
			fail("[E6] check-once block on destroyed vCPU %u returned %d", oi, rc);
		return;
	}
	pthread_mutex_lock(&o->fdlock);
	unsigned regs = regs_in_model(o);
	pthread_mutex_unlock(&o->fdlock);
	if (!regs && r.fd_checks)
		fail("[E8] vCPU %u has no registered fd (model), but a check-once block "
		     "made %u fd check(s): the library still counts a removed fd", oi,
		     r.fd_checks);
	if (rc == VSCHED_WAKE_FD)
		drain_ready(o, &r, oi);
}

static void op_run(struct worker *wk, struct obj *o, unsigned oi)
{
	bool dead = atomic_load(&o->dead);
	uint64_t before[NKINDS];
	for (unsigned k = 0; k < NKINDS; k++)
		before[k] = atomic_load(&o->handled[k]);
	int rc = vsched_service(o->v);
	logop(wk, OP_RUN, (uint8_t)oi, 0, rc);
	CHECK_RC(rc, "vsched_service");
	if (dead) {
		if (rc > 0)
			fail("[E6] service of destroyed vCPU %u serviced %d kinds", oi, rc);
		for (unsigned k = 0; k < NKINDS; k++)
			if (atomic_load(&o->handled[k]) != before[k])
				fail("[E6] service of destroyed vCPU %u ran a handler", oi);
		rc = vsched_vcpu_enter(o->v);
		if (rc != VSCHED_EDESTROYED)
			fail("[E6] enter of destroyed vCPU %u returned %d", oi, rc);
		rc = vsched_vcpu_exit(o->v);
		if (rc != VSCHED_EDESTROYED)
			fail("[E6] exit of destroyed vCPU %u returned %d", oi, rc);
		return;
	}
	if (rc < 0)
		fail("[E1] service of live vCPU %u returned %d", oi, rc);
	rc = vsched_vcpu_enter(o->v);
	CHECK_RC(rc, "vsched_vcpu_enter");
	if (rc == 0) {
		/* the "guest": a few microseconds, or until kicked */
		uint64_t end = now_ns() + 20000;
		while (now_ns() < end &&
		       vsched_vcpu_mode(o->v) == VSCHED_MODE_IN_GUEST)
			;
		rc = vsched_vcpu_exit(o->v);
		if (rc != 0)
			fail("[E1] exit after a committed entry returned %d", rc);
	} else if (rc != VSCHED_ENTRY_CANCELLED) {
		fail("[E1] enter of live vCPU %u returned %d", oi, rc);
	}
}

static void op_wait(struct worker *wk, struct obj *o, unsigned oi, unsigned a)
{
	bool long_sleep;
	uint64_t dl = deadline_for(a, &long_sleep);
	struct vsched_block_result r = { .size = sizeof(r) };
	uint64_t c0_calls, c1_calls;
	uint64_t e0 = wake_events(o, &c0_calls);
	memcpy(we_start, we_now, sizeof(we_now));
	uint64_t w0 = now_ns(), c0 = thread_cpu_ns();

	atomic_store(&wk->in_sleep, 1);
	atomic_store(&o->in_call, 1);
	tl_consumer = true;
	int rc = vsched_waiter_wait(o->w, dl, &r);
	tl_consumer = false;
	atomic_store(&o->consumer_in, 0);
	atomic_store(&o->in_call, 0);
	atomic_store(&wk->in_sleep, 0);
	uint64_t wall = now_ns() - w0, cpu = thread_cpu_ns() - c0;
	logop(wk, OP_WAIT, (uint8_t)oi, (uint8_t)a, rc);
	owner_hold(o);
	CHECK_RC(rc, "vsched_waiter_wait");
	if (rc == VSCHED_ESTATE && atomic_load(&o->wait2))
		return; /* M8's second consumer got in first */
	if (rc <= 0)
		fail("[E1] waiter_wait returned %d (%s)", rc, vsched_strerror(rc));
	uint64_t e1 = wake_events(o, &c1_calls);
	check_cpu("vsched_waiter_wait", oi, wall, cpu, e1 - e0, c1_calls - c0_calls);
	if (rc == VSCHED_WAKE_REQUEST)
		atomic_store(&o->consumed, atomic_load(&o->tokens));
	if (rc == VSCHED_WAKE_FD)
		drain_ready(o, &r, oi);
}

/* A post from any thread: E2 accounting, E3 nodes, E6 refusals. */
static void op_post(struct worker *wk, struct obj *o, unsigned oi, unsigned kind,
		    unsigned node)
{
	bool dead = atomic_load(&o->dead);
	int rc;

	atomic_fetch_add(&o->wake_calls, 1);
	atomic_fetch_add(&o->waking, 1);
	if (kind == K_PAY) {
		struct payload_node *nd = &wk->nodes[node % NODES];
		if (atomic_load(&nd->state) == 1) {
			atomic_fetch_sub(&o->waking, 1);
			return; /* still in flight */
		}
		atomic_store(&nd->state, 1);
		rc = vsched_post_payload(o->v, K_PAY, &nd->p);
		if (rc) {
			int one = 1;
			if (!atomic_compare_exchange_strong(&nd->state, &one, 0))
				fail("[E3] a refused payload post (%d) was delivered or dropped", rc);
		}
	} else {
		rc = vsched_post(o->v, kind);
		if (rc == 0)
			atomic_fetch_add(&accepted[kind], 1);
	}
	atomic_fetch_sub(&o->waking, 1);
	logop(wk, kind == K_PAY ? OP_PAYLOAD : OP_POST, (uint8_t)oi, (uint8_t)kind, rc);
	CHECK_RC(rc, "vsched_post");
	if (dead && rc != VSCHED_EDESTROYED)
		fail("[E6] post of kind %u to destroyed vCPU %u returned %d", kind, oi, rc);
	if (!atomic_load(&o->dying) && rc != 0)
		fail("[E1] post of kind %u to live vCPU %u returned %d", kind, oi, rc);
}

static void op_kick(struct worker *wk, struct obj *o, unsigned oi)
{
	bool dead = atomic_load(&o->dead);
	atomic_fetch_add(&o->wake_calls, 1);
	atomic_fetch_add(&o->waking, 1);
	int rc = vsched_vcpu_kick(o->v);
	atomic_fetch_sub(&o->waking, 1);
	logop(wk, OP_KICK, (uint8_t)oi, 0, rc);
	CHECK_RC(rc, "vsched_vcpu_kick");
	if (dead && rc != VSCHED_EDESTROYED)
		fail("[E6] kick of destroyed vCPU %u returned %d", oi, rc);
}

static int open_slot(struct fslot *s, unsigned kind)
{
	int p[2];
	s->bell = s->hup = s->vheld = false;
	s->held = -1;
	if (kind >= 3) {
		static const int st[3] = { SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET };
		if (socketpair(AF_UNIX, st[kind - 3] | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p))
			return -errno;
		s->fd = p[0];
		s->wfd = p[1];
		s->type = (int)kind;
	} else if (kind == 1) {
		if (pipe2(p, O_NONBLOCK | O_CLOEXEC))
			return -errno;
		s->fd = p[0];
		s->wfd = p[1];
		s->type = 1;
	} else {
		s->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (s->fd < 0)
			return -errno;
		s->wfd = s->fd;
		s->type = 2;
	}
	s->reg = 0;
	return 0;
}

static void close_slot(struct fslot *s)
{
	if (s->wfd >= 0 && s->wfd != s->fd && s->wfd != s->held)
		close(s->wfd);
	if (s->type)
		close(s->fd);
	if (s->held >= 0)
		close(s->held);
	s->type = 0;
	s->fd = s->wfd = s->held = -1;
	s->reg = 0;
	s->bell = s->hup = s->vheld = false;
}

/* A slot closed under a dup whose registration is gone from vsched's
 * table (fd_del, or its number added again): its file stays open (and
 * written by fd_write) until the input ends, so that a registration the
 * kernel's epoll set still holds would fire. fdlock held. */
static void linger_slot(struct obj *o, struct fslot *s)
{
	if (s->held >= 0 && o->nlinger < MAX_LINGER) {
		o->linger_r[o->nlinger] = s->held;
		o->linger_w[o->nlinger] = s->wfd;
		o->nlinger++;
		s->held = s->wfd = -1;
	}
	close_slot(s);
}

/* fd numbers are the process's: a number that one owner closed (M6) and
 * later passes to fd_del must not be reused meanwhile by another thread's
 * open without an order between the two (TSan reports the fd race, and
 * fd_del would act on the other thread's file: a race of the caller's
 * making, not vsched's; repro/state_tsan_fd_number_reuse_race). Every
 * open, close and fd_add/fd_del of op_fd() holds this lock. */
static pthread_mutex_t fdnum_lock = PTHREAD_MUTEX_INITIALIZER;

static void op_fd(struct worker *wk, struct obj *o, unsigned oi, unsigned op,
		  unsigned a)
{
	struct fslot *s = &o->fds[a % MAX_FDS];
	bool dead = !o->is_waiter && atomic_load(&o->dead);
	int rc = 0;
	bool called = true;

	pthread_mutex_lock(&o->fdlock);
	pthread_mutex_lock(&fdnum_lock);
	switch (op) {
	case OP_FD_OPEN:
		called = !s->type && s->reg != 2;
		if (called) {
			/* Open the lowest free numbers: a closed registered fd's
			 * number comes back (M6). Bit 4 a socket pair, of
			 * bits 6-7's type: 1 SOCK_DGRAM, 2 SOCK_SEQPACKET,
			 * else SOCK_STREAM; bit 2 a pipe; else an eventfd. */
			rc = open_slot(s, a & 16 ? ((a >> 6) == 1 ? 4 : (a >> 6) == 2 ? 5 : 3)
					 : a & 4 ? 1 : 2);
		}
		break;
	case OP_FD_ADD: {
		if (!s->type || (dead && !misuse)) {
			called = false;
			break;
		}
		uint64_t tag = atomic_fetch_add(&tag_seq, 1) + 1;
		int was = s->reg;
		/* bit 5: a doorbell (the write ends here ring it at any time,
		 * which block.h allows) */
		uint32_t ev = EPOLLIN | (was != 1 && (a & 32) ? VSCHED_FD_DOORBELL : 0);
		rc = o->is_waiter ? vsched_waiter_fd_add(o->w, s->fd, ev, tag)
				  : vsched_vcpu_fd_add(o->v, s->fd, ev, tag);
		CHECK_RC(rc, "fd_add");
		if (dead) {
			if (rc == 0)
				fail("[M5] fd_add on destroyed vCPU %u succeeded", oi);
			break;
		}
		if (was == 1 && rc != VSCHED_EEXIST)
			fail("[E8] fd_add of fd %d, registered already, returned %d "
			     "(VSCHED_EEXIST expected)", s->fd, rc);
		if (was != 1 && rc != 0 && rc != VSCHED_EEXIST)
			fail("[E1] fd_add of a fresh fd %d returned %d (%s)", s->fd, rc,
			     vsched_strerror(rc));
		if (rc == 0) {
			s->reg = 1;
			s->tag = tag;
			s->bell = ev & VSCHED_FD_DOORBELL;
			/* the same number, registered before and closed since
			 * (M6): that registration is this one now (and one a
			 * dup kept alive is gone from the set) */
			for (unsigned i = 0; i < MAX_FDS; i++)
				if (&o->fds[i] != s && o->fds[i].reg == 2 &&
				    o->fds[i].fd == s->fd)
					linger_slot(o, &o->fds[i]);
		}
		break;
	}
	case OP_FD_DEL:
		if (s->reg == 2 && !dead) {
			/* closed before its fd_del (M6): block.h, the slot is
			 * freed and the kernel's -EBADF or -ENOENT returned */
			rc = o->is_waiter ? vsched_waiter_fd_del(o->w, s->fd)
					  : vsched_vcpu_fd_del(o->v, s->fd);
			CHECK_RC(rc, "fd_del (closed fd)");
			if (rc != -EBADF && rc != -ENOENT && rc != 0)
				fail("[E8] fd_del of fd %d, closed while registered, returned %d",
				     s->fd, rc);
			linger_slot(o, s);
			break;
		}
		if (!s->type || (dead && !misuse)) {
			called = false;
			break;
		}
		rc = o->is_waiter ? vsched_waiter_fd_del(o->w, s->fd)
				  : vsched_vcpu_fd_del(o->v, s->fd);
		CHECK_RC(rc, "fd_del");
		if (dead) {
			if (rc == 0)
				fail("[M5] fd_del on destroyed vCPU %u succeeded", oi);
			break;
		}
		if (s->reg == 1 && rc != 0)
			fail("[E8] fd_del of registered fd %d returned %d", s->fd, rc);
		if (s->reg != 1 && rc == 0)
			fail("[E8] fd_del of fd %d, not registered, succeeded", s->fd);
		if (rc == 0)
			s->reg = 0;
		break;
	case OP_FD_CLOSE:
		called = s->type;
		if (!called)
			break;
		if (s->reg == 1) {
			if (!dead) {
				rc = o->is_waiter ? vsched_waiter_fd_del(o->w, s->fd)
						  : vsched_vcpu_fd_del(o->v, s->fd);
				if (rc != 0)
					fail("[E8] fd_del of registered fd %d returned %d",
					     s->fd, rc);
			}
		}
		close_slot(s);
		break;
	case OP_M_CLOSE_REG:
		/* M6: close a registered fd without fd_del; with bit 4, a dup
		 * of it held (its file, and so its epoll registration, lives
		 * on; the write end stays open and fd_write writes it) */
		called = s->type && s->reg == 1 && !dead && (!o->is_waiter || (a & 16));
		if (!called)
			break;
		if (a & 16) {
			s->held = dup(s->fd);
			if (s->wfd == s->fd)
				s->wfd = s->held;
		} else if (s->wfd != s->fd) {
			close(s->wfd);
		}
		close(s->fd);
		if (s->held < 0) {
			s->wfd = -1;
			/* A doorbell vsched reads through a dup of its own
			 * (not an eventfd): its file and registration live on
			 * there, hung up (the write end is closed, a socket's
			 * peer with it), and are reported as such (block.h).
			 * A datagram socket's peer closing is no hang-up (the
			 * kernel tells its reader nothing): it lives on there
			 * unreported, unless it was shut for reading. */
			if (s->bell && s->type != 2) {
				s->vheld = true;
				if (s->type != 4)
					s->hup = true;
			}
		}
		/* The slot keeps the closed registration (its number) until
		 * the number is added again or fd_del'ed. */
		s->type = 0;
		s->reg = 2;
		break;
	}
	pthread_mutex_unlock(&fdnum_lock);
	pthread_mutex_unlock(&o->fdlock);
	if (called)
		logop(wk, (uint8_t)op, (uint8_t)oi, (uint8_t)a, rc);
}

static void op_fd_write(struct worker *wk, struct obj *o, unsigned oi, unsigned a)
{
	struct fslot *s = &o->fds[a % MAX_FDS];
	uint64_t one = 1;
	ssize_t r = 0;
	atomic_fetch_add(&o->wake_calls, 1);
	pthread_mutex_lock(&o->fdlock);
	/* bit 2: on a datagram or seqpacket socket pair, a message of length
	 * 0 (a ring of a doorbell, never reported, E8; lib/os.c) */
	if ((s->type || s->held >= 0) && s->wfd >= 0 && !s->hup)
		r = (a & 4) && (s->type == 4 || s->type == 5)
			    ? send(s->wfd, &one, 0, MSG_DONTWAIT)
			    : write(s->wfd, &one, sizeof(one));
	/* bit 4: the files whose registration should be gone (linger_slot) */
	for (unsigned i = 0; (a & 16) && i < o->nlinger; i++)
		if (o->linger_w[i] >= 0)
			(void)!write(o->linger_w[i], &one, sizeof(one));
	pthread_mutex_unlock(&o->fdlock);
	logop(wk, OP_FD_WRITE, (uint8_t)oi, (uint8_t)a, (int)r);
}

/* The writer side of a slot goes: a stream or seqpacket socket's
 * shutdown(SHUT_WR) (the reader is at end of file for ever, without
 * EPOLLHUP; EPOLLRDHUP), a pipe's write end closed (EPOLLHUP). A doorbell
 * so is reported with its tag (block.h), for its owner to fd_del it. A
 * datagram socket's shutdown(SHUT_WR) tells its reader nothing: no
 * hang-up, never reported. With bit 2, the reader side instead: a socket's
 * shutdown(fd, SHUT_RD), readable for ever (EPOLLIN | EPOLLRDHUP) while a
 * datagram socket's reads find nothing (EAGAIN) and a seqpacket's find a
 * read of 0: hung up (0ed494c: vsched asks a doorbell for EPOLLRDHUP and
 * reports it; without, every sleep returned at once, E5). Any thread. */
static void op_fd_hup(struct worker *wk, struct obj *o, unsigned oi, unsigned a)
{
	struct fslot *s = &o->fds[a % MAX_FDS];
	int r = -1;
	atomic_fetch_add(&o->wake_calls, 1);
	pthread_mutex_lock(&o->fdlock);
	if ((a & 4) && s->type >= 3 && !s->hup) {
		r = shutdown(s->fd, SHUT_RD);
		s->hup = true;
	} else if (s->type == 4 && !s->hup) {
		r = shutdown(s->wfd, SHUT_WR); /* no hang-up */
	} else if ((s->type == 3 || s->type == 5) && !s->hup) {
		r = shutdown(s->wfd, SHUT_WR);
		s->hup = true;
	} else if (s->type == 1 && !s->hup) {
		r = close(s->wfd);
		s->wfd = -1;
		s->hup = true;
	}
	pthread_mutex_unlock(&o->fdlock);
	if (r == 0)
		logop(wk, OP_FD_HUP, (uint8_t)oi, (uint8_t)a, r);

}

/* E12: a call from a thread other than the owner that may post an expiry
 * (timer arm, set_ctl, fire_timers), made while the owner is seen BLOCKED
 * inside one vsched_vcpu_block() (its block_seq the same before the look
 * and after the call, in_call and mode BLOCKED between), that posted one
 * (a timer's `fired` count rose across it): that block must end, E4's
 * watchdog judges it. */
struct e12_snap {
	uint64_t seq, fired;
	bool blocked;
};

static uint64_t fired_sum(struct obj *o)
{
	uint64_t n = 0;
	for (unsigned t = 0; t < o->ntimers; t++) {
		struct vsched_timer_stats ts;
		if (vsched_timer_read_stats(o->timers[t], &ts) == 0)
			n += ts.fired;
	}
	return n;
}

static void e12_before(struct obj *o, struct e12_snap *sn)
{
	sn->blocked = false;
	if (!nw_timers || o->is_waiter || !o->ntimers)
		return;
	sn->seq = atomic_load(&o->block_seq);
	sn->blocked = atomic_load(&o->in_call) &&
		      vsched_vcpu_mode(o->v) == VSCHED_MODE_BLOCKED;
	sn->fired = fired_sum(o);
}

static void e12_after(struct obj *o, const struct e12_snap *sn)
{
	if (!sn->blocked || !sn->seq || atomic_load(&o->dead))
		return;
	if (fired_sum(o) > sn->fired && atomic_load(&o->block_seq) == sn->seq) {
		atomic_store(&o->nw_due_seq, sn->seq);
		atomic_fetch_add(&e12_judged, 1);
	}
}

static void op_timer(struct worker *wk, struct obj *o, unsigned oi, unsigned op,
		     unsigned a, unsigned b)
{
	struct e12_snap sn;
	if (!o->ntimers)
		return;
	unsigned ti = a % o->ntimers;
	struct vsched_timer *t = o->timers[ti];
	bool dead = atomic_load(&o->dead);
	int rc;

	atomic_fetch_add(&o->wake_calls, 1);
	atomic_fetch_add(&o->waking, 1);
	e12_before(o, &sn);
	if (op == OP_TIMER_ARM) {
		static const int64_t d[8] = { -1000000, 0, 50000, 500000, 2000000,
					      10000000, 50000000, -1 };
		int64_t x = d[b % 8];
		if (x == -1) {
			rc = vsched_timer_disarm(t);
		} else {
			uint64_t n = vsched_now_ns(vm);
			rc = vsched_timer_arm(t, x < 0 ? n - 1000000 : n + (uint64_t)x);
		}
	} else {
		if (!o->level[ti]) {
			atomic_fetch_sub(&o->waking, 1);
			return;
		}
		rc = vsched_timer_set_ctl(t, b & 1, b & 2);
	}
	e12_after(o, &sn);
	atomic_fetch_sub(&o->waking, 1);
	logop(wk, (uint8_t)op, (uint8_t)oi, (uint8_t)b, rc);
	CHECK_RC(rc, "timer write");
	if (dead && rc != VSCHED_EDESTROYED)
		fail("[E6] timer %s on destroyed vCPU %u returned %d",
		     op == OP_TIMER_ARM ? "arm/disarm" : "set_ctl", oi, rc);
	if (!atomic_load(&o->dying) && rc != 0)
		fail("[E1] timer write on live vCPU %u returned %d", oi, rc);
}

/* Bits 0-3: policy and window; bit 4 (op_set_poll): NULL; bits 5-6: the
 * contention back-off (off, preempt, sampled, off); bit 7: a budget of 50
 * instead of the default 100. */
static void poll_params(unsigned a, struct vsched_poll_params *p)
{
	static const uint64_t max[4] = { 0, 20000, 50000, 200000 };
	vsched_poll_defaults(a % 4, max[(a / 4) % 4], p);
	p->contention = ((a >> 5) & 3) % 3;
	if (a & 128)
		p->cpu_budget_pct = 50;
}

static void op_set_poll(struct worker *wk, unsigned a, unsigned b)
{
	struct vsched_poll_params p;
	int rc;
	poll_params(b, &p);
	unsigned which = a % (nobjs + 1);
	if (which == nobjs) {
		rc = vsched_vm_set_poll(vm, &p);
	} else if (objs[which].is_waiter) {
		rc = vsched_waiter_set_poll(objs[which].w, (b & 16) ? NULL : &p);
	} else {
		struct obj *o = &objs[which];
		bool dead = atomic_load(&o->dead);
		if (dead && !misuse)
			return;
		rc = vsched_vcpu_set_poll(o->v, (b & 16) ? NULL : &p);
		if (dead && rc == 0)
			fail("[M5] set_poll on destroyed vCPU %u succeeded", which);
	}
	logop(wk, OP_SET_POLL, (uint8_t)a, (uint8_t)b, rc);
	CHECK_RC(rc, "set_poll");
}

static void op_destroy_own(struct worker *wk, struct obj *o, unsigned oi)
{
	bool dead = atomic_load(&o->dead);
	atomic_store(&o->dying, 1);
	int rc = vsched_vcpu_destroy(o->v);
	logop(wk, OP_DESTROY, (uint8_t)oi, 0, rc);
	CHECK_RC(rc, "vsched_vcpu_destroy");
	if (dead && rc != VSCHED_EDESTROYED)
		fail("[E6] second destroy of vCPU %u returned %d", oi, rc);
	if (!dead && rc != 0)
		fail("[E1] destroy of idle vCPU %u by its owner returned %d", oi, rc);
	if (rc == 0) {
		atomic_store(&o->dead, 1);
		if (vsched_vcpu_mode(o->v) != VSCHED_MODE_DESTROYED)
			fail("[E6] vCPU %u not DESTROYED after destroy", oi);
	}
}

/* Misuse aimed at an object whose owner is inside block/wait: the owner
 * is held after that call until this returns. */
static void op_misuse(struct worker *wk, struct obj *o, unsigned oi, unsigned op,
		      unsigned b)
{
	int rc = 0;
	uint64_t give_up = now_ns() + 5000000;
	if (pthread_mutex_trylock(&o->misuse_lock))
		return;
	/* Wait (up to 5 ms) for the owner to be asleep inside its call (a
	 * vCPU: mode BLOCKED; a waiter: its thread sleeping in the kernel);
	 * hold it out of its next call (the gate) from the moment we saw it. */
	for (;;) {
		atomic_fetch_add(&o->gate, 1);
		if (atomic_load(&o->in_call) &&
		    (o->is_waiter ? thread_sleeping(atomic_load(&o->tid))
				  : !atomic_load(&o->dead) &&
					    vsched_vcpu_mode(o->v) == VSCHED_MODE_BLOCKED))
			break;
		atomic_fetch_sub(&o->gate, 1);
		if (now_ns() > give_up || atomic_load(&stopping)) {
			pthread_mutex_unlock(&o->misuse_lock);
			return;
		}
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
	switch (op) {
	case OP_M_DESTROY:
		atomic_store(&o->dying, 1);
		rc = vsched_vcpu_destroy(o->v);
		if (rc)
			atomic_store(&o->dying, 0);
		CHECK_RC(rc, "vsched_vcpu_destroy (misuse)");
		if (rc == 0) {
			atomic_store(&o->dead_by_misuse, 1);
			atomic_store(&o->dead, 1);
		}
		break;
	case OP_M_FD_ADD:
		if (o->foreign_reg)
			break;
		o->foreign_tag = atomic_fetch_add(&tag_seq, 1) + 1;
		rc = vsched_vcpu_fd_add(o->v, misuse_fd, EPOLLIN, o->foreign_tag);
		CHECK_RC(rc, "vsched_vcpu_fd_add (misuse)");
		if (rc == 0) {
			pthread_mutex_lock(&o->fdlock);
			o->foreign_reg = 1;
			pthread_mutex_unlock(&o->fdlock);
		}
		break;
	case OP_M_FD_DEL:
		if (!o->foreign_reg)
			break;
		rc = vsched_vcpu_fd_del(o->v, misuse_fd);
		CHECK_RC(rc, "vsched_vcpu_fd_del (misuse)");
		if (rc == 0) {
			pthread_mutex_lock(&o->fdlock);
			o->foreign_reg = 0;
			atomic_store(&o->del_during_call_tag, o->foreign_tag);
			pthread_mutex_unlock(&o->fdlock);
		}
		break;
	case OP_M_WFD_ADD:
		if (o->foreign_reg)
			break;
		o->foreign_tag = atomic_fetch_add(&tag_seq, 1) + 1;
		rc = vsched_waiter_fd_add(o->w, misuse_wfd, EPOLLIN, o->foreign_tag);
		CHECK_RC(rc, "vsched_waiter_fd_add (misuse)");
		if (rc == 0) {
			pthread_mutex_lock(&o->fdlock);
			o->foreign_reg = 1;
			pthread_mutex_unlock(&o->fdlock);
		}
		break;
	}
	logop(wk, (uint8_t)op, (uint8_t)oi, (uint8_t)b, rc);
	atomic_fetch_sub(&o->gate, 1);
	pthread_mutex_unlock(&o->misuse_lock);
}

/* M7: a destroy, block or wait made by the owner's thread from inside the
 * engine (the armed hook: 0 blocking, 1 unblocking, 2 before_sleep, 3
 * after_sleep) is refused with VSCHED_ESTATE (doc/protocol.md, "Destroy
 * against a sleeper"): never a destroy under the engine. */
static void hook_action(struct obj *o, int hook)
{
	int a = atomic_load(&o->hook_act), rc;
	if (!a || ((a - 1) & 3) != hook || !atomic_compare_exchange_strong(&o->hook_act, &a, 0))
		return;
	bool destroy = !(((a - 1) >> 2) & 1);
	unsigned oi = (unsigned)(o - objs);
	if (o->is_waiter)
		rc = destroy ? vsched_waiter_destroy(o->w) : vsched_waiter_wait(o->w, 0, NULL);
	else
		rc = destroy ? vsched_vcpu_destroy(o->v) : vsched_vcpu_block(o->v, 0);
	logop(&workers[o->owner], OP_M_HOOK, (uint8_t)oi, (uint8_t)(a - 1), rc);
	CHECK_RC(rc, "call from a hook");
	if (rc == VSCHED_EDESTROYED && !o->is_waiter && atomic_load(&o->dead))
		return; /* destroyed under its block by M1: refused so */
	if (rc != VSCHED_ESTATE)
		fail("[M7] %s of %s %u from its %s hook returned %d (%s), VSCHED_ESTATE "
		     "expected: the owner is inside the engine",
		     destroy ? "destroy" : o->is_waiter ? "waiter_wait" : "vcpu_block",
		     o->is_waiter ? "waiter" : "vCPU", oi,
		     (const char *const[]){ "blocking", "unblocking", "before_sleep",
					    "after_sleep" }[hook],
		     rc, rc ? vsched_strerror(rc) : "accepted");
}

/* M7's arming, by the owner: its next matching hook makes the call. */
static void op_hook_arm(struct worker *wk, struct obj *o, unsigned oi, unsigned b)
{
	unsigned hook = o->is_waiter ? 2 + (b & 1) : b & 1;
	atomic_store(&o->hook_act, (int)(1 + (hook | (b & 4))));
	logop(wk, OP_M_HOOK, (uint8_t)oi, (uint8_t)b, 0);
}

/* M8: a second consumer of the waiter (not its consumer thread) calls
 * vsched_waiter_wait() while the consumer is inside one: waiter.h
 * promises VSCHED_ESTATE. Tried for up to 5 ms, each time the consumer's
 * condition has run in its current wait (it is past the engine's entry;
 * it is held out of its next call meanwhile). Judged only when the
 * consumer was held in its condition for the whole call: a consumer seen
 * inside after the call may have left the engine and not yet marked its
 * return (the window between the library's release and the harness's
 * store, a false M8 once under TSan: repro/state_tsan_m8_...). */
static void op_wait2(struct worker *wk, struct obj *o, unsigned oi, unsigned b)
{
	uint64_t give_up = now_ns() + 5000000;
	unsigned tries = 0;
	if (pthread_mutex_trylock(&o->misuse_lock))
		return;
	atomic_fetch_add(&o->wait2, 1);
	while (now_ns() < give_up && !atomic_load(&stopping) && tries < 200) {
		atomic_fetch_add(&o->gate, 1);
		if (!atomic_load(&o->in_call) || !atomic_load(&o->consumer_in)) {
			atomic_fetch_sub(&o->gate, 1);
			sched_yield();
			continue;
		}
		tries++;
		uint64_t dl = (b & 1) ? vsched_deadline_in(vm, 100000) : 0;
		struct vsched_block_result r = { .size = sizeof(r) };
		/* ask the consumer to hold in its condition (it runs it when it
		 * next looks: a wakeup, or at once when kicked, unless b bit 1) */
		atomic_store(&o->hold_req, 1);
		if (!(b & 2)) {
			atomic_fetch_add(&o->wake_calls, 1);
			atomic_fetch_add(&o->waking, 1);
			vsched_waiter_kick(o->w);
			atomic_fetch_sub(&o->waking, 1);
		}
		for (uint64_t until = now_ns() + 1000000;
		     !atomic_load(&o->held) && atomic_load(&o->in_call) && now_ns() < until;)
			sched_yield();
		bool inside = atomic_load(&o->held);
		int rc = vsched_waiter_wait(o->w, dl, &r);
		inside = inside && atomic_load(&o->held);
		atomic_store(&o->hold_req, 0);
		atomic_fetch_add(&m8_judged, inside);
		atomic_fetch_sub(&o->gate, 1);
		logop(wk, OP_M_WAIT2, (uint8_t)oi, (uint8_t)b, rc);
		CHECK_RC(rc, "vsched_waiter_wait (second consumer)");
		if (inside && rc != VSCHED_ESTATE)
			fail("[M8] a second consumer's waiter_wait returned %d (%s) while the "
			     "consumer was inside its wait: VSCHED_ESTATE expected", rc,
			     rc < 0 ? vsched_strerror(rc) : "accepted");
		if (rc == VSCHED_WAKE_REQUEST)
			atomic_store(&o->consumed, atomic_load(&o->tokens));
	}
	atomic_fetch_sub(&o->wait2, 1);
	pthread_mutex_unlock(&o->misuse_lock);
}

/* The injected clock moves: bit 0 a freeze (it stands still for 1, 10, 50
 * or 200 ms of CLOCK_MONOTONIC, 1 s at most an input), else a jump
 * forward (0.1 ms, 5 ms, 100 ms or 2 s); then, unless bit 3, every vCPU
 * and the waiter are kicked, as block.h asks after a jump, and a live
 * timer service is told (vsched_timer_service_clock_changed(), timer.h). */
static void op_clock(struct worker *wk, unsigned b)
{
	static const uint64_t fz[4] = { 1000000, 10000000, 50000000, 200000000 };
	static const uint64_t jp[4] = { 100000, 5000000, 100000000, 2000000000 };
	uint64_t d;
	if (!clock_inj)
		return;
	if (clk_back && (b & 1)) {
		/* E14: the clock steps back by d, or (bit 4) runs backwards
		 * for d of CLOCK_MONOTONIC (1 s of either at most an input) */
		d = fz[(b >> 1) & 3];
		if (atomic_fetch_add(&clk_frozen_total, d) + d > 1000000000)
			return;
		pthread_mutex_lock(&clk_mx);
		if (b & 16) {
			uint64_t t = now_ns();
			atomic_store(&back_start, t);
			atomic_store(&back_until, t + d);
			struct timespec ts = { (time_t)(d / 1000000000u), (long)(d % 1000000000u) };
			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
			while (now_ns() < t + d)
				sched_yield();
			atomic_fetch_sub(&clk_off, 2 * d);
			atomic_store(&back_until, 0);
		} else {
			atomic_fetch_sub(&clk_off, d);
		}
		pthread_mutex_unlock(&clk_mx);
	} else if (b & 1) {
		d = fz[(b >> 1) & 3];
		if (atomic_fetch_add(&clk_frozen_total, d) + d > 1000000000)
			return;
		(void)vm_clock(NULL); /* what it stands still at */
		atomic_fetch_sub(&clk_off, d);

	} else {
		d = jp[(b >> 1) & 3];
		atomic_fetch_add(&clk_off, d);
	}
	for (unsigned i = 0; i < nobjs; i++) {
		struct obj *o = &objs[i];
		atomic_fetch_add(&o->wake_calls, 1);
		if (b & 8)
			continue;
		atomic_fetch_add(&o->waking, 1);
		int rc = o->is_waiter ? vsched_waiter_kick(o->w) : vsched_vcpu_kick(o->v);
		atomic_fetch_sub(&o->waking, 1);
		CHECK_RC(rc, "kick after a clock jump");
	}
	if (!(b & 8) && tsvc_mode) {
		pthread_rwlock_rdlock(&tsvc_lock); /* not against its destroy */
		if (atomic_load(&tsvc_state) == 1) {
			int rc = vsched_timer_service_clock_changed(tsvc);
			CHECK_RC(rc, "vsched_timer_service_clock_changed");
			if (rc)
				fail("[E1] timer_service_clock_changed returned %d", rc);
		}
		pthread_rwlock_unlock(&tsvc_lock);
	}
	logop(wk, OP_CLOCK, 0, (uint8_t)b, 0);
}

/* M5 and E6 on a destroyed vCPU, from its owner (no block in flight). */
static void op_dead_calls(struct worker *wk, struct obj *o, unsigned oi, unsigned b)
{
	struct vsched_poll_params p;
	int rc;
	if (!atomic_load(&o->dead))
		return;
	poll_params(b, &p);
	rc = vsched_vcpu_set_poll(o->v, &p);
	logop(wk, OP_M_DEAD_CALLS, (uint8_t)oi, 0, rc);
	if (rc == 0)
		fail("[M5] set_poll on destroyed vCPU %u succeeded", oi);
	uint64_t tag = atomic_fetch_add(&tag_seq, 1) + 1;
	rc = vsched_vcpu_fd_add(o->v, misuse_fd, EPOLLIN, tag);
	logop(wk, OP_M_DEAD_CALLS, (uint8_t)oi, 1, rc);
	if (rc == 0)
		fail("[M5] fd_add on destroyed vCPU %u succeeded", oi);
	rc = vsched_vcpu_fd_del(o->v, misuse_fd);
	logop(wk, OP_M_DEAD_CALLS, (uint8_t)oi, 2, rc);
	if (rc == 0)
		fail("[M5] fd_del on destroyed vCPU %u succeeded", oi);
	struct vsched_timer_desc td = { .size = sizeof(td), .kind = K_TIMER };
	struct vsched_timer *t = NULL;
	rc = vsched_timer_create(o->v, &td, &t);
	logop(wk, OP_M_DEAD_CALLS, (uint8_t)oi, 3, rc);
	if (rc != VSCHED_EDESTROYED)
		fail("[E6] timer_create on destroyed vCPU %u returned %d", oi, rc);
}

/* ---- the timer service, stats readers, handler re-posts ---- */

/* The service's thread: run() (mode 1), or a loop of poll() on its fd and
 * dispatch() when readable (mode 2) until tsvc_quit. Either way it must
 * not spin: its CPU is held to E5's share of its lifetime plus 0.3 ms per
 * call that may move a deadline (every object's wake_calls), and the
 * dispatch loop to 256 readable dispatches plus 4 a ms (an expiry before
 * the VM's clock reaches the deadline fires nothing and is programmed
 * again; a clock that stands still doubles the interval, timer.h). */
static void *tsvc_main(void *arg)
{
	uint64_t t0 = now_ns(), c0 = thread_cpu_ns(), n = 0, calls = 0, wall, cpu;
	int rc = 0;
	(void)arg;
	atomic_store(&tsvc_tid, (int)syscall(SYS_gettid));
	if (tsvc_mode == 1) {
		atomic_store(&tsvc_in_run, 1);
		rc = vsched_timer_service_run(tsvc);
		atomic_store(&tsvc_in_run, 0);
		CHECK_RC(rc, "vsched_timer_service_run");
		if (rc)
			fail("[E1] timer_service_run returned %d", rc);
	} else {
		int fd = vsched_timer_service_fd(tsvc);
		if (fd < 0)
			fail("[E1] timer_service_fd returned %d", fd);
		while (fd >= 0 && !atomic_load(&tsvc_quit) && !atomic_load(&failed)) {
			struct pollfd pf = { .fd = fd, .events = POLLIN };
			int k = poll(&pf, 1, 2);
			if (k < 0 && errno != EINTR)
				fail("[E1] poll on the timer service's fd: %s", strerror(errno));
			if (k <= 0)
				continue;
			n++;
			rc = vsched_timer_service_dispatch(tsvc);
			CHECK_RC(rc, "vsched_timer_service_dispatch");
			if (rc < 0)
				fail("[E1] timer_service_dispatch returned %d", rc);
		}
	}
	wall = now_ns() - t0;
	cpu = thread_cpu_ns() - c0;
	for (unsigned i = 0; i < nobjs; i++)
		calls += atomic_load(&objs[i].wake_calls);
	if (n > 256 + 4 * (wall / 1000000))
		fail("[E5] the timer service's fd was readable %llu times in %.1f ms "
		     "(a dispatch that leaves it readable loops)", (unsigned long long)n,
		     (double)wall / 1e6);
	uint64_t lim = wall / SLEEP_CPU_DIV;
	if (lim < SLEEP_CPU_MIN)
		lim = SLEEP_CPU_MIN;
	lim += 300000 * (calls + n);
	if (cpu > lim)
		fail("[E5] the timer service's thread (%s) used %.1f ms of CPU in %.1f ms "
		     "(limit %.1f ms)", tsvc_mode == 1 ? "run" : "dispatch",
		     (double)cpu / 1e6, (double)wall / 1e6, (double)lim / 1e6);
	return NULL;
}

/* Stop the service's thread and join it (mode 1: vsched_timer_service_stop;
 * mode 2: the loop's flag, and a stop call all the same). */
static int tsvc_stop(void)
{
	pthread_mutex_lock(&tsvc_stop_mx);
	atomic_store(&tsvc_stopped, 1);
	int rc = vsched_timer_service_stop(tsvc);
	pthread_mutex_unlock(&tsvc_stop_mx);
	return rc;
}

/* E13's precondition, tsvc_stop_mx held (no stop can come): the service's
 * thread is inside run() past its one-at-a-time check. It set tsvc_in_run
 * just before calling run(), which sleeps nowhere before that check, and
 * it is seen asleep in the kernel (thread_sleeping()) after that store; no stop was
 * made, so run() cannot have returned (a failure of its own fails E1). */
static bool tsvc_run_active(void)
{
	if (tsvc_mode != 1 || atomic_load(&tsvc_stopped) || !atomic_load(&tsvc_in_run))
		return false;
	return thread_sleeping(atomic_load(&tsvc_tid)) && atomic_load(&tsvc_in_run);
}

/* E13, from a worker (tsvc_lock read-held, the service live): a second
 * run() (b & 4) and a destroy (b & 8) while the thread's run() is active
 * are refused with VSCHED_ESTATE, and the service stays usable (its fd). */
static void tsvc_e13(struct worker *wk, unsigned b)
{
	int rc;
	pthread_mutex_lock(&tsvc_stop_mx);
	for (int tries = 0; tries < 20 && !tsvc_run_active(); tries++) {
		struct timespec ts = { 0, 200000 };
		pthread_mutex_unlock(&tsvc_stop_mx);
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&tsvc_stop_mx);
	}
	if (!tsvc_run_active()) {
		pthread_mutex_unlock(&tsvc_stop_mx);
		return;
	}
	atomic_fetch_add(&e13_judged, 1);
	if (b & 4) {
		atomic_store(&e13_run_t0, now_ns()); /* the watchdog: at once */
		rc = vsched_timer_service_run(tsvc);
		atomic_store(&e13_run_t0, 0);
		logop(wk, OP_TSVC, 1, (uint8_t)b, rc);
		if (rc != VSCHED_ESTATE)
			fail("[E13] a second vsched_timer_service_run() while the service's "
			     "thread is inside run() returned %d (VSCHED_ESTATE expected)", rc);
	}
	if (b & 8) {
		rc = vsched_timer_service_destroy(tsvc);
		logop(wk, OP_TSVC, 2, (uint8_t)b, rc);
		if (rc != VSCHED_ESTATE)
			fail("[E13] vsched_timer_service_destroy() while the service's thread "
			     "is inside run() returned %d (VSCHED_ESTATE expected)", rc);
		rc = vsched_timer_service_fd(tsvc);
		if (rc < 0)
			fail("[E13] the service's fd after a refused destroy: %d", rc);
	}
	pthread_mutex_unlock(&tsvc_stop_mx);
}

static void tsvc_join(void)
{
	int rc = tsvc_stop();
	if (rc)
		fail("[E1] timer_service_stop returned %d", rc);
	atomic_store(&tsvc_quit, 1);
	pthread_join(tsvc_th, NULL);
}

/* OP_TSVC: b % 4 = 0, 1 its fd; 2 stop (run() returns for good); 3 stop,
 * join and destroy it while the timer writers arm (timer.h: arms racing
 * the destroy are safe). Any thread; the lock keeps the pointer live. */
static void op_tsvc(struct worker *wk, unsigned b)
{
	int rc = 0, one = 1;
	if (!tsvc_mode)
		return;
	if (b % 4 == 3) {
		if (!atomic_compare_exchange_strong(&tsvc_state, &one, 2))
			return;
		pthread_rwlock_wrlock(&tsvc_lock);
		tsvc_join();
		rc = vsched_timer_service_destroy(tsvc);
		atomic_store(&tsvc_state, 3);
		pthread_rwlock_unlock(&tsvc_lock);
		if (rc)
			fail("[E1] timer_service_destroy returned %d", rc);
	} else {
		pthread_rwlock_rdlock(&tsvc_lock);
		if (atomic_load(&tsvc_state) == 1) {
			rc = b % 4 == 2 ? tsvc_stop() : vsched_timer_service_fd(tsvc);
			if (rc < 0)
				fail("[E1] timer_service_%s returned %d",
				     b % 4 == 2 ? "stop" : "fd", rc);
			if (b % 4 < 2 && (b & 12))
				tsvc_e13(wk, b);
		}
		pthread_rwlock_unlock(&tsvc_lock);
	}
	logop(wk, OP_TSVC, 0, (uint8_t)(b % 4), rc);
	CHECK_RC(rc, "timer service call");
}

/* OP_STATS: another thread reads a vCPU's statistics while its owner
 * runs (stats.h: any thread; read_stats also on a destroyed vCPU): every
 * reader, each of its timers' (timer_get, read_stats), next_timer, the
 * VM's poll parameters; b bit 0 writes them (text or JSON, bit 1) to
 * /dev/null; b bit 2 sets the guest's poll control (allow unless bit 3).
 * E11: a counter read twice by one thread never goes back. */
static _Thread_local uint64_t seen_kind[MAX_VCPUS][NKINDS][3];
static _Thread_local uint64_t seen_timer[MAX_VCPUS][MAX_TIMERS][2];

static void check_mono(const char *what, unsigned oi, unsigned k, uint64_t *seen,
		       uint64_t now, uint64_t slack)
{
	if (now + slack < *seen)
		fail("[E11] vCPU %u %s (%u) went back from %llu to %llu between two reads "
		     "of one thread", oi, what, k, (unsigned long long)*seen,
		     (unsigned long long)now);
	if (now > *seen)
		*seen = now;
}

static void op_stats(struct worker *wk, struct obj *o, unsigned oi, unsigned b)
{
	struct vsched_vcpu_stats st = { .size = sizeof(st) };
	const struct vsched_stat_desc *descs;
	struct vsched_poll_params pp = { .size = sizeof(pp) };
	unsigned nd = 0, nv = 0;
	uint64_t dl = 0;
	bool dead = atomic_load(&o->dead);
	int rc;

	if ((rc = vsched_vcpu_read_stats(o->v, &st)))
		fail("[E1] vcpu_read_stats of vCPU %u returned %d", oi, rc);
	for (unsigned k = 0; k < NKINDS; k++) {
		check_mono("kind posted", oi, k, &seen_kind[oi][k][0], st.kind[k].posted, 1);
		check_mono("kind serviced", oi, k, &seen_kind[oi][k][1], st.kind[k].serviced, 0);
		check_mono("kind coalesced", oi, k, &seen_kind[oi][k][2], st.kind[k].coalesced,
			   0);
	}
	/* request.h: any thread (they take the VM's lock, 5c7420a) */
	for (unsigned k = 0; k < NKINDS; k++) {
		const char *nm = vsched_request_name(vm, k);
		if (!nm || nm[0] != 'k' || nm[1] != (char)('0' + k) || nm[2])
			fail("[E1] vsched_request_name(kind %u) returned %s", k, nm ? nm : "NULL");
	}
	unsigned ek = 0, er = 0;
	if ((rc = vsched_request_table_error(vm, &ek, &er)))
		fail("[E1] vsched_request_table_error of a finalized table returned %d", rc);
	if ((rc = vsched_vcpu_stat_descs(&descs, &nd, &nv)) || !nd || !nv)
		fail("[E1] vcpu_stat_descs returned %d (%u descriptors, %u values)", rc, nd, nv);
	uint64_t *vals = calloc(nv, sizeof(*vals));
	if (vals && (rc = vsched_vcpu_stat_values(o->v, vals, nv)))
		fail("[E1] vcpu_stat_values of vCPU %u returned %d", oi, rc);
	free(vals);
	if ((b & 1) && devnull &&
	    (rc = vsched_vcpu_stats_write(o->v, devnull, (b >> 1) & 1)))
		fail("[E1] vcpu_stats_write of vCPU %u returned %d", oi, rc);
	for (unsigned t = 0; t < o->ntimers; t++) {
		struct vsched_timer_stats ts;
		bool expired;
		if ((rc = vsched_timer_get(o->timers[t], &dl, &expired)))
			fail("[E1] timer_get returned %d", rc);
		if ((rc = vsched_timer_read_stats(o->timers[t], &ts)))
			fail("[E1] timer_read_stats returned %d", rc);
		check_mono("timer fired", oi, t, &seen_timer[oi][t][0], ts.fired, 0);
		check_mono("timer delivered", oi, t, &seen_timer[oi][t][1], ts.delivered, 0);
	}
	if ((rc = vsched_vcpu_next_timer(o->v, &dl)))
		fail("[E1] vcpu_next_timer of vCPU %u returned %d", oi, rc);
	if ((rc = vsched_vm_get_poll(vm, &pp)))
		fail("[E1] vm_get_poll returned %d", rc);
	rc = 0;
	if (b & 4) {
		atomic_fetch_add(&o->wake_calls, 1);
		rc = vsched_vcpu_set_guest_poll(o->v, !(b & 8));
		CHECK_RC(rc, "vsched_vcpu_set_guest_poll");
		if (dead && rc != VSCHED_EDESTROYED)
			fail("[E6] set_guest_poll on destroyed vCPU %u returned %d", oi, rc);
		if (!atomic_load(&o->dying) && rc)
			fail("[E1] set_guest_poll on live vCPU %u returned %d", oi, rc);
	}
	logop(wk, OP_STATS, (uint8_t)oi, (uint8_t)b, rc);
}

/* OP_REPOST: arm vCPU a's handler for 2 (b bit 4: 8) more actions of
 * kind b & 3 (post K_B, post K_NOWAKE, kick, broadcast) to vCPU
 * (a + (b >> 2 & 3)) % nvcpus: handler_repost(). */
static void op_repost(struct worker *wk, struct obj *o, unsigned oi, unsigned b)
{
	if (atomic_load(&o->repost_left) < 32) {
		atomic_store(&o->repost_how, b & 0xf);
		atomic_fetch_add(&o->repost_left, (b & 16) ? 8 : 2);
	}
	logop(wk, OP_REPOST, (uint8_t)oi, (uint8_t)b, 0);
}

static struct obj *own_vcpu(unsigned t)
{
	for (unsigned i = 0; i < nvcpus; i++)
		if (objs[i].owner == (int)t)
			return &objs[i];
	return NULL;
}

static struct obj *own_waiter(unsigned t)
{
	return have_waiter && objs[nvcpus].owner == (int)t ? &objs[nvcpus] : NULL;
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	struct obj *mine = own_vcpu((unsigned)wk->idx), *mw = own_waiter((unsigned)wk->idx);
	int tid = (int)syscall(SYS_gettid);

	if (mine)
		atomic_store(&mine->tid, tid);
	if (mw)
		atomic_store(&mw->tid, tid);
	for (unsigned i = 0; i < wk->nops && !atomic_load(&failed); i++) {
		const struct script_op *s = &wk->ops[i];
		unsigned vi = s->a % nvcpus;
		struct obj *tv = &objs[vi];
		atomic_store(&wk->cur_op, s->op);
		switch (s->op) {
		case OP_POST:
			op_post(wk, tv, vi, (s->b % 3), 0); /* K_A, K_B, K_NOWAKE */
			break;
		case OP_PAYLOAD:
			op_post(wk, tv, vi, K_PAY, s->b);
			break;
		case OP_BROADCAST: {
			unsigned k = s->b % 3;
			for (unsigned j = 0; j < nvcpus; j++)
				atomic_fetch_add(&objs[j].wake_calls, 1);
			int rc = vsched_broadcast(vm, NULL, 0, k);
			logop(wk, OP_BROADCAST, 0, (uint8_t)k, rc);
			CHECK_RC(rc, "vsched_broadcast");
			if (rc < 0)
				fail("[E1] broadcast returned %d", rc);
			atomic_fetch_add(&accepted[k], (uint64_t)rc);
			break;
		}
		case OP_KICK:
			op_kick(wk, tv, vi);
			break;
		case OP_BLOCK:
			if (mine)
				op_block(wk, mine, (unsigned)(mine - objs), s->b);
			else if (mw)
				op_wait(wk, mw, nvcpus, s->b);
			break;
		case OP_CHECK_ONCE:
			if (mine)
				op_check_once(wk, mine, (unsigned)(mine - objs));
			break;
		case OP_RUN:
			if (mine)
				op_run(wk, mine, (unsigned)(mine - objs));
			break;
		case OP_WAIT:
			if (mw)
				op_wait(wk, mw, nvcpus, s->b);
			else if (mine)
				op_block(wk, mine, (unsigned)(mine - objs), s->b);
			break;
		case OP_WKICK:
			if (have_waiter) {
				struct obj *w = &objs[nvcpus];
				atomic_fetch_add(&w->wake_calls, 1);
				atomic_fetch_add(&w->waking, 1);
				atomic_fetch_add(&w->tokens, 1);
				int rc = vsched_waiter_kick(w->w);
				atomic_fetch_sub(&w->waking, 1);
				logop(wk, OP_WKICK, 0, 0, rc);
				if (rc < 0)
					fail("[E1] waiter_kick returned %d", rc);
			}
			break;
		case OP_FD_OPEN:
		case OP_FD_ADD:
		case OP_FD_DEL:
		case OP_FD_CLOSE:
		case OP_M_CLOSE_REG: {
			struct obj *o = (s->b & 8) && mw ? mw : mine ? mine : mw;
			if (o)
				op_fd(wk, o, (unsigned)(o - objs), s->op, s->b);
			break;
		}
		case OP_FD_WRITE: {
			unsigned oi = s->a % nobjs;
			op_fd_write(wk, &objs[oi], oi, s->b);
			break;
		}
		case OP_TIMER_ARM:
		case OP_TIMER_CTL:
			for (unsigned j = 0; j < nvcpus; j++)
				if (objs[j].writer == wk->idx && (s->a % nvcpus) == j)
					op_timer(wk, &objs[j], j, s->op, s->a / 4, s->b);
			break;
		case OP_SET_POLL:
			op_set_poll(wk, s->a, s->b);
			break;
		case OP_DESTROY:
			/* the owner, when it is done with it (rarely) */
			if (mine && (s->b & 7) == 0)
				op_destroy_own(wk, mine, (unsigned)(mine - objs));
			break;
		case OP_FIRE: {
			bool dead = atomic_load(&tv->dead);
			struct e12_snap sn;
			atomic_fetch_add(&tv->wake_calls, 1);
			atomic_fetch_add(&tv->waking, 1);
			e12_before(tv, &sn);
			int rc = vsched_vcpu_fire_timers(tv->v);
			e12_after(tv, &sn);
			atomic_fetch_sub(&tv->waking, 1);
			logop(wk, OP_FIRE, (uint8_t)vi, 0, rc);
			CHECK_RC(rc, "vsched_vcpu_fire_timers");
			if (dead && rc > 0)
				fail("[E6] fire_timers on destroyed vCPU %u posted %d", vi, rc);
			break;
		}
		case OP_M_DESTROY:
		case OP_M_FD_ADD:
		case OP_M_FD_DEL:
			if (tv->owner != wk->idx)
				op_misuse(wk, tv, vi, s->op, s->b);
			break;
		case OP_M_WFD_ADD:
			if (have_waiter && objs[nvcpus].owner != wk->idx)
				op_misuse(wk, &objs[nvcpus], nvcpus, s->op, s->b);
			break;
		case OP_M_DEAD_CALLS:
			if (mine)
				op_dead_calls(wk, mine, (unsigned)(mine - objs), s->b);
			break;
		case OP_FD_HUP: {
			unsigned oi = s->a % nobjs;
			op_fd_hup(wk, &objs[oi], oi, s->b);
			break;
		}
		case OP_CLOCK:
			op_clock(wk, s->b);
			break;
		case OP_M_HOOK: {
			struct obj *o = (s->b & 8) && mw ? mw : mine && !atomic_load(&mine->dead) ? mine : mw;
			if (o && hooks)
				op_hook_arm(wk, o, (unsigned)(o - objs), s->b);
			break;
		}
		case OP_M_WAIT2:
			if (have_waiter && objs[nvcpus].owner != wk->idx)
				op_wait2(wk, &objs[nvcpus], nvcpus, s->b);
			break;
		case OP_TSVC:
			op_tsvc(wk, s->b);
			break;
		case OP_STATS:
			op_stats(wk, tv, vi, s->b);
			break;
		case OP_REPOST:
			op_repost(wk, tv, vi, s->b);
			break;

		}
	}
	atomic_store(&wk->cur_op, -1);
	atomic_store(&wk->done, 1);
	return NULL;
}

/* ---- decoding ---- */

struct input {
	const uint8_t *d;
	size_t n, i;
};

static unsigned take(struct input *in)
{
	return in->i < in->n ? in->d[in->i++] : 0;
}

static void describe(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void describe(const char *fmt, ...)
{
	size_t l = strlen(script_text);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(script_text + l, sizeof(script_text) - l, fmt, ap);
	va_end(ap);
}

/* The process's epoll, eventfd and timerfd descriptors (what vsched opens;
 * a sanitizer's symbolizer pipes come and go on their own). */
static unsigned count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;
	struct dirent *e;
	char path[300], target[64];
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		ssize_t l;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		l = readlink(path, target, sizeof(target) - 1);
		if (l <= 0)
			continue;
		target[l] = 0;
		n += str_eq(target, "anon_inode:[eventfd]") ||
		     str_eq(target, "anon_inode:[eventpoll]") ||
		     str_eq(target, "anon_inode:[timerfd]");
	}
	closedir(d);
	return n;
}

static bool no_nodes_in_flight(void)
{
	for (unsigned t = 0; t < nthreads; t++)
		for (unsigned i = 0; i < NODES; i++)
			if (atomic_load(&workers[t].nodes[i].state) == 1)
				return false;
	return true;
}

/* FUZZ_STATE_MISUSE=destroy,fd_add,fd_del,wfd_add,dead_calls,close_reg,hook,
 * wait2: the misuse calls to make (default all), to hunt past a known
 * finding. */

static bool misuse_allowed(unsigned op)
{
	static const char *const name[] = { "destroy", "fd_add", "fd_del", "wfd_add",
					    "dead_calls", "close_reg", "hook", "wait2" };
	_Static_assert(sizeof(name) / sizeof(name[0]) == LAST_MISUSE + 1 - FIRST_MISUSE,
		       "a name for each misuse call");
	const char *env = getenv("FUZZ_STATE_MISUSE");
	const char *p;
	size_t l;

	if (!env)
		return true;
	p = str_find(env, name[op - FIRST_MISUSE]);
	l = strlen(name[op - FIRST_MISUSE]);
	return p && (p == env || p[-1] == ',') && (!p[l] || p[l] == ',');
}

static void run_input(const uint8_t *data, size_t size)
{
	struct input in = { data, size, 0 };
	struct vsched_host_ops ops = { .kick = host_kick, .wake = host_wake,
				       .payload_drop = payload_drop };
	static bool sigpipe_off;
	struct vsched_poll_params pp;
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &ops, .poll = &pp,
					.max_vcpus = MAX_VCPUS };
	pthread_t wd;
	int rc;

	if (size < 8)
		return;
	cur_data = data;
	cur_size = size;
	if (!sigpipe_off) { /* a write to a socket shut down: EPIPE, not a signal */
		signal(SIGPIPE, SIG_IGN);
		sigpipe_off = true;
	}
	unsigned fds_before = count_fds();
	input_t0 = now_ns();
	script_text[0] = 0;
	memset(objs, 0, sizeof(objs));
	memset(workers, 0, sizeof(workers));
	for (unsigned k = 0; k < NKINDS; k++)
		atomic_store(&accepted[k], 0);
	atomic_store(&stopping, 0);
	atomic_store(&watchdog_stop, 0);
	atomic_store(&no_reposts, 0);
	atomic_store(&reposts, 0);
	atomic_store(&m8_judged, 0);
	atomic_store(&tsvc_quit, 0);
	atomic_store(&tsvc_state, 0);
	atomic_store(&tsvc_stopped, 0);
	atomic_store(&tsvc_in_run, 0);
	atomic_store(&tsvc_tid, 0);
	atomic_store(&e13_judged, 0);
	atomic_store(&e12_judged, 0);
	atomic_store(&e13_run_t0, 0);
	if (!devnull)
		devnull = fopen("/dev/null", "we");

	unsigned h0 = take(&in), h1 = take(&in), h2 = take(&in), h3 = take(&in);
	unsigned h4 = take(&in), h5 = take(&in);
	nthreads = 2 + h0 % 3;
	nvcpus = 1 + h1 % (nthreads < MAX_VCPUS ? nthreads : MAX_VCPUS);
	have_waiter = (h1 >> 4) & 1;
	misuse = (h3 & 1) && !getenv("FUZZ_STATE_NO_MISUSE");
	late_mode = getenv("FUZZ_STATE_LATE") ? (unsigned)atoi(getenv("FUZZ_STATE_LATE")) & 3
					      : (h3 >> 1) & 3;
	hooks = (h3 >> 3) & 1;
	deadline_bias = (h3 >> 4) & 7;
	clock_inj = (h3 >> 7) & 1;
	reroute = (h4 >> 6) & 1;
	nw_timers = (h4 >> 7) & 1;
	clk_back = false; /* set below, once the still window is measured */
	tsvc_mode = (h0 >> 6) == 2 ? 1 : (h0 >> 6) == 3 ? 2 : 0;
	poll_params(h2, &pp);
	describe("threads %u, vCPUs %u, waiter %d (hooks %d), misuse %d, late wake %u, "
		 "poll policy %u max %llu ns, deadline bias %u, injected clock %d, "
		 "payload_drop re-routes %d, timer service %s\n", nthreads, nvcpus,
		 have_waiter, hooks, misuse, late_mode, pp.policy,
		 (unsigned long long)pp.max_ns, deadline_bias, clock_inj, reroute,
		 tsvc_mode == 1 ? "run()" : tsvc_mode == 2 ? "fd+dispatch()" : "none");
	if (hooks) {
		ops.blocking = vcpu_blocking;
		ops.unblocking = vcpu_unblocking;
	}
	atomic_store(&clk_off, 1000000000000ull);
	atomic_store(&clk_last, 0);
	atomic_store(&clk_frozen_total, 0);
	if (clock_inj) {
		measure_still_window();
		ops.now_ns = vm_clock;
		clk_back = (h1 >> 5) & 1;
	}
	describe("timer kinds NO_WAKEUP %d, injected clock steps back %d\n", nw_timers,
		 clk_back);

	if (vsched_vm_create(&cfg, &vm))
		fail("[E1] vm_create");
	static const char *const names[NKINDS] = { "k0", "k1", "k2", "k3", "k4", "k5", "k6" };
	for (unsigned k = 0; k < NKINDS; k++) {
		struct vsched_request_desc d = {
			.name = names[k], .priority = kind_prio[k], .handler = handler,
			.may_raise = may_raise(k),
			.flags = k == K_NOWAKE ? VSCHED_REQ_NO_WAKEUP
				 : k == K_PAY ? VSCHED_REQ_PAYLOAD
				 : nw_timers && (k == K_TIMER || k == K_TIMER2) ? VSCHED_REQ_NO_WAKEUP
				 : 0,
		};
		if (vsched_request_declare(vm, k, &d))
			fail("[E1] declare");
	}
	if (vsched_request_finalize(vm, 0))
		fail("[E1] finalize");

	nobjs = nvcpus + have_waiter;
	for (unsigned i = 0; i < nobjs; i++) {
		struct obj *o = &objs[i];
		pthread_mutex_init(&o->misuse_lock, NULL);
		pthread_mutex_init(&o->fdlock, NULL);
		for (unsigned j = 0; j < MAX_FDS; j++)
			o->fds[j].fd = o->fds[j].wfd = o->fds[j].held = -1;
		o->owner = (int)(i < nvcpus ? i : nthreads - 1);
		o->writer = (int)((i + 1) % nthreads);
	}
	for (unsigned i = 0; i < nvcpus; i++) {
		struct obj *o = &objs[i];
		if (vsched_vcpu_create(vm, i, NULL, &o->v))
			fail("[E1] vcpu_create");
		o->ntimers = (h4 >> (2 * i)) % 3;
		for (unsigned t = 0; t < o->ntimers; t++) {
			unsigned x = (h5 >> (t * 4 + i)) & 15;
			struct vsched_timer_desc td = { .size = sizeof(td), .kind = K_TIMER + t,
							.semantics = x % 3,
							.cancel = (x / 3) % 3 };
			if ((rc = vsched_timer_create(o->v, &td, &o->timers[t])))
				fail("[E1] timer_create returned %d", rc);
			o->level[t] = td.semantics == VSCHED_TIMER_LEVEL;
		}
		describe("vCPU %u: owner T%d, timer writer T%d, %u timer(s)\n", i, o->owner,
			 o->writer, o->ntimers);
	}
	if (have_waiter) {
		struct obj *o = &objs[nvcpus];
		struct vsched_waiter_config wc = { .size = sizeof(wc), .cond = waiter_cond,
						   .arg = o };
		o->is_waiter = true;
		/* h1 bit 6: the VM's policy as the waiter's own; else none,
		 * the waiter profile (a waiter does not follow the VM's). */
		if ((h1 >> 6) & 1)
			wc.poll = &pp;
		if (hooks) {
			wc.before_sleep = before_sleep;
			wc.after_sleep = after_sleep;
			wc.hook_arg = o;
		}
		if (vsched_waiter_create_ex(vm, &wc, &o->w))
			fail("[E1] waiter_create");
		describe("waiter (object %u): consumer T%d, policy %s\n", nvcpus, o->owner,
			 wc.poll ? "the VM's, as its own" : "the waiter profile");
	}
	misuse_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	misuse_wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (tsvc_mode) {
		if ((rc = vsched_timer_service_create(vm, &tsvc)))
			fail("[E1] timer_service_create returned %d", rc);
		atomic_store(&tsvc_state, 1);
		pthread_create(&tsvc_th, NULL, tsvc_main, NULL);
	}

	/* The scripts: 3 bytes an op. */
	while (in.i + 3 <= in.n) {
		unsigned t = take(&in) % nthreads, op = take(&in), b = take(&in);
		unsigned a = op >> 5 | (b & 0xe0) >> 2;
		op &= 31;
		if (op >= NOPS)
			op = OP_POST + op % 4;
		if (op >= FIRST_MISUSE && op <= LAST_MISUSE &&
		    (!misuse || !misuse_allowed(op)))
			op = OP_BLOCK;
		struct worker *wk = &workers[t];
		if (wk->nops < MAX_OPS) {
			wk->ops[wk->nops++] = (struct script_op){ (uint8_t)op, (uint8_t)a,
								  (uint8_t)b };
			describe("  T%u %s a=%u b=%u\n", t, op_name[op], a, b);
		}
	}

	atomic_store(&late.stop, 0);
	late.n = 0;
	pthread_create(&late.th, NULL, late_thread, NULL);
	pthread_create(&wd, NULL, watchdog, NULL);
	for (unsigned t = 0; t < nthreads; t++) {
		workers[t].idx = (int)t;
		atomic_store(&workers[t].cur_op, -1);
		pthread_create(&workers[t].th, NULL, worker_main, &workers[t]);
	}
	/* Teardown: once every thread is done or asleep in vsched (for 100
	 * ms, so that long sleeps are seen through), stop
	 * requests (a waking kind) to every vCPU and a kick to the waiter,
	 * again every 5 ms, until all are done. A block that an E12 expiry
	 * must end is left to it (and to E4's watchdog) for up to 3 s first. */
	uint64_t e12_hold_until = 0;
	for (unsigned idle = 0;;) {
		bool all_done = true, quiet = true;
		for (unsigned t = 0; t < nthreads; t++) {
			if (!atomic_load(&workers[t].done)) {
				all_done = false;
				if (!atomic_load(&workers[t].in_sleep))
					quiet = false;
			}
		}
		if (all_done)
			break;
		idle = quiet ? idle + 1 : 0;
		if (idle >= 50 && !atomic_load(&stopping) && nw_timers) {
			bool due = false;
			for (unsigned i = 0; i < nvcpus; i++) {
				uint64_t d = atomic_load(&objs[i].nw_due_seq);
				due |= d && atomic_load(&objs[i].in_call) &&
				       d == atomic_load(&objs[i].block_seq);
			}
			if (!e12_hold_until)
				e12_hold_until = now_ns() + 3000000000ull;
			if (due && now_ns() < e12_hold_until) {
				struct timespec ts = { 0, 2000000 };
				nanosleep(&ts, NULL);
				continue;
			}
		}
		if (idle >= 50 || atomic_load(&stopping)) {
			atomic_store(&stopping, 1);
			for (unsigned i = 0; i < nvcpus; i++) {
				atomic_fetch_add(&objs[i].wake_calls, 1);
				atomic_fetch_add(&objs[i].waking, 1);
				if (vsched_post(objs[i].v, K_STOP) == 0)
					atomic_fetch_add(&accepted[K_STOP], 1);
				atomic_fetch_sub(&objs[i].waking, 1);
			}
			if (have_waiter) {
				atomic_fetch_add(&objs[nvcpus].wake_calls, 1);
				atomic_fetch_add(&objs[nvcpus].waking, 1);
				vsched_waiter_kick(objs[nvcpus].w);
				atomic_fetch_sub(&objs[nvcpus].waking, 1);
			}
		}
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
	}
	for (unsigned t = 0; t < nthreads; t++)
		pthread_join(workers[t].th, NULL);
	atomic_store(&no_reposts, 1);
	/* A live service: its thread stopped and joined, the service left to
	 * vsched_vm_destroy() (timer.h). */
	if (atomic_load(&tsvc_state) == 1) {
		/* E13 (misuse: vm.h wants no thread inside a vsched call): the
		 * VM's destroy while its service's run() is active is refused
		 * (no waiter here, so that the refusal is run()'s). */
		if (misuse && !have_waiter) {
			pthread_mutex_lock(&tsvc_stop_mx);
			for (int tries = 0; tries < 20 && !tsvc_run_active(); tries++) {
				struct timespec ts = { 0, 200000 };
				nanosleep(&ts, NULL);
			}
			if (tsvc_run_active()) {
				atomic_fetch_add(&e13_judged, 1);
				rc = vsched_vm_destroy(vm);
				if (rc != VSCHED_ESTATE)
					fail("[E13] vsched_vm_destroy() while the timer service's "
					     "thread is inside run() returned %d (VSCHED_ESTATE "
					     "expected)", rc);
			}
			pthread_mutex_unlock(&tsvc_stop_mx);
		}
		tsvc_join();
	}
	atomic_store(&watchdog_stop, 1);
	pthread_join(wd, NULL);
	atomic_store(&late.stop, 1);
	pthread_join(late.th, NULL);

	/* E2: each live vCPU's thread is gone; service what is left here. */
	uint64_t total[NKINDS] = { 0 };
	for (unsigned i = 0; i < nvcpus; i++) {
		struct obj *o = &objs[i];
		struct vsched_vcpu_stats s = { .size = sizeof(s) };
		if (!atomic_load(&o->dead)) {
			int m = vsched_vcpu_mode(o->v);
			if (m != VSCHED_MODE_OUTSIDE_GUEST)
				fail("[E1] vCPU %u left in mode %d", i, m);
			/* With re-routes, what is pending goes to vm_destroy
			 * (payloads to payload_drop, which re-posts them). */
			for (int n = 0; n < 4 && !reroute && vsched_service(o->v) > 0; n++)
				;
		} else if (vsched_vcpu_mode(o->v) != VSCHED_MODE_DESTROYED) {
			fail("[E6] destroyed vCPU %u is back in mode %d at the end", i,
			     vsched_vcpu_mode(o->v));
		}
		vsched_vcpu_read_stats(o->v, &s);
		for (unsigned k = 0; k < NKINDS; k++) {
			uint64_t pend = s.kind[k].posted - s.kind[k].serviced - s.kind[k].coalesced;
			if (!atomic_load(&o->dead) && pend && !reroute)

				fail("[E2] live vCPU %u: kind %u still pending after its last service",
				     i, k);
			if (k != K_PAY && k != K_TIMER && k != K_TIMER2 &&
			    atomic_load(&o->handled[k]) != s.kind[k].serviced)
				fail("[E2] vCPU %u kind %u: %llu handler calls, %llu services counted",
				     i, k, (unsigned long long)atomic_load(&o->handled[k]),
				     (unsigned long long)s.kind[k].serviced);
			total[k] += s.kind[k].posted;
		}
	}
	for (unsigned k = 0; k < NKINDS; k++)
		if (k != K_PAY && k != K_TIMER && k != K_TIMER2 && total[k] != atomic_load(&accepted[k]))
			fail("[E2] kind %u: %llu posts accepted, the library counts %llu", k,
			     (unsigned long long)atomic_load(&accepted[k]),
			     (unsigned long long)total[k]);

	if (have_waiter && vsched_waiter_destroy(objs[nvcpus].w))
		fail("[E1] waiter_destroy");
	atomic_store(&in_vm_destroy, 1);
	if (vsched_vm_destroy(vm))
		fail("[E1] vm_destroy");
	atomic_store(&in_vm_destroy, 0);
	vm = NULL;
	tsvc = NULL;
	atomic_store(&tsvc_state, 0);
	if (!no_nodes_in_flight())
		fail("[E3] a payload accepted by vsched was neither delivered nor dropped");
	for (unsigned i = 0; i < nobjs; i++) {
		for (unsigned j = 0; j < MAX_FDS; j++)
			close_slot(&objs[i].fds[j]);
		for (unsigned j = 0; j < objs[i].nlinger; j++) {
			if (objs[i].linger_w[j] >= 0 && objs[i].linger_w[j] != objs[i].linger_r[j])
				close(objs[i].linger_w[j]);
			close(objs[i].linger_r[j]);
		}

		pthread_mutex_destroy(&objs[i].misuse_lock);
		pthread_mutex_destroy(&objs[i].fdlock);
	}
	close(misuse_fd);
	close(misuse_wfd);
	unsigned fds_after = count_fds();
	if (fds_after != fds_before) {
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
		fds_after = count_fds();
	}
	if (fds_after != fds_before)
		fail("[E7] %u epoll/eventfd/timerfd fds open before the input, %u after",
		     fds_before, fds_after);
	if (getenv("FUZZ_STATE_TRACE"))
		dump();
}


#ifndef FUZZ_STATE_STANDALONE
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run_input(data, size);
	return 0;
}
#else
static uint64_t rng;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int run_file(const char *path)
{
	static uint8_t buf[4096];
	FILE *f = fopen(path, "rb");
	size_t n;
	if (!f) {
		perror(path);
		return 1;
	}
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	run_input(buf, n);
	return 0;
}

int main(int argc, char **argv)
{
	double seconds = 10;
	uint64_t seed = (uint64_t)now_ns();
	unsigned runs = 0;
	int opt;

	while ((opt = getopt(argc, argv, "t:s:")) != -1) {
		if (opt == 't')
			seconds = atof(optarg);
		else if (opt == 's')
			seed = strtoull(optarg, NULL, 0);
		else {
			fprintf(stderr, "usage: %s [-t seconds] [-s seed] [inputs...]\n",
				argv[0]);
			return 2;
		}
	}
	for (int i = optind; i < argc; i++) {
		if (run_file(argv[i]))
			return 1;
		runs++;
	}
	printf("fuzz_state: seed %llu\n", (unsigned long long)seed);
	rng = seed ? seed : 1;
	uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);
	while (now_ns() < end) {
		static uint8_t buf[300];
		size_t n = 8 + next_rand() % (sizeof(buf) - 8);
		for (size_t i = 0; i < n; i++)
			buf[i] = (uint8_t)next_rand();
		run_input(buf, n);
		runs++;
	}
	printf("fuzz_state: %u inputs, no failure\n", runs);
	return 0;
}
#endif
