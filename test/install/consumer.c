/* SPDX-License-Identifier: MIT */
/* An out-of-tree consumer: built against an installed vsched, through
 * pkg-config and through find_package(vsched CONFIG). */
#include <stdio.h>

#include <vsched/vsched.h>

static int served;
static void handler(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		    void *a)
{
	(void)v, (void)k, (void)p, (void)a;
	served++;
}

int main(void)
{
	struct vsched_request_desc d = { .name = "irq", .handler = handler };
	struct vsched_vm *vm;
	struct vsched_vcpu *v;
	int rc;

	if ((rc = vsched_vm_create(NULL, &vm)) || (rc = vsched_request_declare(vm, 1, &d)) ||
	    (rc = vsched_request_finalize(vm, 0)) || (rc = vsched_vcpu_create(vm, 0, NULL, &v)) ||
	    (rc = vsched_post(v, 1)) || (rc = vsched_service(v)) != 1) {
		fprintf(stderr, "consumer: %s\n", vsched_strerror(rc));
		return 1;
	}
	vsched_vm_destroy(vm);
	printf("consumer ok: vsched %d.%d.%d, %d request served\n", VSCHED_VERSION_MAJOR,
	       VSCHED_VERSION_MINOR, VSCHED_VERSION_PATCH, served);
	return served == 1 ? 0 : 1;
}
