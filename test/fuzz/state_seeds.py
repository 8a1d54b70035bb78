#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes the seed corpus of test/fuzz/fuzz_state.c into corpus_state/:
# one input per known bug class (issue 22) and a few contract-only mixes.
# Input layout (fuzz_state.c run_input()): 6 header bytes, then 3 bytes an
# op: thread, (op | (a & 7) << 5), (b with a's bits 3-5 in b's bits 5-7).
import os, sys

OPS = ["post", "payload", "broadcast", "kick", "block", "run", "wait", "wkick",
       "fd_open", "fd_add", "fd_del", "fd_close", "fd_write", "timer_arm",
       "timer_ctl", "set_poll", "destroy", "fire", "check_once", "fd_hup",
       "clock", "m_destroy", "m_fd_add", "m_fd_del", "m_wfd_add",
       "m_dead_calls", "m_close_reg", "m_hook", "m_wait2",
       "tsvc", "stats", "repost"]

def header(threads=2, vcpus=1, waiter=False, policy=0, maxi=0, misuse=False,
           late=0, hooks=False, bias=0, timers=0, sem=0, clock=False,
           reroute=False, tsvc=0, nowake_timers=False, clock_back=False):
    # h0: threads - 2 is h0 % 3; bits 6-7 the timer service (tsvc 1:
    # run(), 2: fd + dispatch())
    h0 = next(v for v in range((tsvc + 1 if tsvc else 0) << 6, 256)
              if v % 3 == threads - 2)
    return bytes([h0,
                  (vcpus - 1) | (0x10 if waiter else 0) | (0x20 if clock_back else 0),
                  policy | maxi << 2,
                  (1 if misuse else 0) | late << 1 | (8 if hooks else 0) | bias << 4 |
                  (0x80 if clock else 0),
                  timers | (0x40 if reroute else 0) | (0x80 if nowake_timers else 0),
                  sem])

def op(t, name, a=0, b=0):
    o = OPS.index(name)
    return bytes([t, o | (a & 7) << 5, (b & 0x1f) | ((a >> 3) & 7) << 5])

# deadline index (bias 0): 0 now, 1 100us, 2 1ms, 3 5ms, 4 20ms, 5 60ms,
# 6 200ms, 7 none. Misuse ops wait (up to 5 ms) for the owner to sleep.
seeds = {}

# bug 2: fd_add by another thread while the vCPU sleeps on its futex; the
# next post goes to the eventfd.
seeds["bug2_fd_add_while_blocked"] = header(misuse=True) + op(0, "block", b=7) + \
    op(1, "m_fd_add", b=0x11) * 3 + op(1, "post") + op(1, "post", b=1)
# the same for a waiter
seeds["bug2_waiter_fd_add_while_waiting"] = header(vcpus=1, waiter=True, misuse=True) + \
    op(1, "wait", b=7) + op(0, "m_wfd_add", b=0x11) * 3 + op(0, "wkick")
# bug 3: destroy of a BLOCKED vCPU (no deadline: never woken; 200 ms:
# resurrected when the sleep ends)
seeds["bug3_destroy_blocked_none"] = header(misuse=True) + op(0, "block", b=7) + \
    op(1, "m_destroy", b=0x11) * 3 + op(1, "post")
seeds["bug3_destroy_blocked_200ms"] = header(misuse=True) + op(0, "block", b=6) * 2 + \
    op(1, "m_destroy", b=0x11) * 3 + op(1, "post")
# bug 3 with an fd: the sleeper is in epoll_pwait; destroy closes its
# timerfd and eventfd, so even a 200 ms deadline never ends the sleep
seeds["bug3_destroy_blocked_epoll"] = header(misuse=True) + op(0, "fd_open", b=0) + \
    op(0, "fd_add", b=0) + op(0, "block", b=6) + op(1, "m_destroy", b=0x11) * 3 + \
    op(1, "post")
