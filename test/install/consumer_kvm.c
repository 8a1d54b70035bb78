/* SPDX-License-Identifier: MIT */
/* An out-of-tree user of the KVM adapter: links libvsched-kvm and checks
 * that bad input gets clear errors (no /dev/kvm needed). */
#include <stdio.h>
#include <string.h>
#include <vsched/vsched.h>
#include <vsched/kvm.h>

int main(void)
{
	struct vsched_kvm_vcpu *kv = NULL;
	struct vsched_kvm_config cfg = { .size = sizeof(cfg), .signo = 9 };
	int rc = vsched_kvm_attach(NULL, 3, NULL, NULL, &kv);

	if (rc != VSCHED_EINVAL || kv) {
		fprintf(stderr, "attach(NULL): %d\n", rc);
		return 1;
	}
	if (vsched_kvm_kick(NULL) != VSCHED_EINVAL ||
	    vsched_kvm_run(NULL) != VSCHED_EINVAL ||
	    vsched_kvm_halt(NULL, 0) != VSCHED_EINVAL)
		return 1;
	/* SIGKILL as the kick signal is refused before anything else. */
	rc = vsched_kvm_attach((struct vsched_vcpu *)&cfg, 3,
			       (struct kvm_run *)&cfg, &cfg, &kv);
	if (rc != VSCHED_EINVAL)
		return 1;
	printf("consumer_kvm: %s\n", vsched_strerror(rc));
	return strcmp(vsched_strerror(rc), "") ? 0 : 1;
}
