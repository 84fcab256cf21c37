#!/usr/bin/env bash
# Runs one command on a pure cgroup v2 host: a QEMU guest (TCG: no KVM
# needed) booting Debian's generic kernel with cgroup2 alone mounted at
# /sys/fs/cgroup, every controller enabled, as on Debian 12, Ubuntu 22.04+
# or Fedora. The guest sees the host's file system as its own: the host's
# / over virtio-9p (read-only), under an overlay whose writes go to a
# scratch disk, so the command runs the host's binaries, images and caches
# from the same working directory. The guest's console is streamed here,
# and the command's exit status is the script's.
#
#   scripts/cgroupv2-vm.sh [options] -- COMMAND [ARG...]
#
#   -m MiB        guest memory (default 4096)
#   -c N          guest CPUs (default 2)
#   -d GiB        scratch disk size, sparse (default 20)
#   -s MiB        swap, a file on the scratch disk (default 1024; 0: none):
#                 a sandbox's memory limit must hold with swap to go to
#   -t SECONDS    kill the guest after this long (default 3600): exit 124
#   -k ARGS       more kernel command line (e.g. swapaccount=0)
#   -e VAR=VALUE  set VAR in the command's environment (repeatable); the
#                 command also gets the caller's PATH, HOME, GO* and
#                 AGENT2ENV_* variables
#
# In the guest (what the command may rely on):
#   /             the host's root, writable (copy-on-write onto /scratch)
#   /host         the host's root as it is, read-only
#   /scratch      the scratch disk (ext4): /scratch/data is an empty
#                 directory for serve --data-dir; /tmp is /scratch/tmp,
#                 empty (put test binaries anywhere else, or use /host/tmp)
#   cgroups       cgroup2 at /sys/fs/cgroup (nsdelegate), every controller
#                 in the root's subtree_control; the command runs in
#                 /system.slice/cgroupv2-vm.service, as a systemd service
#                 would, with the controllers enabled in system.slice
#   network       loopback only
#
# Needs root, qemu-system-x86 and busybox-static, and the kernel
# linux-image-amd64 installs (the cloud kernel has no 9p); it installs the
# missing ones with apt-get. The kernel is the newest
# /boot/vmlinuz-*-amd64 that is not -cloud-, or $CGROUPV2_VM_KERNEL. KVM is
# not used (nested KVM hangs this kernel on the machine this was written
# on): under TCG the guest runs 10-30 times slower than the host.
set -euo pipefail

mem=4096 cpus=2 disk_gib=20 swap_mib=1024 timeout_s=3600 kargs=
extra_env=()
while getopts "m:c:d:s:t:k:e:h" opt; do
	case $opt in
	m) mem=$OPTARG ;;
	c) cpus=$OPTARG ;;
	d) disk_gib=$OPTARG ;;
	s) swap_mib=$OPTARG ;;
	t) timeout_s=$OPTARG ;;
	k) kargs=$OPTARG ;;
	e) extra_env+=("$OPTARG") ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
