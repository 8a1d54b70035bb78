/* SPDX-License-Identifier: MIT */
/*
 * A sleeper's fd wake sources (lib/sleeper.h): the tables of the user's
 * fds, their tags and doorbells, grown by fd_add and never on the wait
 * path; the checks of ready fds without sleeping; fd_add and fd_del, and
 * the one flag that moves the sleeper's next sleep to epoll.
 */
#define _GNU_SOURCE /* dup3 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "abi.h"
#include "mode.h"
#include "contract.h"
#include "sleeper.h"

/* One ready registered fd: into the inline tags, and into the caller's
 * array while it has room; every one is counted. */
void vsched__add_tag(struct vsched_block_result *res, uint64_t tag)
{
	unsigned k = res->nready_total++;
	if (k < VSCHED_BLOCK_MAX_TAGS)
		res->tags[k] = tag;
	if (res->ready_tags) {
		if (k < res->ready_cap) {
			res->ready_tags[k] = tag;
			res->nready = k + 1;
		}
	} else if (k < VSCHED_BLOCK_MAX_TAGS) {
		res->nready = k + 1;
	}
}

void vsched__clear_tags(struct vsched_block_result *res)
{
	res->nready = 0;
	res->nready_total = 0;
}

/* Check the registered fds without sleeping: one epoll_pwait(0), before
 * an arm's re-check only (a poll window, a check-once, a return at the
 * deadline). It consumes what is edge-triggered (the kick eventfd's and an
 * eventfd doorbell's pending rings: stale ones, since the owner is not
 * BLOCKED and its condition is looked at before any sleep) and reads
 * nothing. A fired timerfd, which the sleep that saw it left readable for
 * the next arm's timerfd_settime to clear, is disarmed by the second look
 * handed it (that call, once), or every look until the next sleep would
 * be handed it again (a check-once loop after a timed sleep: 0.15-0.3 us
 * a look here); not by the first, where one look follows each timed sleep
 * (the syscall would cost more than the event). Returns the number of
 * ready user fds, whose tags are in res (a doorbell's ring is not
 * reported: it rings only while the owner sleeps; one that hung up is, as
 * the sleep reports it). A look between a re-check and a sleep must sort
 * its events as the sleep does (lib/sleep.c). Owner thread, with
 * s->nlook != 0. */
unsigned vsched__collect_ready(struct vsched__sleeper *s,
			      struct vsched_block_result *res)
{
	int n = vsched__os_wait(&s->os, s->ev, (int)s->nslots + 2, 0);

	vsched__clear_tags(res);
	for (int i = 0; i < n; i++) {
		uint64_t slot = s->ev[i].data.u64;
		if (vsched__user_slot(s, slot) && vsched__reported(s, slot, s->ev[i].events)) {
			vsched__add_tag(res, s->tag_of[slot - SLOT_USER]);
		} else if (slot == SLOT_TFD && !s->tfd_looked) {
			s->tfd_looked = true;
		} else if (slot == SLOT_TFD) {
			/* A disarm that failed leaves it unknown: the next
			 * sleep sets it. */
			s->tfd_at = vsched__os_timer_at(&s->os, VSCHED_DEADLINE_NONE)
					    ? TFD_UNKNOWN
					    : VSCHED_DEADLINE_NONE;
			s->tfd_looked = false;
		}
	}
	return res->nready_total;
}

/* The same, from the poll loop or a check-once: counted. */
unsigned vsched__fd_check(struct vsched__sleeper *s,
			 struct vsched_block_result *res)
{
	vsched__count(&s->hs.fd_checks);
	res->fd_checks++;
	return vsched__collect_ready(s, res);
}

void vsched__free_fd_tables(struct vsched__sleeper *s)
{
	const struct vsched_allocator *a = &s->vm->alloc;

	vsched__free(a, s->fd_of, s->nslots * sizeof(*s->fd_of));
	vsched__free(a, s->tag_of, s->nslots * sizeof(*s->tag_of));
	vsched__free(a, s->bell_of, s->nslots * sizeof(*s->bell_of));
	vsched__free(a, s->rfd_of, s->nslots * sizeof(*s->rfd_of));
	vsched__free(a, s->ev_of, s->nslots * sizeof(*s->ev_of));
	vsched__free(a, s->ev, (s->nslots + 2) * sizeof(*s->ev));
	s->rfd_of = NULL;
	s->fd_of = NULL;
	s->tag_of = NULL;
	s->bell_of = NULL;
	s->ev_of = NULL;
	s->ev = NULL;
	s->nslots = 0;
}

