#!/usr/bin/env bash
# The netem VM: a stock Debian kernel (which has sch_netem) booted under qemu with a busybox
# initramfs, sharing the host's / read-only and the work tree read-write, to run the kernel
# backend's tests on hosts whose kernel lacks netem.
#
#   vagrant/netem-vm.sh setup [VMDIR]              build the VM (cached; default build/netem-vm)
#   vagrant/netem-vm.sh run [VMDIR] WORKDIR CMD... run CMD (cwd WORKDIR) in the guest;
#                                                  exit status = CMD's (0..127), 200 = VM died
#   vagrant/netem-vm.sh shell [VMDIR] WORKDIR      interactive shell on the serial console
#
# Setup needs root for apt-get (qemu-system-x86, busybox-static, cpio) and reaches Debian's mirror
# with `apt-get download` for the kernel package. qemu runs with TCG (software emulation): nested
# hypervisors like PVM cannot run a stock kernel, and TCG needs nothing from the host.
set -euo pipefail

# What the cached VM holds; bump it when the initramfs gains modules, so a VM cached by an older
# script is rebuilt instead of failing (2: bridge and netfilter for `stalenet run` and the nfq
# backend; 5: vxlan and udp_tunnel for runs across test hosts).
VM_LAYOUT=5

die() { echo "netem-vm: $*" >&2; exit 1; }
cmd=${1:-}; shift || true
VMDIR=build/netem-vm
if [ $# -gt 0 ] && [ "$cmd" = setup ]; then VMDIR=$1; shift; fi
if [ $# -gt 1 ] && [ "$cmd" != setup ] && [ -f "$1/vmlinuz" ]; then VMDIR=$1; shift; fi

need_pkgs() {
	local missing=()
	for p in qemu-system-x86 busybox-static cpio; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" = 0 ] || die "missing packages: ${missing[*]} (run: sudo apt-get install -y ${missing[*]})"
	echo "netem-vm: installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
		|| die "apt-get install ${missing[*]} failed"
}

setup() {
	if [ -f "$VMDIR/ready" ] && [ "$(cat "$VMDIR/ready")" = "layout $VM_LAYOUT" ]; then return 0; fi
	rm -f "$VMDIR/ready"
	need_pkgs
	mkdir -p "$VMDIR"
	local vm; vm=$(realpath "$VMDIR")
	# The kernel's ABI name changes with every Debian point release: resolve it now.
	local kpkg
	kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	if [ -z "$kpkg" ]; then
		[ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get update -qq
		kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	fi
	[ -n "$kpkg" ] || die "cannot resolve the Debian kernel package (apt-cache depends linux-image-amd64)"
	local kver=${kpkg#linux-image-}
	echo "netem-vm: kernel $kpkg"
	rm -rf "$vm/kpkg" && mkdir -p "$vm/kpkg"
	(cd "$vm/kpkg" && apt-get download -qq "$kpkg" >/dev/null 2>&1) || die "apt-get download $kpkg failed (mirror reachable?)"
	dpkg -x "$vm"/kpkg/*.deb "$vm/kpkg/root" || die "cannot unpack $kpkg"
	cp "$vm/kpkg/root/boot/vmlinuz-$kver" "$vm/vmlinuz"
	# Booting the uncompressed ELF (PVH entry) skips in-guest decompression: seconds under TCG.
	rm -f "$vm/vmlinux"
	if command -v python3 >/dev/null; then
		python3 - "$vm/vmlinuz" "$vm/vmlinux" <<'PY' || rm -f "$vm/vmlinux"
import lzma, sys
data = open(sys.argv[1], 'rb').read()
at = data.find(b'\xfd7zXZ\x00')
if at < 0:
    sys.exit(1)
open(sys.argv[2], 'wb').write(lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[at:]))
PY
	fi
	# initramfs: busybox + the modules for 9p, virtio, veth, ifb and every qdisc, the bridge (the
	# testbed's switch) and netfilter (iptables-nft's NFQUEUE and physdev for the nfq backend),
	# with their own modules.dep so the kernel's request_module() loads them on demand.
	local ir="$vm/initramfs" km="$vm/kpkg/root/lib/modules/$kver"
	rm -rf "$ir" && mkdir -p "$ir"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,host} "$ir/lib/modules/$kver"
	# bridge, llc/stp and netfilter (iptables-nft, NFQUEUE): what a whole `stalenet run` needs.
	(cd "$km" && find kernel/drivers/virtio kernel/fs/9p kernel/fs/netfs kernel/fs/fscache kernel/net/9p \
		kernel/net/sched kernel/drivers/net/veth.ko kernel/drivers/net/ifb.ko kernel/drivers/net/vxlan/vxlan.ko \
		kernel/net/ipv4/udp_tunnel.ko kernel/net/ipv6/ip6_udp_tunnel.ko \
		kernel/net/bridge kernel/net/802 kernel/net/llc kernel/net/netfilter kernel/net/ipv4/netfilter \
		kernel/net/ipv6/netfilter kernel/lib/libcrc32c.ko kernel/crypto/crc32c_generic.ko -name '*.ko*' 2>/dev/null \
		| grep -v -E '9pnet_(rdma|xen)|virtio_(mem|balloon|input|vdpa|mmio|dma_buf)|netfilter/(ipvs|ipset)/' \
		| cpio -pdm --quiet "$ir/lib/modules/$kver")
	cp "$km/modules.order" "$km/modules.builtin" "$ir/lib/modules/$kver/"
	busybox depmod -b "$ir" "$kver" || die "depmod failed"
	cp "$(command -v busybox)" "$ir/bin/busybox"
	cp "$(dirname "$0")/netem-vm-init.sh" "$ir/init"
	chmod +x "$ir/init"
	(cd "$ir" && find . | cpio -o -H newc --quiet | gzip -1) > "$vm/initramfs.cpio.gz"
	echo "$kver" > "$vm/kver"
	rm -rf "$vm/kpkg" "$ir"
	echo "layout $VM_LAYOUT" > "$vm/ready"
	echo "netem-vm: ready in $VMDIR ($(du -sh "$vm" | cut -f1))"
}

run() {
	[ "$(cat "$VMDIR/ready" 2>/dev/null)" = "layout $VM_LAYOUT" ] || die "no current VM in $VMDIR: run vagrant/netem-vm.sh setup first"
	command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing (apt-get install qemu-system-x86)"
	local work; work=$(realpath "${1:?WORKDIR}"); shift
	local vm; vm=$(realpath "$VMDIR")
	local kernel="$vm/vmlinux"; [ -f "$kernel" ] || kernel="$vm/vmlinuz"
	rm -f "$work/.vm-cmd.sh" "$work/.guest-exitcode"
	if [ $# -gt 0 ]; then printf '%q ' "$@" > "$work/.vm-cmd.sh"; fi
	local q=0 mode=shell limit=() input=/dev/stdin
	# A command runs with no terminal and a time limit (VM_TIMEOUT seconds, default 1800), so
	# nothing in the guest can wait for input or hang CI; a shell gets the console.
	if [ $# -gt 0 ]; then mode=run input=/dev/null limit=(timeout --kill-after=10 "${VM_TIMEOUT:-1800}"); fi
	# The guest's timers run on the host's CPU time: a VM that waits behind other host work sees
	# every timer late. A high scheduling weight (root only; others run at their own) keeps the
	# kernel backend's timing a property of netem, not of the host's run queue.
	[ "$(id -u)" = 0 ] && limit+=(nice -n -15)
	"${limit[@]}" qemu-system-x86_64 -accel "${ACCEL:-tcg}" -cpu max -smp "${SMP:-2}" -m "${MEM:-1024}" -nographic -no-reboot \
		-kernel "$kernel" -initrd "$vm/initramfs.cpio.gz" \
		-append "console=ttyS0 quiet panic=-1 workdir=$work mode=$mode" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$work,mount_tag=work,security_model=none,multidevs=remap" \
		-device isa-debug-exit,iobase=0xf4,iosize=0x04 -nic none < "$input" || q=$?
	rm -f "$work/.vm-cmd.sh"
	# isa-debug-exit: qemu exits with (code << 1) | 1
	if [ $q = 124 ] || [ $q = 137 ]; then
		echo "netem-vm: the VM ran past VM_TIMEOUT=${VM_TIMEOUT:-1800} s and was stopped" >&2
		exit 200
	fi
	if [ $((q & 1)) -eq 1 ]; then exit $((q >> 1)); fi
	echo "netem-vm: the VM exited without reporting (qemu status $q)" >&2
	exit 200
}

case "$cmd" in
setup) setup ;;
run) [ $# -ge 2 ] || die "usage: netem-vm.sh run [VMDIR] WORKDIR CMD..."; run "$@" ;;
shell) [ $# -ge 1 ] || die "usage: netem-vm.sh shell [VMDIR] WORKDIR"; run "$1" ;;
*) die "usage: netem-vm.sh setup|run|shell ... (see the header of this script)" ;;
esac