if [ $# -eq 0 ]; then
	echo "usage: $0 [options] -- COMMAND [ARG...] (-h for help)" >&2
	exit 2
fi
[ "$(id -u)" -eq 0 ] || { echo "$0: needs root (9p passthrough, the guest's files keep their owners)" >&2; exit 1; }

say() { echo "cgroupv2-vm: $*" >&2; }

# The packages, once.
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -x /bin/busybox ] && file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' || need+=(busybox-static)
kernel=${CGROUPV2_VM_KERNEL:-$(find /boot -maxdepth 1 -name 'vmlinuz-*-amd64' ! -name '*cloud*' | sort -V | tail -1)}
[ -n "$kernel" ] || need+=(linux-image-amd64)
if [ ${#need[@]} -gt 0 ]; then
	say "installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >&2
	kernel=${CGROUPV2_VM_KERNEL:-$(find /boot -maxdepth 1 -name 'vmlinuz-*-amd64' ! -name '*cloud*' | sort -V | tail -1)}
fi
kver=${kernel#*/vmlinuz-}
moddir=/lib/modules/$kver
[ -d "$moddir" ] || { echo "$0: no $moddir for $kernel" >&2; exit 1; }

work=$(mktemp -d /tmp/cgroupv2-vm.XXXXXX)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# The initramfs: busybox and the modules that reach the host's root and
# the scratch disk, in dependency order; every other module the guest
# loads later from the host's /lib/modules (modprobe, through 9p).
say "kernel $kernel; building the initramfs in $work"
mkdir -p "$work/initramfs"/{bin,dev,proc,sys,lib/modules,host,scratch,newroot}
cp /bin/busybox "$work/initramfs/bin/busybox"
order=()
addmod() {
	local m=$1 dep
	for dep in "${order[@]}"; do [ "$dep" = "$m" ] && return; done
	for dep in $(modinfo -k "$kver" -F depends "$m" | tr , ' '); do addmod "$dep"; done
	local f
	f=$(modinfo -k "$kver" -n "$m")
	case $f in
	builtin | "") return ;;
	*.ko) cp "$f" "$work/initramfs/lib/modules/" ;;
	*.ko.xz) xz -dc "$f" >"$work/initramfs/lib/modules/$(basename "$f" .xz)" ;;
	*.ko.zst) zstd -qdc "$f" >"$work/initramfs/lib/modules/$(basename "$f" .zst)" ;;
	*) echo "$0: module $m: cannot read $f" >&2; exit 1 ;;
	esac
	order+=("$m")
}
for m in virtio_pci virtio_blk 9pnet_virtio 9p crc32c_generic ext4 overlay; do addmod "$m"; done
for m in "${order[@]}"; do
	f=$(modinfo -k "$kver" -n "$m")
	f=$(basename "$f")
	echo "${f%.xz}"
done | sed 's/\.zst$//' >"$work/initramfs/modules"

# Stage 1 (busybox, PID 1): mount the host's root and the scratch disk,
# make the writable root and switch to it.
cat >"$work/initramfs/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules); do insmod /lib/modules/$m || echo "stage1: insmod $m failed"; done
fail() { echo "stage1: $*"; echo "CGROUPV2-VM-EXIT=125"; poweroff -f; }
# The disk's device appears a moment after its driver loads.
for i in $(seq 50); do [ -b /dev/vda ] && break; sleep 0.1; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /host || fail "mount the host's root (9p)"
mount -t ext4 /dev/vda /scratch || fail "mount the scratch disk"
mkdir -p /scratch/upper /scratch/work /scratch/tmp /scratch/data
chmod 1777 /scratch/tmp
mount -t overlay overlay -o lowerdir=/host,upperdir=/scratch/upper,workdir=/scratch/work /newroot || fail "mount the overlay root"
mkdir -p /newroot/host /newroot/scratch /newroot/.cgroupv2-vm
mount --move /host /newroot/host
mount --move /scratch /newroot/scratch
cp /stage2 /newroot/.cgroupv2-vm/stage2
umount /proc /sys /dev 2>/dev/null
exec switch_root /newroot /bin/bash /.cgroupv2-vm/stage2
EOF
chmod +x "$work/initramfs/init"

