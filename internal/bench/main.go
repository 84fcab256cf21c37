// Command bench measures agent2env against the performance targets of the
// specification, each beside a baseline measured in the same run on the
// same machine (these machines are shared and noisy, so ratios carry more
// than absolute figures):
//
//   - sandbox create → ready through REST, against
//     `unshare --mount --pid --fork --net --uts --ipc true`;
//   - `exec true` round trip through REST, against a direct fork/exec;
//   - a live snapshot, a restore and a fork ×8 through REST, against the
//     same run's create (-snapshot-only: those and what they need alone);
//   - pause and resume through REST, against the same run's create (-pause-only:
//     those and what they need alone);
//   - the terminal: a keystroke's echo against the same run's exec true, and
//     the output of a cat of 100 MB against the same cat on a bare pty of the
//     host (-terminal-only: those and what they need alone);
//   - 100 concurrent creates, against 100 `unshare … true` at once
//     (-concurrent-only: that alone; -cold-only: create → ready, the first
//     execute_code of a new session without a pool and the concurrent
//     creates alone, issue 30's rows);
//   - (-density N only; make bench runs -density 2000, 4–5 minutes and
//     13 GiB of memory here) N idle sandboxes each with a live Python
//     kernel: memory per sandbox against an idle python3 of the host, for
//     2,000 against 16 GiB, and what their delete leaves behind;
//   - memory per idle sandbox (absolute: no baseline);
//   - code-interpreter contexts: create cold and from a warm pool, and a
//     run_code print(1) round trip, against python over a pipe;
//   - the LLM proxy through the daemon's /llm with its archive on, against
//     the same local upstream called directly in the same run: the latency
//     it adds at 1,000 req/s (whole answers and the first stream event),
//     throughput at saturation, memory per held stream, and the archive's
//     size and write cost per exchange (-llm-only: that alone).
//   - the task runner's overhead per run of the custom agent `true`,
//     cold and from a warm pool, to its end event (which comes before the
//     run's sandbox is deleted) and to its sandbox gone, against a bare
//     sandbox create;
//   - create → ready, exec `true` and run_code print(1) through a daemon
//     on the PostgreSQL store, against the same through one on SQLite
//     (-store-only: that alone);
//   - Sandbox.create → first commands.run through the stock OpenSandbox
//     Python SDK, cold and from a warm pool, against agent2env's own create
//     → exec through its Go client (-opensandbox-only: that alone);
//   - the E2B-compatible API through the stock Python SDK: create →
//     first commands.run("true"), cold and from a warm pool, and
//     run_code("1"), against the Go client (api/client) in the same run
//     (-e2b-only: that alone);
//   - (-agent-memory N only) the memory of a sandbox whose claude-code
//     waits on a model turn, against an idle sandbox of the same image.
//
// It starts the daemon binary ($AGENT2ENV_BIN) on a fresh data directory and
// must run as root. Run it with `make bench`; -create-only measures the
// create alone, and -vs OTHER compares the create of two binaries
// iteration by iteration (docs/PERFORMANCE.md).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/bench/restcreate"
)

