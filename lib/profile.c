/* SPDX-License-Identifier: MIT */
/* The arch profiles (include/vsched/profile.h): lookup by name and declaration
 * on a VM. The profiles themselves live next to their arch's code. */
#include <string.h>

#include "internal.h"

#ifndef VSCHED_PROFILE_DEFAULT /* CMake sets it from the target processor */
#define VSCHED_PROFILE_DEFAULT "x86_64"
#endif

/* Every arch's profile, whatever the build's target (lib/arch/<arch>/profile.c,
 * listed by lib/arch/arch.h). */
#define PROFILE_REF(name) &vsched__profile_##name,
static const struct vsched_profile *const profiles[] = { VSCHED__ARCH_PROFILES(PROFILE_REF) };
#undef PROFILE_REF

const struct vsched_profile *vsched_profile_get(const char *arch)
{
	if (!arch)
		arch = VSCHED_PROFILE_DEFAULT;
	for (unsigned i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
		if (!strcmp(profiles[i]->arch, arch))
			return profiles[i];
	return NULL;
}

int vsched_profile_find(const struct vsched_profile *p, const char *name)
{
	if (!p || !name || (p->nkinds && !p->kinds))
		return VSCHED_EINVAL;
	for (unsigned i = 0; i < p->nkinds; i++)
		if (p->kinds[i].name && !strcmp(p->kinds[i].name, name))
			return (int)i;
	return VSCHED_ERANGE;
}

int vsched_profile_declare(struct vsched_vm *vm, const struct vsched_profile *p,
			   vsched_request_fn handler, void *arg)
{
	if (!vm || !p || (p->nkinds && !p->kinds))
		return VSCHED_EINVAL;
	for (unsigned i = 0; i < p->nkinds; i++) {
		const struct vsched_profile_kind *k = &p->kinds[i];
		struct vsched_request_desc d = { .name = k->name, .priority = k->priority,
						 .flags = k->flags, .handler = handler,
						 .arg = arg, .may_raise = k->may_raise };
		int rc = vsched_request_declare(vm, k->kind, &d);
		if (rc)
			return rc;
	}
	return 0;
}
