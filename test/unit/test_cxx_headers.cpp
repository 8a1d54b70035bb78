// SPDX-License-Identifier: MIT
// The public headers compile as C++ and link from it.
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
	vsched_vm_destroy(vm);
	return rc == VSCHED_ERANGE ? 0 : 1;
}