func main() {
	// A reader of the output that goes away (| head) must not kill the
	// bench between a daemon's start and its stop: its sandboxes and the
	// daemon would be left running. Writes fail instead, and the bench
	// cleans up as it ends.
	signal.Ignore(syscall.SIGPIPE)
	n := flag.Int("n", 50, "iterations per latency measurement")
	concurrent := flag.Int("concurrent", 100, "sandboxes created at once")
	idle := flag.Int("idle", 50, "idle sandboxes for the memory measurement")
	img := flag.String("image", "agent2env/python", "image to create sandboxes from")
	createOnly := flag.Bool("create-only", false, "measure sandbox create → ready (and its baseline) only")
	llmOnly := flag.Bool("llm-only", false, "measure the LLM proxy (latency, throughput, memory) and its archive only")
	llmTime := flag.Duration("llm-time", 3*time.Second, "how long each LLM proxy measurement runs")
	llmUpstream := flag.Bool("llm-upstream", false, "serve the LLM measurement's fake upstream (the bench starts it itself)")
	runsOnly := flag.Bool("runs-only", false, "measure sandbox create → ready and the task runner's overhead only")
	agentMem := flag.Int("agent-memory", 0, "measure only the memory of this many idle claude-code runs in their sandboxes (agent2env/agent)")
	terminalOnly := flag.Bool("terminal-only", false, "measure create → ready, exec true and the terminal's keystroke echo and output throughput only")
	storeOnly := flag.Bool("store-only", false, "measure create → ready, exec true and run_code through a daemon on the PostgreSQL store against one on SQLite only")
	pauseOnly := flag.Bool("pause-only", false, "measure create → ready, exec true, and pause and resume only")
	snapshotOnly := flag.Bool("snapshot-only", false, "measure create → ready, exec true, and a live snapshot and a restore only")
	openSandboxOnly := flag.Bool("opensandbox-only", false, "measure the OpenSandbox Python SDK's create → first run against the Go client's create → exec only (needs AGENT2ENV_PYTHON)")
	e2bOnly := flag.Bool("e2b-only", false, "measure the E2B-compatible API through the stock Python SDK against the Go client only")
	density := flag.Int("density", 0, "measure only this many idle sandboxes each with a live Python kernel (a code context of its own), their memory against the 2,000-in-16-GiB target, and what their delete leaves behind")
	coldOnly := flag.Bool("cold-only", false, "measure the cold paths only: create → ready, the first execute_code of a new session without a warm pool, and -concurrent creates at once, each beside its baseline")
	concurrentOnly := flag.Bool("concurrent-only", false, "measure -concurrent creates at once (and their baseline) only")
	flag.Func("daemon-args", "extra arguments of every daemon the bench starts, split at spaces (e.g. \"--runtime runc\")", func(v string) error {
		daemonArgs = append(daemonArgs, strings.Fields(v)...)
		return nil
	})
	vs := flag.String("vs", "", "another agent2env binary: compare create → ready of both, interleaved (implies -create-only; with -concurrent-only, -n bursts of concurrent creates of each in turn; with -cold-only, -n first execute_code of new sessions of each in turn)")
	flag.Parse()
	var err error
	switch {
	case *llmUpstream:
		err = serveLLMUpstream()
	case *llmOnly:
		err = benchLLM(os.Getenv("AGENT2ENV_BIN"), *llmTime)
	case *agentMem > 0:
		err = benchAgentMemory(os.Getenv("AGENT2ENV_BIN"), *agentMem, 20*time.Second)
	case *storeOnly:
		err = benchStoreOnly(*n, *img)
	case *openSandboxOnly:
		err = benchOpenSandboxOnly(*n, *img)
	case *density > 0:
		err = benchDensity(*density)
	case *coldOnly && *vs != "":
		err = compareColdSession(*n, os.Getenv("AGENT2ENV_BIN"), *vs)
	case *coldOnly:
		err = benchCold(*n, *concurrent, *img)
	case *concurrentOnly && *vs != "":
		err = compareConcurrent(*n, *concurrent, *img, os.Getenv("AGENT2ENV_BIN"), *vs)
	case *concurrentOnly:
		err = benchConcurrentOnly(*concurrent, *img)
	case *vs != "":
		err = compareCreate(*n, *img, os.Getenv("AGENT2ENV_BIN"), *vs)
	case *e2bOnly:
		err = benchE2BOnly(*n, *img)
	default:
		err = run(*n, *concurrent, *idle, *img, *createOnly, *runsOnly, *terminalOnly, *pauseOnly, *snapshotOnly)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type stats struct{ p50, p90, p95, p99, mean time.Duration }

func summarize(ds []time.Duration) stats {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return stats{p50: ds[len(ds)/2], p90: ds[len(ds)*90/100], p95: ds[len(ds)*95/100], p99: ds[len(ds)*99/100], mean: sum / time.Duration(len(ds))}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func measure(n int, fn func() error) (stats, error) {
	ds := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := fn(); err != nil {
			return stats{}, err
		}
		ds = append(ds, time.Since(start))
	}
	return summarize(ds), nil
}

// startFirst checks what the benchmarks need ($AGENT2ENV_BIN, root) and
// starts a daemon of the binary; it returns the binary and the daemon.
func startFirst() (string, *daemon, error) {
	bin := os.Getenv("AGENT2ENV_BIN")
	if bin == "" {
		return "", nil, fmt.Errorf("set AGENT2ENV_BIN to the agent2env binary")
	}
	if os.Geteuid() != 0 {
		return "", nil, fmt.Errorf("must run as root")
	}
	d, err := startDaemon(bin)
	return bin, d, err
}

func run(n, concurrent, idle int, img string, createOnly, runsOnly, terminalOnly, pauseOnly, snapshotOnly bool) error {
	bin, d, err := startFirst()
	if err != nil {
		return err
	}
	defer d.stop()
	// A second daemon keeps a warm pool; it fills while the first is
	// measured.
	const poolSize = 3
	var warm *daemon
	if !createOnly && !terminalOnly && !pauseOnly && !snapshotOnly {
		if warm, err = startDaemon(bin, "--warm-pools", fmt.Sprintf("python=%d", poolSize)); err != nil {
			return err
		}
		defer warm.stop()
	}
	fmt.Printf("agent2env benchmarks (%s, %d iterations; ratios are ours / baseline; load average %s)\n\n", img, n, loadAvg())

	// Warm up: the first create may build the image.
	id, err := d.create(img)
	if err != nil {
		return err
	}
	if err := d.delete(id); err != nil {
		return err
	}

	create, ids, err := benchCreate(d, n, img)
	if err != nil {
		return err
	}
	if createOnly {
		return d.deleteAll(ids)
	}
	if runsOnly {
		if err := d.deleteAll(ids); err != nil {
			return err
		}
		return benchAllRuns(d, warm, n, img, create)
	}

	direct, err := measure(n*4, func() error { return exec.Command("true").Run() })
	if err != nil {
		return err
	}
	execTrue, err := measure(n*4, func() error { return d.execTrue(ids[0]) })
	if err != nil {
		return err
	}
	report("exec `true` round trip (REST)", execTrue, "fork/exec true", direct, "≤ 3 ms p50")
	if !pauseOnly && !terminalOnly {
		if err := benchSnapshot(d, ids[0], n, create); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		if snapshotOnly {
			return d.deleteAll(ids)
		}
	}
	if err := benchPause(d, ids[0], n, create); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	if pauseOnly {
		return d.deleteAll(ids)
	}
	if err := benchTerminal(d, ids[0], n, execTrue); err != nil {
		return err
	}
	if err := benchTerminalThroughput(d, ids[0]); err != nil {
		return err
	}
	if terminalOnly {
		return d.deleteAll(ids)
	}
	if err := benchLLM(bin, 3*time.Second); err != nil {
		return fmt.Errorf("llm proxy: %w", err)
	}
	if err := benchContexts(d, n, img); err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	if err := benchStore(bin, d, n, img); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := benchSessions(d, n, img); err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	if err := benchOpenSandbox(d, warm, n, img); err != nil {
		return fmt.Errorf("opensandbox: %w", err)
	}

	raw, err := rawPython(n * 4)
	if err != nil {
		return err
	}
	if err := benchWarm(warm, n/2, raw); err != nil {
		return fmt.Errorf("warm pool: %w", err)
	}
	if err := benchWarmSession(warm, n/2, raw); err != nil {
		return fmt.Errorf("warm pool sessions: %w", err)
	}
	if err := benchAllRuns(d, warm, n, img, create); err != nil {
		return err
	}
	if err := benchE2B(d, warm, n, img); err != nil {
		return fmt.Errorf("e2b: %w", err)
	}
	for _, id := range ids {
		if err := d.delete(id); err != nil {
			return err
		}
	}

	if _, err := benchConcurrent(d, concurrent, img); err != nil {
		return err
	}

	// Memory per idle sandbox: host-wide MemAvailable delta, and the
	// sandboxes' own cgroup charge.
	time.Sleep(time.Second)
	before := memAvailable()
	ids = nil
	for range idle {
		id, err := d.create(img)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	time.Sleep(2 * time.Second)
	after := memAvailable()
	var charged int64
	for _, id := range ids {
		charged += cgroupMemory(id)
	}
	pss, agents := agentPss(ids)
	// There is no same-run baseline for memory: the figures are absolute.
	fmt.Printf("%-34s agent PSS %.1f MiB (%d agents), cgroup charge %.1f MiB, host MemAvailable delta %.1f MiB | no baseline (absolute)\n",
		"memory per idle sandbox", float64(pss)/float64(max(agents, 1))/(1<<20), agents,
		float64(charged)/float64(idle)/(1<<20), float64(before-after)/float64(idle)/(1<<20))
	for _, id := range ids {
		if err := d.delete(id); err != nil {
			return err
		}
	}
	return nil
}

// benchConcurrent creates concurrent sandboxes at once and prints the wall
// time until all are running, beside the same number of `unshare … true`
// at once: the machine's own floor for starting that many namespaces. It
// returns the wall time.
func benchConcurrent(d *daemon, concurrent int, img string) (time.Duration, error) {
	return benchConcurrentAs(d, fmt.Sprintf("%d concurrent creates", concurrent), concurrent, img)
}

// benchConcurrentAs is benchConcurrent with the row named name. Under the
// row it prints the host's CPU time during the burst per create (user and
// system, every process: the daemon, the runtime binary, the agents, and
// whatever else runs), beside what the host's cores give a create when
// the burst takes 1 s: the burst's floor when the CPUs are its bound.
func benchConcurrentAs(d *daemon, name string, concurrent int, img string) (time.Duration, error) {
	baseWall, err := concurrently(concurrent, func() error {
		return exec.Command("unshare", "--mount", "--pid", "--fork", "--net", "--uts", "--ipc", "true").Run()
	})
	if err != nil {
		return 0, fmt.Errorf("concurrent unshare baseline: %w", err)
	}
	var (
		mu   sync.Mutex
		ds   []time.Duration
		ids  []string
		errs []error
		wg   sync.WaitGroup
	)
	cpu0 := hostCPU()
	start := time.Now()
	for range concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			id, err := d.create(img)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ds = append(ds, time.Since(t))
			ids = append(ids, id)
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	cpu := hostCPU() - cpu0
	if len(ds) > 0 {
		s := summarize(ds)
		fmt.Printf("%-34s %d/%d ready in %s wall; per create p50 %s p95 %s (%.1f creates/s) | %d × unshare … true at once %s wall | ratio %.1fx | target ≤ 1 s wall\n",
			name, len(ds), concurrent, ms(wall), ms(s.p50), ms(s.p95),
			float64(len(ds))/wall.Seconds(), concurrent, ms(baseWall), float64(wall)/float64(baseWall))
		fmt.Printf("%-34s host CPU during the burst %s per create (user+system, all processes); %d cores give %s per create in 1 s\n",
			"", ms(cpu/time.Duration(len(ds))), runtime.NumCPU(), ms(time.Duration(runtime.NumCPU())*time.Second/time.Duration(concurrent)))
	}
	for _, err := range errs {
		fmt.Println("  create failed:", err)
	}
	return wall, d.deleteAll(ids)
}

// benchCold measures the cold paths of issue 30 alone, each beside its
// baseline in the same run: create → ready against unshare, a new
// session's first execute_code against creates made in turn with it, and
// concurrent creates against as many unshares at once.
func benchCold(n, concurrent int, img string) error {
	bin, d, err := startFirst()
	if err != nil {
		return err
	}
	defer d.stop()
	fmt.Printf("agent2env cold paths (%s, %d iterations; ratios are ours / baseline; load average %s)\n", img, n, loadAvg())
	def := defaultRuntime()
	fmt.Printf("the daemon's OCI runtime: %s\n\n", def)
	dc, err := startRunc(bin, def)
	if err != nil {
		return err
	}
	if dc != nil {
		defer dc.stop()
	}
	if err := warmUp(d, img); err != nil {
		return err
	}
	if err := warmUpSession(d); err != nil {
		return err
	}
	if dc != nil {
		if err := warmUp(dc, img); err != nil {
			return err
		}
	}
	if dc == nil {
		var ids []string
		if _, ids, err = benchCreate(d, n, img); err != nil {
			return err
		}
		err = d.deleteAll(ids)
	} else {
		err = benchCreateRuntimes(d, dc, n, img)
	}
	if err != nil {
		return err
	}
	if err := benchColdSession(d, "new session, no warm pool", n, img); err != nil {
		return err
	}
	if dc != nil {
		if err := warmUpSession(dc); err != nil {
			return err
		}
		if err := benchColdSession(dc, "  the same with runc", n, img); err != nil {
			return err
		}
	}
	if _, err = benchConcurrent(d, concurrent, img); err != nil {
		return err
	}
	if dc != nil {
		_, err = benchConcurrentAs(dc, "  the same with runc", concurrent, img)
	}
	return err
}

// defaultRuntime says which OCI runtime binary a daemon started without
// --runtime runs (serve --runtime auto): the crun make crun built, when
// there is one, else runc; or what -daemon-args say. It asks
// scripts/crun.sh, so from outside the repository's root it cannot tell.
func defaultRuntime() string {
	if i := slices.Index(daemonArgs, "--runtime"); i >= 0 && i+1 < len(daemonArgs) {
		return daemonArgs[i+1] + " (-daemon-args)"
	}
	out, err := exec.Command("scripts/crun.sh", "--path").Output()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return "crun " + strings.TrimSpace(string(out)) + " (serve --runtime auto; make crun built it)"
	case errors.As(err, &exit):
		return "runc (serve --runtime auto: make crun has built no crun)"
	default:
		return "unknown (serve --runtime auto; run the bench from the repository's root to tell: " + err.Error() + ")"
	}
}

// startRunc starts a daemon of bin with --runtime runc, to compare with
// the default runtime def when that is crun; otherwise (runc already,
// another runtime, or not known) it returns nil.
func startRunc(bin, def string) (*daemon, error) {
	if !strings.HasPrefix(def, "crun") {
		return nil, nil
	}
	dc, err := startDaemon(bin, "--runtime", "runc")
	if err != nil {
		return nil, fmt.Errorf("daemon with runc: %w", err)
	}
	return dc, nil
}

// warmUp makes, untimed, what the first create on d would make (img) and
// deletes the sandbox.
func warmUp(d *daemon, img string) error {
	id, err := d.create(img)
	if err != nil {
		return err
	}
	return d.delete(id)
}

// warmUpSession makes, untimed, what the first session on d would make
// (the sessions' image) and deletes the session.
func warmUpSession(d *daemon) error {
	if err := d.post("/api/v1/sessions/execute", api.SessionExecuteRequest{Code: "1", SessionID: "bench-warmup"}, &api.SessionExecuteResponse{}); err != nil {
		return err
	}
	return d.del("/api/v1/sessions/bench-warmup")
}

// benchCreate measures create → ready beside `unshare … true`; it
// returns the sandboxes it made.
func benchCreate(d *daemon, n int, img string) (stats, []string, error) {
	base, err := measure(n, func() error {
		return exec.Command("unshare", "--mount", "--pid", "--fork", "--net", "--uts", "--ipc", "true").Run()
	})
	if err != nil {
		return stats{}, nil, fmt.Errorf("unshare baseline: %w", err)
	}
	var ids []string
	create, err := measure(n, func() error {
		id, err := d.create(img)
		if id != "" { // a sandbox that failed has an id too
			ids = append(ids, id)
		}
		return err
	})
	if err != nil {
		return stats{}, nil, errors.Join(err, d.deleteAll(ids))
	}
	report("sandbox create → ready (REST)", create, "unshare … true", base, "≤ 25 ms p50 and ≤ 8x unshare")
	return create, ids, nil
}

// benchCreateRuntimes measures create → ready on d (the default runtime)
// and on dc (runc), beside `unshare … true`, the three in turn iteration
// by iteration (who of the two goes first alternates; each create 100 ms
// after the last, so that one's moves into its cgroups do not spare the
// next the kernel's wait, see oci's warmAttach). It prints the default's
// row as benchCreate does, then runc's, and deletes the sandboxes it
// made.
func benchCreateRuntimes(d, dc *daemon, n int, img string) (err error) {
	ds := []*daemon{d, dc}
	ids := make([][]string, 2)
	defer func() {
		err = errors.Join(err, d.deleteAll(ids[0]), dc.deleteAll(ids[1]))
	}()
	durs := make([][]time.Duration, 2)
	var base, ratios []time.Duration
	timeCreate := func(i int) error {
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		id, err := ds[i].create(img)
		durs[i] = append(durs[i], time.Since(start))
		if id != "" {
			ids[i] = append(ids[i], id)
		}
		return err
	}
	for i := range n {
		start := time.Now()
		if err := exec.Command("unshare", "--mount", "--pid", "--fork", "--net", "--uts", "--ipc", "true").Run(); err != nil {
			return fmt.Errorf("unshare baseline: %w", err)
		}
		base = append(base, time.Since(start))
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, j := range order {
			if err := timeCreate(j); err != nil {
				return err
			}
		}
		ratios = append(ratios, time.Duration(float64(time.Millisecond)*float64(durs[1][i])/float64(durs[0][i])))
	}
	sbase := summarize(base)
	def, runc := summarize(durs[0]), summarize(durs[1])
	report("sandbox create → ready (REST)", def, "unshare … true", sbase, "≤ 25 ms p50 and ≤ 8x unshare")
	report("  the same with runc", runc, "unshare … true", sbase, "≤ 25 ms p50 and ≤ 8x unshare")
	fmt.Printf("  runc/default per iteration: median %.2f\n", float64(summarize(ratios).p50)/float64(time.Millisecond))
	return nil
}

// hostCPU is the CPU time the host has spent in user and system mode
// (user, nice, system, irq, softirq of /proc/stat), all CPUs together.
func hostCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq ...
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		if i < len(f) {
			n, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// loadAvg is the host's load average over 1, 5 and 15 minutes.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// benchConcurrentOnly starts a daemon, makes the image with an untimed
// create, and measures concurrent creates alone.
func benchConcurrentOnly(concurrent int, img string) error {
	_, d, err := startFirst()
	if err != nil {
		return err
	}
	defer d.stop()
	id, err := d.create(img)
	if err != nil {
		return err
	}
	if err := d.delete(id); err != nil {
		return err
	}
	_, err = benchConcurrent(d, concurrent, img)
	return err
}

// compareConcurrent runs rounds bursts of concurrent creates on daemons
// of two binaries in turn (who goes first alternates) and prints the
// median of the per-round ratio of their wall times.
func compareConcurrent(rounds, concurrent int, img, binA, binB string) error {
	ds, stop, err := startPair(binA, binB, func(d *daemon) error {
		id, err := d.create(img) // the first create may build the image
		if err != nil {
			return err
		}
		return d.delete(id)
	})
	if err != nil {
		return err
	}
	defer stop()
	a, b, ratio, err := inTurn(rounds, ds, func(j, _ int) (time.Duration, error) {
		time.Sleep(time.Second) // the previous burst's deletes settle
		fmt.Printf("%s: ", []string{"A", "B"}[j])
		return benchConcurrent(ds[j], concurrent, img)
	})
	if err != nil {
		return err
	}
	fmt.Printf("%d concurrent creates, %d rounds in turn (load average %s)\n  A %s wall p50 %s\n  B %s wall p50 %s\n  A/B per round: median %.2f\n",
		concurrent, rounds, loadAvg(), binA, ms(a.p50), binB, ms(b.p50), ratio)
	return nil
}

// startPair starts a daemon of each binary and readies each with warm; stop
// stops both.
func startPair(binA, binB string, warm func(*daemon) error) (ds []*daemon, stop func(), err error) {
	if binA == "" {
		return nil, nil, fmt.Errorf("set AGENT2ENV_BIN to the agent2env binary")
	}
	if os.Geteuid() != 0 {
		return nil, nil, fmt.Errorf("must run as root")
	}
	stop = func() {
		for _, d := range ds {
			d.stop()
		}
	}
	for _, bin := range []string{binA, binB} {
		d, err := startDaemon(bin)
		if err != nil {
			stop()
			return nil, nil, err
		}
		ds = append(ds, d)
		if err := warm(d); err != nil {
			stop()
			return nil, nil, err
		}
	}
	return ds, stop, nil
}

// inTurn runs fn on the daemons 0 and 1 in turn n times, who goes first
// alternating, and returns each one's figures and the median of their
// per-iteration ratio.
func inTurn(n int, ds []*daemon, fn func(j, i int) (time.Duration, error)) (a, b stats, ratio float64, err error) {
	var as, bs, ratios []time.Duration
	for i := range n {
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		var took [2]time.Duration
		for _, j := range order {
			if took[j], err = fn(j, i); err != nil {
				return stats{}, stats{}, 0, err
			}
		}
		as, bs = append(as, took[0]), append(bs, took[1])
		ratios = append(ratios, time.Duration(float64(time.Millisecond)*float64(took[0])/float64(took[1])))
	}
	return summarize(as), summarize(bs), float64(summarize(ratios).p50) / float64(time.Millisecond), nil
}

// compareCreate measures create → ready on daemons of two binaries and the
// unshare baseline in turn, iteration by iteration, so that the machine's
// drift hits all three alike; the ratio of each pair is taken per
// iteration.
func compareCreate(n int, img, binA, binB string) error {
	if binA == "" {
		return fmt.Errorf("set AGENT2ENV_BIN to the agent2env binary")
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("must run as root")
	}
	var ds []*daemon
	for _, bin := range []string{binA, binB} {
		d, err := startDaemon(bin)
		if err != nil {
			return err
		}
		defer d.stop()
		id, err := d.create(img) // the first create may build the image
		if err != nil {
			return err
		}
		if err := d.delete(id); err != nil {
			return err
		}
		ds = append(ds, d)
	}
	var a, b, base, ratios []time.Duration
	ids := make([][]string, 2)
	timeCreate := func(i int) (time.Duration, error) {
		// Apart enough that one create's moves into its cgroups cannot
		// spare the next one the kernel's wait (see oci's warmAttach).
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		id, err := ds[i].create(img)
		d := time.Since(start)
		if id != "" {
			ids[i] = append(ids[i], id)
		}
		return d, err
	}
	for i := range n {
		start := time.Now()
		if err := exec.Command("unshare", "--mount", "--pid", "--fork", "--net", "--uts", "--ipc", "true").Run(); err != nil {
			return fmt.Errorf("unshare baseline: %w", err)
		}
		base = append(base, time.Since(start))
		var da, db time.Duration
		var errA, errB error
		if i%2 == 0 { // alternate who goes first
			da, errA = timeCreate(0)
			db, errB = timeCreate(1)
		} else {
			db, errB = timeCreate(1)
			da, errA = timeCreate(0)
		}
		if err := errors.Join(errA, errB); err != nil {
			return err
		}
		a, b = append(a, da), append(b, db)
		ratios = append(ratios, time.Duration(float64(time.Millisecond)*float64(da)/float64(db)))
	}
	sa, sb, sbase, sr := summarize(a), summarize(b), summarize(base), summarize(ratios)
	fmt.Printf("create → ready (REST), %d interleaved iterations\n", n)
	fmt.Printf("  A %-40s p50 %s p95 %s | %.2fx unshare\n", binA, ms(sa.p50), ms(sa.p95), float64(sa.p50)/float64(sbase.p50))
	fmt.Printf("  B %-40s p50 %s p95 %s | %.2fx unshare\n", binB, ms(sb.p50), ms(sb.p95), float64(sb.p50)/float64(sbase.p50))
	fmt.Printf("  unshare … true                             p50 %s p95 %s\n", ms(sbase.p50), ms(sbase.p95))
	fmt.Printf("  A/B per iteration: median %.2f\n", float64(sr.p50)/float64(time.Millisecond))
	for i, d := range ds {
		if err := d.deleteAll(ids[i]); err != nil {
			return err
		}
	}
	return nil
}

// concurrently runs n calls of fn at once and returns the wall time until
// all returned, or the first error.
func concurrently(n int, fn func() error) (time.Duration, error) {
	errs := make(chan error, n)
	start := time.Now()
	for range n {
		go func() { errs <- fn() }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return time.Since(start), first
}

func report(name string, ours stats, baseName string, base stats, target string) {
	fmt.Printf("%-34s p50 %s p90 %s p95 %s   | %s p50 %s p95 %s | ratio p50 %.2fx | target %s\n",
		name, ms(ours.p50), ms(ours.p90), ms(ours.p95), baseName, ms(base.p50), ms(base.p95),
		float64(ours.p50)/float64(base.p50), target)
}

func memAvailable() int64 { return kbField("/proc/meminfo", "MemAvailable:") }

// kbField reads the field of a /proc file in kB (/proc/meminfo,
// /proc/<pid>/status), in bytes; 0 when it has none.
func kbField(path, field string) int64 {
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// sandboxCgroupFile reads a file of the sandbox's memory cgroup (v1 or v2).
func sandboxCgroupFile(id string, v1, v2 string) ([]byte, bool) {
	for _, pattern := range []string{
		"/sys/fs/cgroup/memory/agent2env/*/" + id + "/" + v1,
		"/sys/fs/cgroup/agent2env/*/" + id + "/" + v2,
	} {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				return b, true
			}
		}
	}
	return nil, false
}

// cgroupMemory is the memory charged to the sandbox's cgroup.
func cgroupMemory(id string) int64 {
	b, _ := sandboxCgroupFile(id, "memory.usage_in_bytes", "memory.current")
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
}

// agentPss sums the proportional set size of the agents of the sandboxes
// ids, found by their cgroups: other sandboxes on the host (a warm pool, a
// test running beside the bench) are not counted.
func agentPss(ids []string) (int64, int) {
	var total int64
	n := 0
	for _, id := range ids {
		procs, _ := sandboxCgroupFile(id, "cgroup.procs", "cgroup.procs")
		for _, pid := range strings.Fields(string(procs)) {
			cmdline, err := os.ReadFile("/proc/" + pid + "/cmdline")
			if err != nil || !strings.HasPrefix(string(cmdline), "/.agent2env/agent2env\x00agent") {
				continue
			}
			total += kbField("/proc/"+pid+"/smaps_rollup", "Pss:")
			n++
		}
	}
	return total, n
}

type daemon struct {
	cmd     *exec.Cmd
	addr    string
	dataDir string
	hc      *http.Client
}

// daemonArgs are added to every daemon's command line (-daemon-args).
var daemonArgs []string

func startDaemon(bin string, args ...string) (*daemon, error) {
	args = append(args, daemonArgs...)
	dataDir, err := os.MkdirTemp("", "a2e-bench-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	logf, err := os.Create(filepath.Join(dataDir, "daemon.log"))
	if err != nil {
		return nil, err
	}
	// The benchmarks hold up to -concurrent idle sandboxes of 1 cpu and
	// 1 GiB at once: past what admission lets a small host commit, which
	// is not what they measure. Images are made when a benchmark first
	// needs one, untimed, not in the background of what is measured.
	cmd := exec.Command(bin, append([]string{"serve", "--listen", addr, "--data-dir", dataDir, "--log-level", "warn",
		"--cpu-overcommit", "1000", "--memory-overcommit", "1000", "--prebuild-images=false"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, addr: addr, dataDir: dataDir,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	for i := 0; ; i++ {
		resp, err := d.hc.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return d, nil
			}
		}
		if i > 1500 {
			d.stop()
			return nil, fmt.Errorf("daemon not ready; see %s", logf.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) stop() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	os.RemoveAll(d.dataDir)
}

func (d *daemon) post(path string, body, out any) error {
	b, _ := json.Marshal(body)
	resp, err := d.hc.Post("http://"+d.addr+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, raw)
	}
	return json.Unmarshal(raw, out)
}

// create makes a sandbox and waits until it runs (restcreate.Ready: the
// same request and ready as the kubernetes runtime's figure through REST).
func (d *daemon) create(img string) (string, error) {
	return restcreate.Ready(d.hc, "http://"+d.addr, img)
}

func (d *daemon) deleteAll(ids []string) error {
	for _, id := range ids {
		if err := d.delete(id); err != nil {
			return err
		}
	}
	return nil
}

func (d *daemon) delete(id string) error { return restcreate.Delete(d.hc, "http://"+d.addr, id) }

// execTrue runs `true` in sandbox id through REST.
func (d *daemon) execTrue(id string) error {
	var res api.ExecResponse
	if err := d.post("/api/v1/sandboxes/"+id+"/exec", api.ExecRequest{Command: []string{"true"}}, &res); err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("exec true exited %d", res.ExitCode)
	}
	return nil
}
