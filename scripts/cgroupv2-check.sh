#!/usr/bin/env bash
# Checks what cgroup v2 does for a daemon's sandboxes, on the host it runs
# on (as root): meant for the pure cgroup v2 guest of scripts/cgroupv2-vm.sh
# (scripts/cgroupv2-vm.sh -- scripts/cgroupv2-check.sh); on a v1 or hybrid
# host the checks of cgroup files fail. For each OCI runtime binary given
# (default: crun runc) it starts bin/agent2env serve on a fresh data dir
# and, through the REST API: creates a sandbox (cpu 500m, memory 256Mi) of
# a busybox image it makes, execs in it, reads the limits of its cgroup
# (memory.max, cpu.max, pids.max, memory.swap.max when the host swaps), has
# a memory hog OOM-killed (oom_killed in the answer) and a fork bomb capped
# by pids.max, prints the usage in /api/v1/stats, pauses (cgroup.freeze)
# and resumes it, stops it (its cgroup stays, empty), starts and deletes
# it, and checks that no cgroup of the daemon's is left (the agent2env
# cgroup that holds every daemon's may stay). Prints PASS or FAIL per check
# and exits 1 if any failed.
#
#   scripts/cgroupv2-check.sh [BINARY...]    BINARY: crun, runc (--runtime)
#
# Environment: AGENT2ENV (the daemon binary, default bin/agent2env),
# CHECK_DIR (where the data dirs go, default /scratch when it exists,
# else a temporary directory), PORT (default 18080).
# shellcheck disable=SC2016 # the scripts given to execs expand in the sandbox
set -uo pipefail # a failed check is reported, and the next one runs