/* The epoll events an fd_add may ask for: level-triggered readiness. */
#define FD_EVENTS                                                              \
	(EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDHUP | EPOLLERR | EPOLLHUP |     \
	 EPOLLRDNORM | EPOLLRDBAND | EPOLLWRNORM | EPOLLWRBAND)

/* The slot of user fd number `fd`, or -1. */
static int slot_of(const struct vsched__sleeper *s, int fd)
{
	for (unsigned i = 0; i < s->nslots; i++)
		if (s->fd_of[i] == fd)
			return (int)i;
	return -1;
}

/* Room for one more user fd: the tables double (at fd_add time, never on
 * the wait path). Returns a free slot, or -1 when out of memory. */
static int free_slot(struct vsched__sleeper *s)
{
	const struct vsched_allocator *a = &s->vm->alloc;
	unsigned n = s->nslots, cap;
	int *fd_of;
	uint64_t *tag_of;
	uint8_t *bell_of;
	int *rfd_of;
	uint32_t *ev_of;
	struct epoll_event *ev;

	for (unsigned i = 0; i < n; i++)
		if (s->fd_of[i] < 0)
			return (int)i;
	cap = n ? 2 * n : FIRST_SLOTS;
	if (cap <= n || cap > (unsigned)INT32_MAX - 2)
		return -1;
	fd_of = vsched__alloc(a, cap * sizeof(*fd_of));
	tag_of = vsched__alloc(a, cap * sizeof(*tag_of));
	bell_of = vsched__alloc(a, cap * sizeof(*bell_of));
	rfd_of = vsched__alloc(a, cap * sizeof(*rfd_of));
	ev_of = vsched__alloc(a, cap * sizeof(*ev_of));
	ev = vsched__alloc(a, (cap + 2) * sizeof(*ev));
	if (!fd_of || !tag_of || !bell_of || !rfd_of || !ev_of || !ev) {
		vsched__free(a, ev_of, cap * sizeof(*ev_of));
		vsched__free(a, fd_of, cap * sizeof(*fd_of));
		vsched__free(a, tag_of, cap * sizeof(*tag_of));
		vsched__free(a, bell_of, cap * sizeof(*bell_of));
		vsched__free(a, rfd_of, cap * sizeof(*rfd_of));
		vsched__free(a, ev, (cap + 2) * sizeof(*ev));
		return -1;
	}
	for (unsigned i = 0; i < cap; i++) {
		fd_of[i] = i < n ? s->fd_of[i] : -1;
		bell_of[i] = i < n ? s->bell_of[i] : 0;
		rfd_of[i] = i < n ? s->rfd_of[i] : -1;
	}
	if (n) {
		memcpy(tag_of, s->tag_of, n * sizeof(*tag_of));
		memcpy(ev_of, s->ev_of, n * sizeof(*ev_of));
	}
	vsched__free_fd_tables(s);
	s->fd_of = fd_of;
	s->tag_of = tag_of;
	s->bell_of = bell_of;
	s->rfd_of = rfd_of;
	s->ev_of = ev_of;
	s->ev = ev;
	s->nslots = cap;
	return (int)n;
}

/* A new epoll set in place of the old one, under its number: the engine's
 * eventfd and timerfd and every registered fd again. A registration that
 * outlived its fd number (the file kept open by a dup) goes with the old
 * set, which nothing else can reach. A number of the table is added again
 * only while it names the file it was added with: the old set still holds
 * that file under that number, so a MOD of it there succeeds. One closed
 * before its fd_del may name another file by now (another part of the
 * process opened it): never ours to register (its slot waits for its
 * fd_del). Owner thread, not asleep; wakers never use the epoll fd. */
static int rebuild_set(struct vsched__sleeper *s)
{
	struct vsched__os_set o = s->os;
	int rc;

	o.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (o.epfd < 0)
		return -errno;
	if ((rc = vsched__os_set_own(&o)))
		goto out;
	for (unsigned i = 0; i < s->nslots; i++) {
		const int fd = s->fd_of[i];

		if (fd < 0 || vsched__os_ctl(&s->os, EPOLL_CTL_MOD, fd, s->ev_of[i],
					     SLOT_USER + i))
			continue;
		if ((rc = vsched__os_ctl(&o, EPOLL_CTL_ADD, fd, s->ev_of[i], SLOT_USER + i)))
			goto out;
	}
	if (dup3(o.epfd, s->os.epfd, O_CLOEXEC) < 0)
		rc = -errno;
out:
	close(o.epfd);
	return rc;
}