# ...and when a registered fd becomes ready after that destroy, the sleeper
# wakes and reads the event array destroy freed (ASan: heap-use-after-free)
seeds["bug3_destroy_blocked_epoll_fd_ready"] = header(misuse=True) + \
    op(0, "fd_open", b=0) + op(0, "fd_add", b=0) + op(0, "block", b=7) + \
    op(1, "m_destroy", b=0x11) * 3 + op(1, "fd_write", a=0, b=0)
# bug 1: late (3 ms) futex wakes land in the next, long, sleep.
seeds["bug1_late_wake_spin"] = header(late=3) + \
    (op(0, "block", b=2) + op(0, "run") + op(0, "block", b=6) + op(0, "run")) * 8 + \
    (op(1, "post") + op(1, "kick")) * 16
# fd closed while registered, number reused, added and deleted again
seeds["fd_reuse_two_slots"] = header(misuse=True) + op(0, "fd_open", b=0) + \
    op(0, "fd_add", b=0) + op(0, "m_close_reg", b=0) + op(0, "fd_open", b=1) + \
    op(0, "fd_add", b=1) + op(0, "fd_del", b=1) + op(0, "check_once")
# calls on a destroyed vCPU
seeds["dead_vcpu_calls"] = header(misuse=True) + op(0, "destroy", b=0) + \
    op(0, "m_dead_calls") + op(1, "post") + op(1, "kick")
# contract only: a guest timer due after its vCPU was destroyed; a fire
# on the destroyed vCPU says it posted it (the post was refused)
seeds["destroyed_fire_timers"] = header(waiter=True, timers=1) + \
    op(1, "timer_arm", a=0, b=4) + op(0, "block", b=2) + op(0, "destroy", b=0) + \
    op(1, "wait", b=3) + op(1, "fire", a=0)
# contract only: set_poll from another thread while the owner destroys its
# vCPU (TSan: sleeper_fini's relaxed exchange of own_poll, then free)
seeds["race_set_poll_vs_destroy"] = header() + op(0, "destroy", b=0) + \
    op(1, "set_poll", a=0, b=0) + op(1, "set_poll", a=0, b=1)
# contract only: a waiter with hooks and fds, timers, payloads, 4 threads
seeds["contract_waiter_fds"] = header(threads=3, vcpus=2, waiter=True, hooks=True,
                                      policy=3, maxi=3) + \
    op(2, "fd_open", b=8) + op(2, "fd_add", b=8) + op(2, "wait", b=5) + \
    op(0, "fd_write", a=2, b=0) + op(1, "wkick") + op(2, "wait", b=7) + \
    op(0, "fd_open", b=1) + op(0, "fd_add", b=1) + op(0, "block", b=5) + \
    op(1, "fd_write", a=0, b=1) + op(1, "payload", a=0, b=3) + op(0, "run") + \
    op(0, "fd_close", b=1) + op(0, "block", b=3)
seeds["contract_timers"] = header(threads=3, vcpus=2, timers=0x0a, sem=0x5a) + \
    op(1, "timer_arm", a=0, b=3) + op(0, "block", b=6) + op(0, "run") + \
    op(2, "timer_arm", a=1, b=4) + op(1, "block", b=6) + op(1, "run") + \
    op(1, "timer_ctl", a=0, b=1) + op(2, "timer_ctl", a=1, b=3) + \
    op(0, "block", b=7) + op(2, "post", a=0) + op(1, "block", b=4) + op(0, "fire", a=1)
seeds["contract_mix_4t"] = header(threads=4, vcpus=3, waiter=True, policy=2, maxi=2) + \
    b"".join(op(t % 4, n, a=t, b=t * 7)
             for t, n in enumerate(["post", "block", "broadcast", "payload", "run",
                                    "kick", "set_poll", "wait", "wkick", "block",
                                    "fd_open", "fd_add", "fd_write", "check_once",
                                    "post", "run", "block", "fd_del", "fd_close",
                                    "broadcast", "payload", "run", "block", "wkick"]))