cd "$(dirname "$0")/.." || exit 1
bin=${AGENT2ENV:-$PWD/bin/agent2env}
binaries=("$@")
[ ${#binaries[@]} -gt 0 ] || binaries=(crun runc)
port=${PORT:-18080}
api=http://127.0.0.1:$port/api/v1
base=${CHECK_DIR:-}
if [ -z "$base" ]; then
	if [ -d /scratch ]; then base=/scratch; else base=$(mktemp -d /var/tmp/cgroupv2-check.XXXXXX); fi
fi
work=$(mktemp -d "$base/check.XXXXXX")
daemon_pid=
failed=0

cleanup() {
	if [ -n "$daemon_pid" ]; then
		# Sandboxes outlive their daemon: delete what a check left.
		local id
		for id in $(curl -s "$api/sandboxes" | grep -o '"id":"[^"]*"' | cut -d'"' -f4); do
			curl -s -X DELETE "$api/sandboxes/$id" >/dev/null
		done
		kill "$daemon_pid" 2>/dev/null || true
		wait "$daemon_pid" 2>/dev/null || true
	fi
	# The sandboxes' disks and roots are mounts under the data dirs.
	grep -o " $work/[^ ]*" /proc/self/mountinfo | sort -r | xargs -r umount -l 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

pass() { echo "PASS  $*"; }
fail() {
	echo "FAIL  $*"
	failed=1
}
check() { # check DESCRIPTION COMMAND...: PASS when the command succeeds
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}
req() { # req METHOD PATH [JSON]: prints the body; fails on an HTTP error
	local out code
	out=$(curl -sS -X "$1" -H 'Content-Type: application/json' ${3:+--data "$3"} -w '\n%{http_code}' "$api$2")
	code=${out##*$'\n'}
	out=${out%$'\n'*}
	echo "$out"
	[ "${code:0:1}" = 2 ] || { echo "HTTP $code from $1 $2: $out" >&2; return 1; }
}
field() { # field NAME: the first value of "NAME": in the JSON on stdin
	grep -o "\"$1\":[^,}]*" | head -1 | cut -d: -f2- | tr -d '"'
}
execs() { # execs ID SCRIPT [TIMEOUT]: the exec's JSON answer
	local body
	local s=${2//\\/\\\\}
	s=${s//\"/\\\"}
	body=$(printf '{"command":["sh","-c","%s"],"timeout":%d}' "$s" "${3:-60}")
	req POST "/sandboxes/$1/exec" "$body"
}

# The image: busybox and a sandbox user, in a docker save tarball.
image() {
	local d=$work/image
	mkdir -p "$d/root"/{bin,etc,workspace,home/sandbox,tmp}
	cp /bin/busybox "$d/root/bin/busybox"
	for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$d/root/bin/$a"; done
	printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000::/home/sandbox:/bin/sh\n' >"$d/root/etc/passwd"
	printf 'root:x:0:\nsandbox:x:1000:\n' >"$d/root/etc/group"
	chown 1000:1000 "$d/root/workspace" "$d/root/home/sandbox"
	tar -C "$d/root" --numeric-owner -cf "$d/layer.tar" .
	local layer cfg
	layer=$(sha256sum "$d/layer.tar" | cut -d' ' -f1)
	mkdir -p "$d/save/$layer"
	mv "$d/layer.tar" "$d/save/$layer/layer.tar"
	printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin","HOME=/home/sandbox"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$layer" >"$d/config.json"
	cfg=$(sha256sum "$d/config.json" | cut -d' ' -f1)
	mv "$d/config.json" "$d/save/$cfg.json"
	printf '[{"Config":"%s.json","RepoTags":["cgroupv2-check:latest"],"Layers":["%s/layer.tar"]}]' "$cfg" "$layer" >"$d/save/manifest.json"
	tar -C "$d/save" -cf "$d/image.tar" .
	echo "$d/image.tar"
}

# cgf FILE prints the file of the sandbox's cgroup $cg, or "-".
cgf() { cat "$cg/$1" 2>/dev/null || echo -; }

# agent2env_cgroups lists the cgroups under agent2env/ (the runtimes'
# parents and their sandboxes') that were not there before the daemon
# started: another daemon's on this host are not ours.
agent2env_cgroups() {
	find /sys/fs/cgroup -path "*/agent2env*" -type d 2>/dev/null | sort | grep -vxF -f "$work/cgroups-before" || true
}

check_runtime() {
	local rt=$1 data=$work/data-$1
	mkdir -p "$data"
	echo "== $rt: starting the daemon (data dir $data)"
	find /sys/fs/cgroup -path "*/agent2env*" -type d 2>/dev/null >"$work/cgroups-before"
	"$bin" serve --listen "127.0.0.1:$port" --data-dir "$data" --runtime "$rt" --prebuild-images=false \
		--console-listen "" >"$work/daemon-$rt.log" 2>&1 &
	daemon_pid=$!
	local _
	for _ in $(seq 300); do
		curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
		kill -0 "$daemon_pid" 2>/dev/null || { fail "$rt: the daemon exited"; tail -20 "$work/daemon-$rt.log"; daemon_pid=; return; }
		sleep 1
	done
	grep -iE "runtime|cgroup|warn|error" "$work/daemon-$rt.log" | head -20
	local t0=$SECONDS
	AGENT2ENV_URL=http://127.0.0.1:$port "$bin" image import "$img" >/dev/null
	echo "   image imported in $((SECONDS - t0)) s"

	t0=$SECONDS
	local id
	id=$(req POST /sandboxes '{"image":"cgroupv2-check:latest","cpu":"500m","memory":"256Mi","ttl":0}' | field id)
	[ -n "$id" ] || { fail "$rt: create"; return; }
	# Wait until it runs.
	for _ in $(seq 120); do
		[ "$(req GET "/sandboxes/$id" | field status)" = running ] && break
		sleep 1
	done
	check "$rt: create → running in $((SECONDS - t0)) s ($id)" [ "$(req GET "/sandboxes/$id" | field status)" = running ]
	local out
	out=$(execs "$id" 'echo hello; cat /proc/self/cgroup')
	check "$rt: exec" grep -q hello <<<"$out"
	echo "   in the sandbox: $(field stdout <<<"$out")"

	local cg
	# The cgroup2 cgroup (on a v1 host: none with these files).
	cg=$(find /sys/fs/cgroup -path "*/agent2env/*/$id" -type d -exec test -f {}/memory.max \; -print | head -1)
	check "$rt: the sandbox's cgroup exists ($cg)" [ -n "$cg" ]
	if [ -n "$cg" ]; then
		echo "   memory.max=$(cgf memory.max) cpu.max='$(cgf cpu.max)' pids.max=$(cgf pids.max) memory.swap.max=$(cgf memory.swap.max)"
		check "$rt: memory.max is 256Mi" [ "$(cgf memory.max)" = $((256 << 20)) ]
		check "$rt: cpu.max is 50000 100000" [ "$(cgf cpu.max)" = "50000 100000" ]
		check "$rt: pids.max is a number" grep -qx '[0-9]*' "$cg/pids.max"
		if [ "$(wc -l </proc/swaps)" -gt 1 ]; then
			# The host swaps: the memory limit holds only without swap.
			check "$rt: memory.swap.max is 0 (the host has swap)" [ "$(cgf memory.swap.max)" = 0 ]
		fi
		echo "   cgroup.procs: $(cgf cgroup.procs | tr '\n' ' ')"
	fi

	out=$(execs "$id" 'dd if=/dev/zero of=/dev/null bs=512M count=1' 60)
	echo "   memory hog: $out"
	check "$rt: the memory hog is OOM-killed (oom_killed true)" grep -q '"oom_killed":true' <<<"$out"
	[ -z "$cg" ] || echo "   memory.events: $(cgf memory.events | tr '\n' ' ')"
	out=$(execs "$id" 'echo still here' 30)
	check "$rt: the sandbox runs on after the OOM kill" grep -q 'still here' <<<"$out"

	# The shell gives up at its first failed fork, so the sleepers start
	# from a subshell; they are counted with builtins (nothing can fork).
	out=$(execs "$id" '(i=0; while [ $i -lt 2000 ]; do sleep 60 & i=$((i+1)); done) 2>/dev/null; set -- /proc/[0-9]*; echo procs=$#; kill 0' 120)
	local n pids_max
	n=$(grep -o 'procs=[0-9]*' <<<"$out" | cut -d= -f2)
	pids_max=$(cat "$cg/pids.max" 2>/dev/null || echo 0)
	echo "   fork bomb: $(head -c 300 <<<"$out")"
	echo "   fork bomb: $n processes ran, pids.max $pids_max; pids.events: $(cgf pids.events | tr '\n' ' ')"
	check "$rt: the fork bomb is capped by pids.max" [ "${n:-0}" -gt 10 -a "${n:-0}" -le "$pids_max" ]
	out=$(execs "$id" 'echo still here' 30)
	check "$rt: the sandbox runs on after the fork bomb" grep -q 'still here' <<<"$out"

	execs "$id" 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done' 120 >/dev/null
	out=$(req GET /stats)
	local cpu_used mem_used
	cpu_used=$(field cpu_seconds_used <<<"$out")
	mem_used=$(field memory_bytes_used <<<"$out")
	echo "   /api/v1/stats: cpu_seconds_used $cpu_used, memory_bytes_used $mem_used"
	check "$rt: stats report the sandbox's usage (cpu and memory > 0)" \
		awk -v c="${cpu_used:-0}" -v m="${mem_used:-0}" 'BEGIN { exit !(c > 0 && m > 0) }'

	t0=$SECONDS
	req POST "/sandboxes/$id/pause" >/dev/null
	check "$rt: pause ($((SECONDS - t0)) s): cgroup.freeze 1, frozen 1" \
		[ "$(cgf cgroup.freeze)" = 1 -a "$(cgf cgroup.events | grep -c '^frozen 1$')" = 1 ]
	check "$rt: paused status" [ "$(req GET "/sandboxes/$id" | field status)" = paused ]
	req POST "/sandboxes/$id/resume" >/dev/null
	check "$rt: resume: cgroup.freeze 0" [ "$(cgf cgroup.freeze)" = 0 ]
	out=$(execs "$id" 'echo resumed' 30)
	check "$rt: exec after resume" grep -q resumed <<<"$out"

	t0=$SECONDS
	req POST "/sandboxes/$id/stop" >/dev/null
	for _ in $(seq 60); do [ "$(req GET "/sandboxes/$id" | field status)" = succeeded ] && break; sleep 1; done
	check "$rt: stop, status succeeded ($((SECONDS - t0)) s)" [ "$(req GET "/sandboxes/$id" | field status)" = succeeded ]
	# A stopped sandbox's cgroup stays, empty, until it is started again or
	# deleted (the runtime binary's delete removes it), on v1 as on v2.
	check "$rt: the stopped sandbox's cgroup is empty (populated 0)" [ "$(cgf cgroup.events | grep -c '^populated 0$')" = 1 -o ! -d "$cg" ]
	req POST "/sandboxes/$id/start" >/dev/null
	for _ in $(seq 120); do [ "$(req GET "/sandboxes/$id" | field status)" = running ] && break; sleep 1; done
	check "$rt: start again" [ "$(req GET "/sandboxes/$id" | field status)" = running ]
	check "$rt: memory.max after start" [ "$(cgf memory.max)" = $((256 << 20)) ]
	out=$(execs "$id" 'echo started again' 30)
	check "$rt: exec after start" grep -q 'started again' <<<"$out"

	req DELETE "/sandboxes/$id" >/dev/null
	for _ in $(seq 60); do req GET "/sandboxes/$id" >/dev/null 2>&1 || break; sleep 1; done
	local left
	left=$(agent2env_cgroups | grep -v "/agent2env/[0-9a-f]*$" | grep -v "/agent2env$")
	check "$rt: delete leaves no sandbox cgroup${left:+ (left: $(tr '\n' ' ' <<<"$left"))}" [ -z "$left" ]

	kill "$daemon_pid"
	wait "$daemon_pid" 2>/dev/null || true
	daemon_pid=
	# The runtime removes its own parent (agent2env/<hash of its state
	# dir>) with its last sandbox; agent2env, which every daemon's parent
	# is under, stays.
	left=$(agent2env_cgroups | grep -vx "/sys/fs/cgroup/agent2env")
	check "$rt: nothing of agent2env left in the cgroup tree${left:+ (left: $(tr '\n' ' ' <<<"$left"))}" [ -z "$left" ]
	grep -iE "level=(WARN|ERROR)" "$work/daemon-$rt.log" | grep -v "process ids allow" | head -10 || true
}

echo "cgroupv2-check: $(uname -r); cgroup: $(stat -fc %T /sys/fs/cgroup); daemon $bin"
img=$(image)
for rt in "${binaries[@]}"; do check_runtime "$rt"; done
if [ $failed -ne 0 ]; then
	echo "cgroupv2-check: FAILED"
	exit 1
fi
echo "cgroupv2-check: all passed"
