/* SPDX-License-Identifier: MIT */
/*
 * The hot vCPU layout that <vsched/inline.h> compiles into hypervisors,
 * as a type abigail can see: a shared object whose one exported function
 * takes it (the library's own exports never do). test/abi/check-abi.sh
 * compares its abidw with the committed test/abi/hot-layout.abi.
 */
#include <vsched/inline.h>

__attribute__((visibility("default"))) size_t
vsched_abi_hot_layout(const struct vsched_vcpu_hot *hot)
{
	return sizeof(*hot);
}