# fd_open b: slot b%4, bit 2 a pipe, bit 4 a socket pair (else an eventfd);
# fd_add: a's bit 3 (b's bit 5) makes it a doorbell; m_close_reg b bit 4:
# a dup of the fd held; fd_write b bit 4: the lingering files too.
# A stale registration: closed under a dup (readable), fd_del'ed (-EBADF),
# then a long block: the set must no longer hold it (E5: no spin).
seeds["stale_dup_fd_del"] = header(misuse=True) + op(0, "fd_open", b=0) + \
    op(0, "fd_add", b=0) + op(0, "m_close_reg", b=16) + op(0, "fd_write", a=0, b=0) + \
    op(0, "fd_del", b=0) + op(0, "block", b=5) + op(0, "fd_write", a=0, b=16) + \
    op(0, "block", b=5)
# ... and its number reused by a new file: the old file's readiness must
# not be reported under the new tag (E8)
seeds["stale_dup_number_reused"] = header(misuse=True) + op(0, "fd_open", b=0) + \
    op(0, "fd_add", b=0) + op(0, "m_close_reg", b=16) + op(0, "fd_write", a=0, b=0) + \
    op(0, "fd_open", b=1) + op(0, "fd_add", b=1) + op(0, "block", b=5) + \
    op(0, "fd_write", a=0, b=16) + op(0, "block", b=4)
# a socket doorbell whose peer shut down: at end of file for ever, no
# EPOLLHUP; reported (E5: no ring for ever; E4)
seeds["doorbell_eof_vcpu"] = header() + op(0, "fd_open", b=16) + \
    op(0, "fd_add", a=8, b=0) + op(1, "fd_hup", a=0, b=0) + op(0, "block", b=5) + \
    op(0, "block", b=5) + op(0, "fd_del", b=0) + op(0, "block", b=4)
seeds["doorbell_eof_waiter"] = header(waiter=True) + op(1, "fd_open", b=8 | 16) + \
    op(1, "fd_add", a=8, b=8) + op(0, "fd_hup", a=1, b=0) + op(1, "wait", b=5) + \
    op(1, "wait", b=5) + op(0, "fd_write", a=1, b=0)
# a pipe doorbell whose writer closed (EPOLLHUP)
seeds["doorbell_hup_pipe"] = header() + op(0, "fd_open", b=4) + \
    op(0, "fd_add", a=8, b=0) + op(1, "fd_write", a=0, b=0) + op(0, "block", b=4) + \
    op(1, "fd_hup", a=0, b=0) + op(0, "block", b=5)
# fd_open b bit 4 with a's bit 4 (b's bit 6): a SOCK_DGRAM pair, a's bit
# 5 (b's bit 7): SOCK_SEQPACKET; fd_hup b bit 2: the reader side, shut for
# reading (shutdown(SHUT_RD)); fd_write b bit 2: on a datagram or
# seqpacket pair, a message of length 0.
# A datagram doorbell shut for reading (0ed494c): readable for ever
# (EPOLLIN | EPOLLRDHUP), its reads find nothing; reported hung up (E8),
# no sleep spins on it (E5), none after its fd_del either
# (Every sleep in these is short: once all threads sleep for 100 ms the
# teardown begins, its stop requests ending the untimed blocks.)
seeds["doorbell_shut_rd_dgram_vcpu"] = header(vcpus=2) + op(0, "fd_open", a=16, b=16) + \
    op(0, "fd_add", a=8, b=0) + op(0, "block", b=4) + op(0, "block", b=7) + \
    op(0, "block", b=4) + op(0, "fd_del", b=0) + op(0, "block", b=5) + \
    op(1, "block", b=2) + op(1, "fd_write", a=0, b=0) + op(1, "block", b=4) + \
    op(1, "fd_hup", a=0, b=4)
