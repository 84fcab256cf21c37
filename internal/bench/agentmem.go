package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agent2env/agent2env/api"
)

// benchAgentMemory measures the memory of a sandbox whose agent CLI
// (claude-code) is running and idle: n runs of a task through the task
// runner, each waiting on a model turn that does not come (the LLM
// proxy's upstream holds every call open), against a sandbox of the same
// image with nothing running. Memory is the sandbox cgroup's charge
// (memory.current: processes, page cache, kernel) and its anonymous part,
// sampled once each CLI has waited settle on its first call.
func benchAgentMemory(bin string, n int, settle time.Duration) error {
	var calls atomic.Int64
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "the bench is over", http.StatusServiceUnavailable)
	}))
	defer up.Close()
	defer close(release)
	dir, err := os.MkdirTemp("", "a2e-bench-agentmem-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "llm.yaml")
	if err := os.WriteFile(cfg, []byte("providers:\n  - {name: up, type: anthropic, base_url: "+up.URL+"}\n"+
		"models:\n  - {name: slow, provider: up}\nretries: {attempts: 0}\n"), 0o600); err != nil {
		return err
	}
	d, err := startDaemon(bin, "--llm-config", cfg)
	if err != nil {
		return err
	}
	defer d.stop()
	const img = "agent2env/agent"
	// The idle sandbox first: it makes the image (minutes the first time).
	idleID, err := d.create(img)
	if err != nil {
		return err
	}
	defer d.delete(idleID)
	task := `name: idle-agent
image: agent2env/agent
agent: claude-code
model: slow
goal: Say hello.
end: {timeout: 30m}
liveness: {idle: 30m}
`
	var b api.RunBatch
	if err := d.post("/api/v1/runs", api.RunSubmitRequest{Task: task, Repeats: n, Parallel: n}, &b); err != nil {
		return err
	}
	defer func() {
		// Cancelled, each run's end (and its sandbox's deletion) waited
		// for before the daemon stops.
		for _, r := range b.Runs {
			d.post("/api/v1/runs/"+r.ID+"/cancel", nil, &api.Run{})
		}
		for _, r := range b.Runs {
			d.followRun(r.ID)
		}
	}()
	// Every CLI has made its first call (the proxy holds it), then settles.
	deadline := time.Now().Add(5 * time.Minute)
	for calls.Load() < int64(n) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d agents called the model within 5 minutes", calls.Load(), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(settle)
	var sum, sumAnon, sumPss, sumPeak int64
	for _, r := range b.Runs {
		var run api.Run
		if err := d.get("/api/v1/runs/"+r.ID, &run); err != nil {
			return err
		}
		if run.Phase != api.PhaseAgent || run.SandboxID == "" {
			return fmt.Errorf("run %s is %s in phase %s, want its agent waiting", r.ID, run.Status, run.Phase)
		}
		sum += cgroupMemory(run.SandboxID)
		sumAnon += cgroupAnon(run.SandboxID)
		sumPss += cgroupPss(run.SandboxID)
		sumPeak += cgroupFile(run.SandboxID, "memory.max_usage_in_bytes", "memory.peak")
	}
	mib := func(v int64) string { return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20)) }
	per := func(v int64) string { return mib(v / int64(n)) }
	fmt.Printf("%-34s per sandbox: cgroup %s (anon %s, peak %s), processes' PSS %s; %d at once, after %s idle | "+
		"idle sandbox: cgroup %s, PSS %s | %d model calls held\n",
		"claude-code idle in its sandbox", per(sum), per(sumAnon), per(sumPeak), per(sumPss), n, settle,
		mib(cgroupMemory(idleID)), mib(cgroupPss(idleID)), calls.Load())
	return nil
}

// sandboxCgroup is a sandbox's memory cgroup directory (v1 or v2), or "".
func sandboxCgroup(id string) string {
	for _, pattern := range []string{"/sys/fs/cgroup/memory/agent2env/*/" + id, "/sys/fs/cgroup/agent2env/*/" + id} {
		if paths, _ := filepath.Glob(pattern); len(paths) > 0 {
			return paths[0]
		}
	}
	return ""
}

// cgroupFile reads a number from the first of files that a sandbox's
// memory cgroup has.
func cgroupFile(id string, files ...string) int64 {
	dir := sandboxCgroup(id)
	for _, f := range files {
		if b, err := os.ReadFile(filepath.Join(dir, f)); dir != "" && err == nil {
			v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			return v
		}
	}
	return 0
}

// cgroupPss sums the proportional set size of a sandbox's processes: its
// share of the pages it maps, page cache of the image's files included,
// which the cgroup's charge leaves to whichever cgroup read them first.
func cgroupPss(id string) int64 {
	dir := sandboxCgroup(id)
	if dir == "" {
		return 0
	}
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var total int64
	for _, pid := range strings.Fields(string(b)) {
		total += kbField("/proc/"+pid+"/smaps_rollup", "Pss:")
	}
	return total
}

// cgroupAnon reads the anonymous memory of a sandbox's cgroup (v2
// memory.stat anon, v1 rss).
func cgroupAnon(id string) int64 {
	for _, c := range []struct{ pattern, field string }{
		{"/sys/fs/cgroup/agent2env/*/" + id + "/memory.stat", "anon "},
		{"/sys/fs/cgroup/memory/agent2env/*/" + id + "/memory.stat", "total_rss "},
	} {
		paths, _ := filepath.Glob(c.pattern)
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, c.field); ok {
					n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					return n
				}
			}
		}
	}
	return 0
}