# Stage 2 (the host's bash, PID 1 in the writable root): a pure cgroup v2
# host, then the command.
{
	echo '#!/bin/bash'
	echo 'cmd_cwd='"$(printf %q "$PWD")"
	echo "swap_mib=$swap_mib"
	printf 'cmd=('
	printf '%q ' "$@"
	echo ')'
	printf 'cmd_env=('
	for v in PATH HOME $(compgen -e | grep -E '^(GO[A-Z0-9_]*|AGENT2ENV_[A-Z0-9_]*|CI)$' || true); do
		printf '%q ' "$v=${!v}"
	done
	for v in "${extra_env[@]}"; do printf '%q ' "$v"; done
	echo ')'
	cat <<'EOF'
set -u
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
ln -s /proc/self/fd /dev/fd
ln -s fd/0 /dev/stdin
ln -s fd/1 /dev/stdout
ln -s fd/2 /dev/stderr
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
mount -t tmpfs -o mode=755 run /run
mount --bind /scratch/tmp /tmp
# What a distribution's boot loads or makes a node for (kmod static-nodes):
# loop devices for the sandboxes' disks.
modprobe loop
if [ "$swap_mib" -gt 0 ]; then
	fallocate -l "${swap_mib}M" /scratch/swap && chmod 600 /scratch/swap &&
		mkswap -q /scratch/swap && swapon /scratch/swap || echo "stage2: no swap"
fi
mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup
cg=/sys/fs/cgroup
for c in $(cat $cg/cgroup.controllers); do echo "+$c" >$cg/cgroup.subtree_control; done
mkdir -p $cg/init.scope $cg/system.slice/cgroupv2-vm.service
echo $$ >$cg/init.scope/cgroup.procs
for c in $(cat $cg/system.slice/cgroup.controllers); do echo "+$c" >$cg/system.slice/cgroup.subtree_control; done
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
hostname cgroupv2-vm
echo "stage2: kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MiB, swap $(awk '/SwapTotal/ {print int($2/1024)}' /proc/meminfo) MiB"
echo "stage2: cgroup mounts:"; grep cgroup /proc/self/mountinfo
echo "stage2: root controllers: $(cat $cg/cgroup.subtree_control)"
echo "stage2: running in ${cmd_cwd}: ${cmd[*]}"
start=$(date +%s)
(
	echo $BASHPID >$cg/system.slice/cgroupv2-vm.service/cgroup.procs
	cd "$cmd_cwd" && exec env -i "${cmd_env[@]}" "${cmd[@]}"
) </dev/null
rc=$?
echo "stage2: the command exited with status $rc after $(($(date +%s) - start)) s"
echo "CGROUPV2-VM-EXIT=$rc"
sync
swapoff -a 2>/dev/null
umount /tmp /scratch 2>/dev/null
busybox poweroff -f
echo o >/proc/sysrq-trigger
EOF
} >"$work/initramfs/stage2"

(cd "$work/initramfs" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initramfs.gz"
say "scratch disk: ${disk_gib} GiB sparse, ext4"
truncate -s "${disk_gib}G" "$work/scratch.img"
mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 "$work/scratch.img"

say "booting: TCG, $cpus CPUs, $mem MiB, timeout ${timeout_s}s; guest console follows"
start=$(date +%s)
set +e
timeout --foreground -k 10 "$timeout_s" qemu-system-x86_64 \
	-accel tcg,thread=multi -cpu max -smp "$cpus" -m "$mem" -machine q35 \
	-kernel "$kernel" -initrd "$work/initramfs.gz" \
	-append "console=ttyS0 panic=-1 quiet loglevel=4 rdinit=/init${kargs:+ $kargs}" \
	-display none -serial stdio -monitor none -nic none -no-reboot \
	-virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap \
	-drive file="$work/scratch.img",format=raw,if=virtio,cache=unsafe \
	</dev/null 2>&1 | tee "$work/console.log"
qrc=${PIPESTATUS[0]}
set -e
took=$(($(date +%s) - start))
rc=$(sed -n 's/^CGROUPV2-VM-EXIT=\([0-9]*\).*/\1/p' "$work/console.log" | tail -1)
if [ -z "$rc" ]; then
	if [ "$qrc" -eq 124 ]; then
		say "the guest ran out of its ${timeout_s}s and was killed"
		exit 124
	fi
	say "the guest ended (qemu status $qrc) without the command's status, after ${took}s"
	exit 125
fi
say "guest done in ${took}s: the command's exit status is $rc"
exit "$rc"