# ... on a waiter, shut by the other thread while the consumer sleeps
# (untimed: only the report ends it)
seeds["doorbell_shut_rd_dgram_waiter"] = header(waiter=True) + \
    op(1, "fd_open", a=16, b=8 | 16) + op(1, "fd_add", a=8, b=8) + op(1, "wait", b=3) + \
    op(1, "wait", b=7) + op(1, "wait", b=4) + op(1, "fd_del", b=8) + op(1, "wait", b=5) + \
    op(0, "block", b=2) + op(0, "fd_write", a=1, b=0) + op(0, "block", b=4) + \
    op(0, "fd_hup", a=1, b=4)
# A seqpacket doorbell rung by messages of length 0 (a ring, never
# reported: E8), then shut for reading while its owner sleeps (its reads
# find 0: reported, E5)
seeds["doorbell_seqpacket_empty_then_shut_rd"] = header(vcpus=2) + \
    op(0, "fd_open", a=32, b=16) + op(0, "fd_add", a=8, b=0) + \
    op(0, "block", b=4) * 2 + op(0, "block", b=7) + op(0, "block", b=4) + \
    (op(1, "block", b=3) + op(1, "fd_write", a=0, b=4)) * 4 + op(1, "block", b=4) + \
    op(1, "fd_hup", a=0, b=4)
# A datagram doorbell whose writer shut down, then closed with its reader
# (M6, no dup: it lives on in vsched's dup): no hang-up, never reported
# (E8), no spin (E5); a plain datagram fd beside it, rung by a message of
# length 0, then shut for reading (reported each time, drained)
seeds["dgram_writer_gone_not_hup"] = header(vcpus=2, misuse=True) + \
    op(0, "fd_open", a=16, b=16) + op(0, "fd_add", a=8, b=0) + \
    op(0, "fd_open", a=16, b=16 | 1) + op(0, "fd_add", a=0, b=1) + \
    op(0, "block", b=3) + op(0, "block", b=4) + op(0, "m_close_reg", b=0) + \
    op(0, "block", b=5) + op(0, "block", b=3) + op(0, "fd_del", b=1) + \
    op(0, "fd_del", b=0) + op(0, "block", b=4) + \
    op(1, "block", b=2) + op(1, "fd_write", a=0, b=4) + op(1, "fd_hup", a=0, b=0) + \
    op(1, "block", b=3) + op(1, "fd_write", a=0, b=1 | 4) + op(1, "block", b=4) + \
    op(1, "fd_hup", a=0, b=1 | 4)
# Three vCPUs and the waiter (object 3: h1's waiter bit makes it 3 vCPUs)
# with datagram and seqpacket doorbells,
# rings of length 0 and 8, shut for reading and by the writer, one closed
# under a dup after it was shut for reading (M6: it lingers, shut, after
# its fd_del: no spin, E5)
seeds["sock_doorbells_mix"] = header(threads=3, vcpus=2, waiter=True, misuse=True) + \
    op(0, "fd_open", a=16, b=16) + op(0, "fd_add", a=8, b=0) + \
    op(1, "fd_open", a=32, b=16) + op(1, "fd_add", a=8, b=0) + \
    op(2, "fd_open", a=32, b=8 | 16 | 1) + op(2, "fd_add", a=8, b=8 | 1) + \
    op(0, "block", b=5) + op(2, "fd_write", a=1, b=4) + op(1, "block", b=5) + \
    op(2, "fd_write", a=0, b=4) + op(2, "wait", b=4) + op(0, "fd_write", a=3, b=1 | 4) + \
    op(1, "fd_hup", a=0, b=0) + op(2, "fd_write", a=1, b=0) + op(0, "block", b=4) + \
    op(0, "fd_hup", a=3, b=1) + op(1, "block", b=5) + op(2, "wait", b=7) + \
    op(2, "fd_hup", a=0, b=4) + op(0, "block", b=7) + op(0, "m_close_reg", b=16) + \
    op(0, "fd_del", b=0) + op(1, "fd_del", b=0) + op(2, "fd_del", b=8 | 1) + \
    op(0, "block", b=5) + op(1, "block", b=5) + op(2, "wait", b=5) + \
    op(1, "fd_write", a=0, b=16)
