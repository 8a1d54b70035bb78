// SPDX-License-Identifier: MIT
// The public headers compile as C++ and link from it; built twice, as is
// and with VSCHED_INLINE (test_cxx_headers_inline: the inline fast paths of
// <vsched/inline.h> compiled as C++).
#include <cstdio>
#include <cstring>

#include <vsched/vsched.h>

int main()
{
	struct vsched_vm *vm = nullptr;
	struct vsched_vm_config cfg;
	std::memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	if (vsched_vm_create(&cfg, &vm) != 0)
		return 1;
	struct vsched_request_desc d;
	std::memset(&d, 0, sizeof(d));
	d.name = "x";
	int rc = vsched_request_declare(vm, 64, &d);
	std::printf("C++: %s\n", vsched_strerror(rc));
	if (rc != VSCHED_ERANGE || vsched_request_declare(vm, 3, &d) != 0 ||
	    vsched_request_finalize(vm, 0) != 0)
		return 1;
	struct vsched_vcpu *v = nullptr;
	if (vsched_vcpu_create(vm, 0, nullptr, &v) != 0)
		return 1;
	// The hot paths, each way they go.
	bool ok = vsched_post(v, 3) == 0 && vsched_vcpu_enter(v) == VSCHED_ENTRY_CANCELLED &&
		  vsched_service(v) == 1 && vsched_service(v) == 0 &&
		  vsched_vcpu_enter(v) == 0 && vsched_vcpu_exit(v) == 0 &&
		  vsched_vcpu_exit(v) == VSCHED_ESTATE && vsched_post(v, 4) == VSCHED_ERANGE;
#ifdef VSCHED_INLINE
	std::printf("C++ inline: %s\n", ok ? "ok" : "FAIL");
#endif
	vsched_vm_destroy(vm);
	return ok ? 0 : 1;
}
