package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
)

// benchAllRuns measures the runner's overhead on d, then from warm's
// python pool, which makes contexts' default image (each run waits,
// untimed, for the pool to be full again).
func benchAllRuns(d, warm *daemon, n int, img string, create stats) error {
	if err := benchRuns(d, n, "task run overhead, cold (custom true)", img, create, "≤ 150 ms p50", nil); err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	if err := benchRuns(warm, max(n/2, 5), "task run overhead, warm pool", "agent2env/code-interpreter", create, "≤ 50 ms p50",
		func() error { return warm.waitPool("python") }); err != nil {
		return fmt.Errorf("runs from a warm pool: %w", err)
	}
	if err := benchManyRuns(d, 50, 25, img); err != nil {
		return fmt.Errorf("50 runs: %w", err)
	}
	return nil
}

// benchRuns measures the task runner's overhead per run: a run of the
// custom agent `true` from its submission to its end event, less the
// agent's own time (records, sandbox create, workdir, exec, end
// conditions, artifacts; not the sandbox's delete, which follows the end
// event), and to its sandbox gone (the delete too), beside a bare sandbox
// create → ready through REST. before, when set, runs before each run,
// untimed.
func benchRuns(d *daemon, n int, name, img string, create stats, target string, before func() error) error {
	task := fmt.Sprintf("name: bench\nimage: %s\nagent: custom\ngoal: nothing\nentrypoint: 'true'\nartifacts: [/workspace/*.txt]\n", img)
	var ids []string
	var toEnd, toGone []time.Duration
	for range n {
		if before != nil {
			if err := before(); err != nil {
				return err
			}
		}
		start := time.Now()
		var b api.RunBatch
		if err := d.post("/api/v1/runs", api.RunSubmitRequest{Task: task}, &b); err != nil {
			return err
		}
		id := b.Runs[0].ID
		ids = append(ids, id)
		end, err := d.followRun(id)
		if err != nil {
			return err
		}
		if end.Status != api.RunSucceeded {
			return fmt.Errorf("run %s %s: %s", id, end.Status, end.Reason)
		}
		ended := time.Since(start)
		var r api.Run
		if err := d.get("/api/v1/runs/"+id, &r); err != nil {
			return err
		}
		if err := d.waitGone(r.SandboxID); err != nil {
			return err
		}
		gone := time.Since(start)
		agent := time.Duration(r.Timings[api.PhaseAgent] * float64(time.Millisecond))
		toEnd, toGone = append(toEnd, ended-agent), append(toGone, gone-agent)
	}
	for _, id := range ids { // untimed
		d.del("/api/v1/runs/" + id)
	}
	report(name+" → end", summarize(toEnd), "sandbox create → ready", create, target)
	report(name+" → deleted", summarize(toGone), "sandbox create → ready", create, "none (the delete follows the end)")
	return nil
}

// waitGone waits until sandbox id is no more (its GET answers 404).
func (d *daemon) waitGone(id string) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		resp, err := d.hc.Get("http://" + d.addr + "/api/v1/sandboxes/" + id)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return nil
		}
	}
	return fmt.Errorf("sandbox %s still there a minute after its run ended", id)
}

// followRun reads run id's events until its end event and returns it.
func (d *daemon) followRun(id string) (api.RunEvent, error) {
	resp, err := d.hc.Get("http://" + d.addr + "/api/v1/runs/" + id + "/events")
	if err != nil {
		return api.RunEvent{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		var ev api.RunEvent
		if json.Unmarshal(data, &ev) == nil && ev.Type == api.RunEventEnd {
			return ev, nil
		}
	}
	return api.RunEvent{}, fmt.Errorf("events of run %s ended without its end: %v", id, sc.Err())
}

func (d *daemon) get(path string, out any) error {
	resp, err := d.hc.Get("http://" + d.addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// benchManyRuns submits runs runs of the custom agent `sleep 1`, parallel
// at a time, and reports the wall time until all ended and the peak
// memory: the daemon's (VmHWM) and that of the sandboxes' cgroups at
// their highest sample.
func benchManyRuns(d *daemon, runs, parallel int, img string) error {
	task := fmt.Sprintf("name: many\nimage: %s\nagent: custom\ngoal: nothing\nentrypoint: 'sleep 1'\n", img)
	parent := cgroupParentOf(filepath.Join(d.dataDir, "oci"))
	var peak int64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for _, p := range []string{"/sys/fs/cgroup/" + parent + "/memory.current", "/sys/fs/cgroup/memory/" + parent + "/memory.usage_in_bytes"} {
				if b, err := os.ReadFile(p); err == nil {
					v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
					peak = max(peak, v)
					break
				}
			}
		}
	}()
	start := time.Now()
	var b api.RunBatch
	err := d.post("/api/v1/runs", api.RunSubmitRequest{Task: task, Repeats: runs, Parallel: parallel}, &b)
	if err == nil {
		for _, r := range b.Runs {
			var end api.RunEvent
			if end, err = d.followRun(r.ID); err != nil {
				break
			}
			if end.Status != api.RunSucceeded {
				err = fmt.Errorf("run %s %s: %s", r.ID, end.Status, end.Reason)
				break
			}
		}
	}
	wall := time.Since(start)
	close(done)
	<-sampled
	if err != nil {
		return err
	}
	hwm := kbField(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid), "VmHWM:")
	fmt.Printf("%-34s wall %s (agent 1 s each, ideal %s); peak memory: daemon %.1f MiB, sandboxes %.1f MiB\n",
		fmt.Sprintf("%d runs, %d at a time", runs, parallel), wall.Round(time.Millisecond),
		time.Duration((runs+parallel-1)/parallel)*time.Second, float64(hwm)/(1<<20), float64(peak)/(1<<20))
	for _, r := range b.Runs {
		d.del("/api/v1/runs/" + r.ID)
	}
	return nil
}

// cgroupParentOf is the cgroup the oci runtime with state in root makes
// its sandboxes' cgroups in (runtimetest's cgroupParent).
func cgroupParentOf(root string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(root)))
	return "agent2env/" + hex.EncodeToString(sum[:4])
}
