#!/usr/bin/env bash
# make bench's Kubernetes part: the kubernetes runtime on a real node
# (tier B: kubelet, containerd, runc, CNI, a registry on loopback) against
# the oci runtime (runc) in the same run, through the same benchmarks
# (runtimetest.Benchmark and runtimetest/poolbench), and a table
# of their medians, ratios and targets (issue 17); then create → ready
# through the daemon's REST API on both (internal/bench -create-only for
# oci, BenchmarkNodeRuntime/rest for kubernetes: the same request and the
# same ready), beside the runtime's own start. docs/PERFORMANCE.md says
# what the figures mean. Last, BenchmarkDaemons: throughput of one daemon
# against three on one PostgreSQL store, on the tier-A control plane.
#
#   AGENT2ENV_BIN=bin/agent2env scripts/bench-kube.sh   (make bench-kube)
#
# KUBE_BENCH_N sets the iterations per measurement (default 10). It needs
# root, the Kubernetes binaries (make kube-binaries) and the node's
# packages (make kube-node); without them it says what it skips.
set -euo pipefail
cd "$(dirname "$0")/.."

skip() {
	echo "bench: SKIPPED the kubernetes runtime benchmarks: $*"
	exit 0
}

[ "$(id -u)" -eq 0 ] || skip "they need root (a real kubelet and containerd); run make bench as root"
[ -n "${AGENT2ENV_BIN:-}" ] || skip "AGENT2ENV_BIN is not set (make bench sets it)"
n=${KUBE_BENCH_N:-10}
out=$(mktemp)
ociout=$(mktemp)
trap 'rm -f "$out" "$ociout"' EXIT

echo "create → ready through REST on the oci runtime (runc), $n iterations (the kubernetes figure follows)"
if ! go run ./internal/bench -create-only -n "$n" | tee "$ociout"; then
	echo "bench: the oci runtime's create → ready through REST failed"
	exit 1
fi

echo
echo "kubernetes runtime (tier B, a real node) against oci (runc), $n iterations each"
# One package after the other (-p 1), so that neither loads the machine
# while the other is measured.
status=0
go test -p 1 -count=1 -timeout 40m -run '^$' -bench '^Benchmark(Node)?(Runtime|WarmPool)$' -benchtime "${n}x" \
	./internal/runtime/oci/ ./internal/runtime/kube/kubetest/ 2>&1 |
	# client-go retries loading the certificates of a node already gone.
	grep --line-buffered -v 'cert_rotation.go' | tee "$out" || status=$?

if grep -q -- '--- SKIP: BenchmarkNode' "$out"; then
	skip "$(grep -A1 -- '--- SKIP: BenchmarkNode' "$out" | tail -1 | sed 's/^ *//')"
fi
if [ "$status" -ne 0 ]; then
	echo "bench: the kubernetes runtime benchmarks failed (go test exit $status)"
	exit 1
fi

