/* SPDX-License-Identifier: MIT */
/**
 * @file vsched.h
 * @brief Umbrella header: includes every public vsched header.
 */
#ifndef VSCHED_VSCHED_H
#define VSCHED_VSCHED_H

#include <vsched/version.h>
#include <vsched/error.h>
#include <vsched/alloc.h>
#include <vsched/poll.h>
#include <vsched/vm.h>
#include <vsched/request.h>
#include <vsched/vcpu.h>
#include <vsched/block.h>
#include <vsched/waiter.h>
#include <vsched/timer.h>
#include <vsched/profile.h>
#include <vsched/hwthread.h>
#include <vsched/stats.h>
#include <vsched/inline.h>

#endif /* VSCHED_VSCHED_H */