# destroy and block from the engine's hooks (M7)
seeds["hook_destroy_blocking"] = header(misuse=True, hooks=True) + \
    op(0, "m_hook", b=0) + op(0, "block", b=2) + op(0, "m_hook", b=5) + op(0, "block", b=2) + \
    op(0, "m_hook", b=1) + op(0, "block", b=1)
seeds["hook_destroy_waiter"] = header(waiter=True, misuse=True, hooks=True) + \
    op(1, "m_hook", b=9) + op(1, "wait", b=3) + op(1, "m_hook", b=8 | 4) + op(1, "wait", b=3)
# a second consumer while the consumer cycles through short waits (M8)
seeds["second_consumer"] = header(waiter=True, misuse=True, hooks=True) + \
    op(1, "wait", b=1) * 24 + op(0, "m_wait2", b=0) * 4 + op(0, "m_wait2", b=1) * 4 + \
    op(0, "wkick") * 2
# an injected clock that stands still under a poll window, then a sleep
seeds["clock_freeze_poll"] = header(clock=True, policy=1, maxi=3) + \
    op(0, "clock", b=7) + op(0, "block", b=4) + op(0, "clock", b=5) + op(0, "block", b=3) + \
    op(0, "clock", b=0)
# (deadlines 100 us and 1 ms ahead of the frozen clock: the sleep must not
# loop on the time left, E5's count)
seeds["clock_freeze_sleep_epoll"] = header(clock=True) + op(0, "fd_open", b=0) + \
    op(0, "fd_add", b=0) + op(0, "clock", b=7) + op(0, "block", b=1) + op(0, "block", b=2) + \
    op(0, "clock", b=6) + op(0, "block", b=5)
seeds["clock_freeze_sleep_futex"] = header(clock=True) + op(0, "clock", b=7) + \
    op(0, "block", b=1) + op(0, "clock", b=5) + op(0, "block", b=2)
seeds["clock_jump_timers"] = header(threads=3, vcpus=2, clock=True, timers=0x05) + \
    op(1, "timer_arm", a=0, b=5) + op(0, "block", b=7) + op(2, "clock", b=4) + \
    op(2, "clock", b=4 | 8) + op(0, "run") + op(2, "timer_arm", a=1, b=6) + op(1, "block", b=7) + \
    op(0, "clock", b=3)
# payload_drop re-posts: during a vCPU's destroy (accepted by the other
# vCPU), during vm_destroy (refused: every vCPU destroyed first)
seeds["reroute_vm_destroy"] = header(threads=2, vcpus=2, reroute=True) + \
    op(0, "payload", a=1, b=0) + op(0, "payload", a=1, b=1) + op(1, "payload", a=0, b=2) + \
    op(1, "payload", a=0, b=3)
seeds["reroute_vcpu_destroy"] = header(threads=2, vcpus=2, reroute=True) + \
    op(1, "payload", a=0, b=0) + op(1, "payload", a=0, b=1) + op(0, "destroy", b=0) + \
    op(1, "payload", a=1, b=2) + op(1, "run")
# timer_set_ctl on a destroyed vCPU's level timer: VSCHED_EDESTROYED
seeds["timer_ctl_destroyed"] = header(waiter=True, timers=1, sem=1) + \
    op(0, "destroy", b=0) + op(1, "wait", b=3) + op(1, "timer_ctl", a=0, b=1) + \
    op(1, "timer_ctl", a=0, b=2) + op(1, "timer_arm", a=0, b=3)