# Lines such as "BenchmarkNodeRuntime/start-2  10  951234567 ns/op  950.1 p50-ms
# 990.2 p90-ms": the kubernetes figure of BenchmarkX/y is BenchmarkNodeX/y's.
# internal/bench's line "sandbox create → ready (REST)  p50 45.10 ms p90 …" is
# the oci figure through REST.
awk '
/^sandbox create → ready \(REST\)/ {
	for (i = 1; i < NF; i++) {
		if ($i == "p50" && ociRest50 == "") ociRest50 = $(i+1)
		if ($i == "p90" && ociRest90 == "") ociRest90 = $(i+1)
	}
}
/^BenchmarkNodeRuntime\/phases/ {
	for (i = 2; i < NF; i++) if ($(i+1) ~ /-ms$/) { m = $(i+1); sub(/-ms$/, "", m); phase[m] = $i }
	split("scheduled pod-sandbox agent-copied running ready", steps, " ")
	for (i = 1; i <= 5; i++) if (steps[i] in phase) phases = phases sprintf("  %s %.0f", steps[i], phase[steps[i]])
	if (("running" in phase) && ("ready" in phase)) phases = phases sprintf("\n  ready − running (the difference of those two p50s): %.1f ms", phase["ready"] - phase["running"])
}
/^Benchmark.*p50-ms/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	for (i = 2; i < NF; i++) {
		if ($(i+1) == "p50-ms") v = $i
		if ($(i+1) == "p90-ms") v90 = $i
	}
	if (name ~ /^BenchmarkNode/) { sub(/^BenchmarkNode/, "Benchmark", name); kube[name] = v; kube90[name] = v90 } else oci[name] = v
}
END {
	split("BenchmarkRuntime/start BenchmarkWarmPool/claim BenchmarkWarmPool/claim+exec BenchmarkRuntime/exec BenchmarkWarmPool/exec", order, " ")
	what["BenchmarkRuntime/start"] = "create → agent answers (cold, image pulled)"
	what["BenchmarkWarmPool/claim"] = "claim from a warm pool"
	what["BenchmarkWarmPool/claim+exec"] = "claim + first exec true"
	what["BenchmarkRuntime/exec"] = "exec true round trip"
	what["BenchmarkWarmPool/exec"] = "exec true, through the manager"
	target["BenchmarkRuntime/start"] = 1000
	target["BenchmarkWarmPool/claim"] = 20
	target["BenchmarkWarmPool/claim+exec"] = 20
	printf "\n%-46s %12s %12s %9s  %s\n", "p50", "oci", "kubernetes", "kube/oci", "target (kubernetes)"
	for (i = 1; i <= 5; i++) {
		k = order[i]
		if (!(k in kube) || !(k in oci)) { printf "%-46s missing\n", what[k]; continue }
		t = ""
		if (k in target) t = sprintf("≤ %d ms: %s", target[k], kube[k] <= target[k] ? "met" : "NOT met")
		printf "%-46s %9.2f ms %9.2f ms %8.1f×  %s\n", what[k], oci[k], kube[k], kube[k] / oci[k], t
	}
	if (phases != "") printf "\nkubernetes start, p50 ms from Create to each step as the API server sees it:\n%s\n", phases

	r = "BenchmarkRuntime/rest"; s = "BenchmarkRuntime/start"
	printf "\ncreate → ready through the daemon'"'"'s REST API (POST /api/v1/sandboxes, the image alone, until the sandbox is running: started and its agent answered):\n"
	if (ociRest50 == "") printf "  oci: missing\n"
	else printf "  %-60s p50 %9.2f ms  p90 %9.2f ms\n", "oci: internal/bench -create-only (runc, agent2env/python)", ociRest50, ociRest90
	if (!(r in kube)) { printf "  kubernetes: missing\n"; exit }
	printf "  %-60s p50 %9.2f ms  p90 %9.2f ms\n", "kubernetes: serve --runtime kubernetes (runtimetest image)", kube[r], kube90[r]
	if (ociRest50 != "") printf "  %-60s p50 %8.1f×     p90 %8.1f×\n", "kubernetes / oci, both through REST", kube[r] / ociRest50, kube90[r] / ociRest90
	if (s in kube) {
		printf "  %-60s p50 %9.2f ms  p90 %9.2f ms\n", "kubernetes, the runtime'"'"'s own start (the first row above)", kube[s], kube90[s]
		printf "  %-60s p50 %8.2f×     p90 %8.2f×\n", "kubernetes, through REST / the runtime'"'"'s own start", kube[r] / kube[s], kube90[r] / kube90[s]
	}
}' "$ociout" "$out"

# Several daemons (issue 29): one against three on one PostgreSQL store and
# the tier-A control plane (kwok), the same client load spread over them;
# the ratios and where the CPU went (BenchmarkDaemons).
echo
echo "throughput, 1 daemon against 3 on one PostgreSQL store (tier A: kube-apiserver, etcd, kwok), $((3 * n)) sandboxes each"
if ! KUBE_BENCH_N="$n" go test -count=1 -timeout 20m -run '^$' -bench '^BenchmarkDaemons$' -benchtime 1x ./internal/runtime/kube/ 2>&1 |
	grep --line-buffered -v 'cert_rotation.go' | grep -e '^BenchmarkDaemons' -e 'daemon(s):' -e '^FAIL' -e '^---'; then
	echo "bench: BenchmarkDaemons failed"
	exit 1
fi
