#!/bin/busybox sh
# /init of the netem VM's initramfs: load drivers, mount the host root (9p, read-only) and the work
# tree (9p, read-write) at the same path, run WORK/.vm-cmd.sh chrooted into the host root, report
# its exit status through isa-debug-exit (port 0xf4) and power off.
/bin/busybox --install -s
export PATH=/sbin:/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
arg() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" /proc/cmdline; }
WORK=$(arg workdir)
# The nfq backend's netfilter up front: iptables-nft's NFQUEUE and physdev (through nft_compat)
# and the queue itself; the bridge for the testbed's switch; br_netfilter also makes the sysctl
# net.bridge.bridge-nf-call-iptables that the backend writes. nf_tables needs libcrc32c, whose
# crc32c (crc32c_generic) busybox's modprobe does not load by itself (a soft dependency).
for m in virtio_pci 9pnet_virtio 9p veth vxlan sch_netem sch_tbf \
	crc32c_generic bridge br_netfilter nf_tables nft_compat nft_chain_nat nfnetlink_queue \
	xt_NFQUEUE xt_physdev xt_mark ip_tables iptable_mangle ip6table_mangle; do
	modprobe $m || echo "modprobe $m failed"
done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000 hostroot /host || { echo "9p root mount failed"; poweroff -f; }
mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -t devtmpfs dev /host/dev
mkdir -p /host/dev/pts /host/dev/shm; mount -t devpts devpts /host/dev/pts; mount -t tmpfs shm /host/dev/shm
mount -t tmpfs tmp /host/tmp; mount -t tmpfs run /host/run
# The work tree may lie below a tmpfs just mounted (a clone in /tmp): its mount point is made
# there; on the read-only host root it already exists.
rc=0
if [ -n "$WORK" ]; then
	mkdir -p /host$WORK 2>/dev/null
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 work /host$WORK || { echo "netem-vm: cannot mount the work tree at $WORK"; rc=126; }
fi
ENV="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TERM=dumb"
if [ $rc != 0 ]; then
	:
elif [ "$(arg mode)" = run ]; then
	if [ ! -f /host$WORK/.vm-cmd.sh ]; then
		echo "netem-vm: no command file $WORK/.vm-cmd.sh"; rc=126
	else
		chroot /host /usr/bin/env -i $ENV STALENET_TESTS_MUST_RUN=${MUST:-1} /bin/sh -c "cd $WORK && exec /bin/bash $WORK/.vm-cmd.sh" </dev/null; rc=$?
	fi
else
	setsid cttyhack chroot /host /usr/bin/env -i $ENV TERM=vt100 /bin/bash -l; rc=$?
fi
[ $rc -gt 127 ] && rc=127
echo "netem-vm: guest exit $rc"
sync
printf "\\$(printf %03o $rc)" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
poweroff -f