# The timer service on a thread of its own (run()), the owners in and out
# of guest mode while the writers arm; then destroyed while a writer arms
seeds["tsvc_run_destroy_vs_arm"] = header(threads=3, vcpus=2, timers=0x05, tsvc=1) + \
    (op(1, "timer_arm", a=0, b=3) + op(0, "run") + op(2, "timer_arm", a=1, b=2) +
     op(1, "run") + op(0, "block", b=2)) * 4 + op(2, "tsvc", b=0) + \
    op(0, "tsvc", b=3) + op(1, "timer_arm", a=0, b=2) * 6 + op(2, "tsvc", b=3) + \
    op(0, "run")
# ... in an event loop (fd + dispatch()) on an injected clock that stands
# still and jumps; stop called from a script meanwhile
seeds["tsvc_dispatch_clock"] = header(threads=2, vcpus=1, timers=0x02, sem=0x11,
                                      clock=True, tsvc=2) + \
    op(1, "timer_arm", a=0, b=3) + op(0, "run") + op(1, "clock", b=7) + \
    op(1, "timer_arm", a=0, b=4) + op(0, "run") + op(0, "block", b=4) + \
    op(1, "tsvc", b=2) + op(1, "clock", b=4) + op(1, "timer_ctl", a=0, b=1) + \
    op(0, "run") + op(1, "timer_arm", a=4, b=2) + op(0, "block", b=3)
# a stats reader and the guest's poll control from other threads while
# the owner posts, services, blocks and destroys
seeds["stats_reader_vs_owner"] = header(threads=3, vcpus=2, timers=0x05, policy=2,
                                        maxi=2) + \
    (op(2, "stats", a=0, b=5) + op(1, "post", a=0) + op(0, "run") + op(2, "stats", a=1, b=3) +
     op(0, "block", b=2) + op(2, "stats", a=0, b=12) + op(1, "timer_arm", a=0, b=2)) * 3 + \
    op(0, "destroy", b=0) + op(2, "stats", a=0, b=4) + op(2, "stats", a=0, b=1)
# handlers that post to their own vCPU and to the other, kick, broadcast
seeds["repost_chains"] = header(threads=3, vcpus=2, waiter=True) + \
    op(2, "repost", a=0, b=16 | 4) + op(2, "repost", a=1, b=16 | 1) + \
    (op(2, "post", a=0) + op(0, "block", b=3) + op(0, "run") + op(1, "block", b=3) +
     op(1, "run")) * 3 + op(2, "repost", a=0, b=16 | 3) + op(2, "repost", a=1, b=2) + \
    op(2, "repost", a=2, b=16 | 8) + op(2, "post", a=2) + \
    op(2, "post", a=1) + op(2, "post", a=0) + op(0, "run") + op(1, "run")

# E12: the timers' kinds are VSCHED_REQ_NO_WAKEUP (h4 = 0x82: vCPU 0 has
# (h4 % 3) = 1 timer); T1 (the waiter's
# consumer, sleeping 5 ms in between so that T0 is BLOCKED) arms vCPU 0's
# one-shot timer into the past while T0 blocks with no deadline: the expiry
# it posts must end the block
seeds["nowake_timer_past_arm"] = header(waiter=True, timers=2, nowake_timers=True) + \
    (op(0, "block", b=7) + op(1, "wait", b=3) + op(1, "timer_arm", a=0, b=0) +
     op(0, "run") + op(1, "wait", b=3) + op(1, "fire")) * 3 + \
    op(0, "block", b=7) + op(1, "wait", b=3) + op(1, "timer_arm", a=0, b=0)