/*
 * use_evfd moves the sleeper's next sleep to epoll_pwait: each arm reads it,
 * publishes the mechanism of that sleep in sleep_evfd before it arms
 * BLOCKED, and the waker that wins that BLOCKED word reads sleep_evfd
 * (vsched__wake_sleeper(); protocol.md "The wake mechanism"). It is set
 * only once the epoll set holds the eventfd, the timerfd and the caller's
 * fd; a first call that fails anywhere closes what it created and leaves
 * the flag clear, so the sleeper stays on the futex. No waker can hold the
 * unpublished eventfd: it reads s->os.evfd only after seeing sleep_evfd,
 * which the owner sets only after seeing use_evfd.
 * Context: the owner thread, not asleep (the contract refuses the call
 * while it is inside the engine), so the tables never change under a
 * sleep.
 */
int vsched__sleeper_fd_add(struct vsched__sleeper *s, int fd, uint32_t events,
			   uint64_t tag)
{
	const bool first = !atomic_load_explicit(&s->use_evfd, memory_order_relaxed);
	int rc;

	const bool bell = events & VSCHED_FD_DOORBELL;

	events &= ~(uint32_t)VSCHED_FD_DOORBELL;
	/* Level-triggered readiness only (no EPOLLET, EPOLLONESHOT,
	 * EPOLLEXCLUSIVE, EPOLLWAKEUP: each would silence a wake source);
	 * a doorbell is vsched's to consume, so it is EPOLLIN alone. */
	if (fd < 0 || !events || (events & ~FD_EVENTS) || (bell && events != EPOLLIN))
		return VSCHED_EINVAL;
	/* vsched reads a doorbell itself, on the owner's thread: a blocking
	 * fd would hang that read once it is empty. */
	if (bell) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0)
			return -errno;
		if (!(fl & O_NONBLOCK))
			return VSCHED_EINVAL;
	}
	if (first && (rc = vsched__os_set_open(&s->os)))
		return rc; /* open() closed what it created */
	/* epoll hands back a slot number (the engine's own fds use 0 and
	 * 1); the user's tag is kept in the slot. */
	/* An fd number still in the table whose file was closed and which
	 * now names another file: the new registration takes its slot, so
	 * that each number has one slot and fd_del's count stays right (and
	 * the set is rebuilt below: a dup may have kept the old file, and
	 * its registration, alive). */
	int old = slot_of(s, fd);
	int i = old >= 0 ? old : free_slot(s);
	if (i < 0) {
		rc = VSCHED_ENOMEM;
		goto undo;
	}
	/* An eventfd doorbell is held edge-triggered and never read: a
	 * write rings once, which is all a ring means (look at the
	 * condition again), and the read that would reset its counter is
	 * one syscall a sleep saved. Anything else (a pipe) is read. */
	const uint8_t kind = !bell ? BELL_NONE : vsched__os_is_eventfd(fd) ? BELL_EDGE : BELL_READ;
	/* A doorbell that vsched reads is read through a dup of its own:
	 * the caller may close its number before fd_del (a dup elsewhere
	 * keeping the file, and its registration, alive), and the number
	 * may then name another file, which a read by number would drain
	 * (or block in, if it is not O_NONBLOCK). */
	int rfd = -1;
	if (kind == BELL_READ && (rfd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		rc = -errno;
		goto undo;
	}
	/* A doorbell also hears EPOLLRDHUP: a socket shut for reading
	 * (shutdown(SHUT_RD) of a datagram socket) is readable for ever
	 * while each read finds nothing, without EPOLLHUP; that is a hang-up
	 * (vsched__reported()), not a ring. */
	if (bell)
		events |= EPOLLRDHUP;
	if (kind == BELL_EDGE)
		events |= EPOLLET;
	rc = vsched__os_ctl(&s->os, EPOLL_CTL_ADD, fd, events, SLOT_USER + (unsigned)i);
	if (rc == -EEXIST)
		rc = VSCHED_EEXIST;
	else if (rc == -ENOSPC) /* the kernel's max_user_watches */
		rc = VSCHED_ENOMEM;
	if (rc) {
		if (rfd >= 0)
			close(rfd);
		goto undo;
	}
	if (old >= 0 && s->rfd_of[i] >= 0)
		close(s->rfd_of[i]); /* the number's old file */
	s->rfd_of[i] = rfd;
	if (old < 0)
		s->nfds++;
	else if (!s->bell_of[i])
		s->nlook--;
	s->fd_of[i] = fd;
	s->tag_of[i] = tag;
	s->ev_of[i] = events;
	/* The number named another file: that file's registration may
	 * outlive it (a dup), under this slot's data. A rebuild that fails
	 * (out of fds or memory) leaves the set as it was: the new fd works,
	 * and so may the stale registration, as before the rebuild existed. */
	if (old >= 0)
		(void)rebuild_set(s);
	s->bell_of[i] = kind;
	s->nlook += !bell;
	/* Release: a waker that sees the flag sees s->os.evfd. */
	atomic_store_explicit(&s->use_evfd, true, memory_order_release);
	return 0;
undo:
	if (first)
		vsched__os_set_close(&s->os); /* never published: nobody holds them */
	return rc ? rc : VSCHED_ENOMEM;
}

