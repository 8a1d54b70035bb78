#!/bin/sh
# Run the `kvm`-labelled tests (vsched-vmm on /dev/kvm), or another label,
# on a machine that has no /dev/kvm: inside a qemu-system-x86_64 TCG guest whose emulated CPU
# has SVM, running Debian's kernel with kvm-amd (nested virtualisation in
# software). The guest mounts this machine's root over 9p and runs ctest in
# a chroot of it, so it tests the very build tree given. Where /dev/kvm
# works the tests run directly instead.
# Needs (Debian): qemu-system-x86 linux-image-amd64 busybox-static cpio.
# usage: kvm-in-qemu.sh BUILD_DIR [LABEL]     (LABEL: default kvm)
# KVM_IN_QEMU_TIMEOUT: seconds before qemu is stopped (default 1800).
# KVM_IN_QEMU_FORCE_TCG=1: take the qemu path even where /dev/kvm works, to
# check that path itself. qemu still runs with -accel tcg, never the host's
# KVM, and the tests use the L1 guest's /dev/kvm (nested SVM in software).
set -eu
build=$(cd "$1" && pwd)
label=${2:-kvm}
if [ "${KVM_IN_QEMU_FORCE_TCG:-0}" = 1 ]; then
	echo "kvm-in-qemu: KVM_IN_QEMU_FORCE_TCG=1; not using this machine's /dev/kvm"
elif [ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
	echo "kvm-in-qemu: /dev/kvm is here; running the tests directly"
	exec ctest --test-dir "$build" -L "$label" --output-on-failure
fi
kernel=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n1)
[ -n "$kernel" ] || { echo "kvm-in-qemu: no kernel in /boot (apt-get install linux-image-amd64)"; exit 1; }
kver=${kernel#/boot/vmlinuz-}
for t in qemu-system-x86_64 busybox cpio modinfo; do
	command -v $t >/dev/null || { echo "kvm-in-qemu: $t is missing"; exit 1; }
done
work=$(mktemp -d /tmp/kvm-in-qemu.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root/bin" "$root/mods" "$root/proc" "$root/sys" "$root/dev" "$root/host"
cp "$(command -v busybox)" "$root/bin/"
# kvm-amd, virtio-pci and 9p, dependencies first.
order=""
add() {
	for d in $(modinfo -k "$kver" -F depends "$1" | tr , ' '); do add "$d"; done
	case " $order " in
	*" $1 "*) ;;
	*) order="$order $1"; cp "$(modinfo -k "$kver" -n "$1")" "$root/mods/$1.ko" ;;
	esac
}
for m in kvm-amd virtio_pci 9pnet_virtio 9p; do add "$m"; done
echo "$order" > "$root/mods/order"
# What the guest runs, in a chroot of this machine's root.
cat > "$work/cmd" <<CMD
cd "$build" && ctest -L "$label" --output-on-failure; echo \$? > "$work/rc"
CMD
cat > "$root/init" <<INIT
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in \$(cat /mods/order); do insmod /mods/\$m.ko || echo "insmod \$m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 host /host
mount --bind /dev /host/dev; mount --bind /proc /host/proc; mount --bind /sys /host/sys
# No network card (qemu runs with -nic none): tests send traffic only inside
# their own network namespace. Any interface but lo, or a PCI network
# controller even without a driver (this image loads none), stops the run
# before ctest, and the host fails on the file written here.
net=""
for n in /sys/class/net/*; do
	n=\${n##*/}
	[ -e "/sys/class/net/\$n" ] && [ "\$n" != lo ] && net="\$net interface \$n;"
done
for d in /sys/bus/pci/devices/*; do
	case \$(cat "\$d/class" 2>/dev/null) in
	0x02*) net="\$net PCI network controller \${d##*/} (\$(cat "\$d/vendor"):\$(cat "\$d/device"));" ;;
	esac
done
if [ -n "\$net" ]; then
	echo "kvm-in-qemu: network in the guest:\$net not running the tests"
	echo "\$net" > "/host$work/net"
else
	echo "kvm-in-qemu: no network in the guest (only lo)"
fi
[ -c /dev/kvm ] && echo "kvm-in-qemu: /dev/kvm is up in the guest"
# Where KVM's modules are, to read a dumped guest RIP that points into L1.
grep '^kvm' /proc/modules | while read n s u d st a; do echo "kvm-in-qemu: module \$n at \$a size \$s"; done
# A heartbeat on this machine's disk: the host stops a guest whose kernel
# no longer runs its userspace.
( i=0; while :; do i=\$((i + 1)); echo \$i > "/host$work/alive"; sleep 10; done ) &
[ -n "\$net" ] || chroot /host /bin/sh "$work/cmd"
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$work/initrd.gz"
echo "kvm-in-qemu: booting $kernel under TCG with nested SVM"
# The console exists before tail opens it (qemu below starts in the background).
: > "$work/console"
timeout "${KVM_IN_QEMU_TIMEOUT:-1800}" qemu-system-x86_64 -accel tcg,thread=multi -cpu EPYC,+svm \
	-smp 2 -m 4096 -nographic -no-reboot -nic none -kernel "$kernel" \
	-initrd "$work/initrd.gz" -append "console=ttyS0 quiet panic=-1" \
	-virtfs local,path=/,mount_tag=host,security_model=none,multidevs=remap,id=host \
	</dev/null >"$work/console" 2>&1 &
qemu=$!
tail -f --pid=$qemu "$work/console" |
	grep --line-buffered -v -e "TCG doesn't support" -e '^.\[' &
# Nested KVM under TCG sometimes wedges the guest kernel (doc/vmm.md): no
# heartbeat for 120 s (host time) while qemu runs stops it.
beat="" since=$(date +%s) wedged=""
while kill -0 $qemu 2>/dev/null; do
	sleep 5
	b=$(cat "$work/alive" 2>/dev/null || true)
	if [ -z "$b" ] || [ "$b" != "$beat" ]; then
		beat=$b since=$(date +%s)
	elif [ $(($(date +%s) - since)) -gt 120 ]; then
		wedged=1
		kill $qemu 2>/dev/null || true
		break
	fi
done
wait $qemu 2>/dev/null || true
wait 2>/dev/null || true
rc=$(cat "$work/rc" 2>/dev/null || echo missing)
echo "kvm-in-qemu: ctest -L $label in the guest exited $rc"
# A network card in the guest is this script's own fault, never an
# environment fault: exit 1 whatever else happened.
if [ -e "$work/net" ] || grep -q 'kvm-in-qemu: network in the guest:' "$work/console"; then
	echo "kvm-in-qemu: FAIL: the guest saw a network (above); it must have no interface but lo"
	exit 1
fi
[ "$rc" = 0 ] && exit 0
# Exit 75 only for faults of the machinery below, shown as such: a guest
# kernel that stopped or panicked, or a vCPU whose saved state no guest
# could produce (vsched-vmm prints "environment fault").
if [ -n "$wedged" ]; then
	echo "kvm-in-qemu: environment fault: the guest kernel ran no userspace for 120 s"
	exit 75
fi
if grep -q 'Kernel panic' "$work/console"; then
	echo "kvm-in-qemu: environment fault: the guest kernel panicked (above)"
	exit 75
fi
if grep -q 'environment fault' "$work/console"; then
	echo "kvm-in-qemu: environment fault reported by a test (above)"
	exit 75
fi
exit 1