# ... a LEVEL timer armed into the past while masked, unmasked by T1 while
# T0 is BLOCKED; and the service (dispatch()) posting the expiries too
seeds["nowake_timer_past_arm_level"] = header(waiter=True, timers=2, sem=1,
                                              nowake_timers=True, tsvc=2) + \
    (op(1, "timer_arm", a=0, b=2) + op(0, "block", b=7) + op(0, "run") +
     op(1, "wait", b=3)) * 2 + \
    (op(1, "timer_ctl", a=0, b=3) + op(1, "timer_arm", a=0, b=0) + op(0, "block", b=7) +
     op(1, "wait", b=3) + op(1, "timer_ctl", a=0, b=1) + op(0, "run") +
     op(1, "wait", b=3)) * 3
# E13: while the service's thread is in run(), a second run() and a
# destroy from the workers are refused (VSCHED_ESTATE) and the service
# goes on posting the writers' expiries; with misuse and no waiter, the
# VM's destroy at teardown before the service is stopped, too
seeds["tsvc_run_twice_destroy"] = header(threads=3, vcpus=2, timers=0x05, tsvc=1,
                                         misuse=True) + \
    (op(1, "timer_arm", a=0, b=3) + op(2, "tsvc", b=4) + op(0, "block", b=3) +
     op(2, "tsvc", b=8) + op(0, "run") + op(2, "timer_arm", a=1, b=4) + op(1, "tsvc", b=12) +
     op(1, "block", b=4) + op(1, "run")) * 3 + op(2, "tsvc", b=5) + op(0, "tsvc", b=2) + \
    op(2, "tsvc", b=4)
seeds["tsvc_run_twice_nowake"] = header(threads=2, vcpus=1, timers=2, tsvc=1,
                                        nowake_timers=True) + \
    (op(1, "timer_arm", a=0, b=4) + op(1, "tsvc", b=12) + op(0, "block", b=7) +
     op(0, "run")) * 4
# E14: the injected clock runs backwards (200 ms, 50 ms, 10 ms) and steps
# back (50 ms, 200 ms) while the vCPU polls (FIXED, 200 us window: 1 ms
# blocks, one of them starts inside the first run) and sleeps, its timer
# armed near (74df99a reverted: that poll runs to the run's end, E5)
seeds["clock_back_poll"] = header(threads=2, vcpus=1, clock=True, clock_back=True,
                                  policy=1, maxi=3, timers=1) + \
    op(1, "clock", b=1 | 3 << 1 | 16) + op(0, "block", b=2) * 8 + \
    op(1, "clock", b=1 | 2 << 1 | 16) + op(0, "block", b=4) + op(0, "block", b=3) + \
    op(1, "timer_arm", a=0, b=3) + op(1, "clock", b=1 | 3 << 1 | 16) + op(0, "block", b=6) + \
    op(0, "run") + op(1, "clock", b=1 | 2 << 1) + op(0, "block", b=2) + \
    op(1, "clock", b=1 | 1 << 1 | 16 | 8) + op(0, "block", b=5) + op(1, "clock", b=1 | 3 << 1)
seeds["clock_back_level_timers"] = header(threads=3, vcpus=2, clock=True, clock_back=True,
                                          timers=0x05, sem=0x11, tsvc=2, policy=2,
                                          maxi=2) + \
    (op(1, "timer_arm", a=0, b=2) + op(2, "timer_arm", a=1, b=3) + op(0, "block", b=4) +
     op(2, "clock", b=1 | 2 << 1) + op(1, "block", b=4) + op(0, "run") + op(1, "run") +
     op(2, "clock", b=1 | 1 << 1 | 16) + op(1, "timer_ctl", a=0, b=1) +
     op(0, "block", b=3) + op(2, "clock", b=4)) * 3
seeds["clock_back_contention"] = header(threads=2, vcpus=1, clock=True, clock_back=True,
                                        policy=2, maxi=3) + \
    op(0, "set_poll", a=8, b=2 | 12) + \
    (op(0, "block", b=2) + op(1, "clock", b=1 | 3 << 1) + op(0, "block", b=4) +
     op(1, "post", a=0) + op(0, "run")) * 3

out = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "corpus_state")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(len(seeds), "seeds in", out)