/* A closed fd is gone from the epoll set already (ENOENT or EBADF from
 * the kernel) but not from the table: its slot is freed all the same, and
 * the kernel's answer returned. */
int vsched__sleeper_fd_del(struct vsched__sleeper *s, int fd)
{
	int rc, i;
	if (!atomic_load_explicit(&s->use_evfd, memory_order_relaxed) || fd < 0)
		return VSCHED_EINVAL;
	/* Only an fd of the table: the epoll set also holds the sleeper's
	 * own eventfd and timerfd. */
	i = slot_of(s, fd);
	if (i < 0)
		return -ENOENT;
	rc = vsched__os_ctl(&s->os, EPOLL_CTL_DEL, fd, 0, 0);
	if (rc && rc != -EBADF && rc != -ENOENT)
		return rc; /* still registered */
	s->fd_of[i] = -1;
	s->nfds--;
	s->nlook -= !s->bell_of[i];
	const int rfd = s->rfd_of[i];
	/* Closed (or renumbered) before its fd_del: a dup may hold its file,
	 * and with it a registration DEL cannot reach. A rebuild that fails
	 * (out of fds or memory) changes nothing: the slot stays, so that the
	 * stale registration's events never pass to the slot's next owner,
	 * and the caller may call again. */
	if (rc) {
		int r2 = rebuild_set(s);
		if (r2) {
			s->fd_of[i] = fd;
			s->nfds++;
			s->nlook += !s->bell_of[i];
			return r2;
		}
	}
	if (rfd >= 0)
		close(rfd);
	s->rfd_of[i] = -1;
	return rc; /* the sleeper stays on epoll, the flag stays set */
}

int vsched_vcpu_fd_add(struct vsched_vcpu *v, int fd, uint32_t events,
		       uint64_t tag)
{
	int rc;

	if (!v)
		return VSCHED_EINVAL;
	if ((rc = vsched__vcpu_allowed(v, VSCHED__C_VCPU_FD_ADD)))
		return rc;
	/* Inside vsched_vcpu_block() the word says OUTSIDE_GUEST in its
	 * looks and hooks: the tables must not change under them (a look's
	 * event array, freed by a growth, would take the kernel's events).
	 * The change claims the flag as the block does, so a block that
	 * starts meanwhile (on the vCPU's thread, while this runs on
	 * another) is refused rather than sleeping on tables being grown. */
	if (atomic_exchange_explicit(&v->sl.in_engine, true, memory_order_acquire))
		return VSCHED_ESTATE;
	rc = vsched__sleeper_fd_add(&v->sl, fd, events, tag);
	atomic_store_explicit(&v->sl.in_engine, false, memory_order_release);
	return rc;
}

int vsched_vcpu_fd_del(struct vsched_vcpu *v, int fd)
{
	int rc;

	if (!v)
		return VSCHED_EINVAL;
	if ((rc = vsched__vcpu_allowed(v, VSCHED__C_VCPU_FD_DEL)))
		return rc;
	if (atomic_exchange_explicit(&v->sl.in_engine, true, memory_order_acquire))
		return VSCHED_ESTATE; /* as vsched_vcpu_fd_add() */
	rc = vsched__sleeper_fd_del(&v->sl, fd);
	atomic_store_explicit(&v->sl.in_engine, false, memory_order_release);
	return rc;
}

/* The caller's block result (lib/abi.h rule). */
#define RESULT_MIN VSCHED__SIZE_TO(struct vsched_block_result, vetoed)

int vsched__result_in(struct vsched_block_result *ours,
		      const struct vsched_block_result *theirs)
{
	/* Our own layout: all of it, as struct_in would copy it (no zeroing
	 * first: every byte is overwritten). */
	if (theirs && theirs->size == sizeof(*ours)) {
		memcpy(ours, theirs, sizeof(*ours));
		return 0;
	}
	return vsched__struct_in(ours, sizeof(*ours), theirs, RESULT_MIN);
}

void vsched__result_out(struct vsched_block_result *theirs,
			const struct vsched_block_result *ours)
{
	vsched__struct_out(theirs, ours, sizeof(*ours));
}
