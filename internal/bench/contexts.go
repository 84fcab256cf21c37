package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
)

// benchContexts measures code-interpreter contexts on d: create (cold, in
// a running sandbox and with a sandbox of its own) and run_code print(1),
// beside a raw request to a python process over a pipe.
func benchContexts(d *daemon, n int, img string) error {
	sandboxID, err := d.create(img)
	if err != nil {
		return err
	}
	defer d.delete(sandboxID)

	raw, err := rawPython(n * 4)
	if err != nil {
		return fmt.Errorf("raw python baseline: %w", err)
	}
	var ids []string
	cold, err := measure(n, func() error {
		var c api.Context
		err := d.post("/api/v1/sandboxes/"+sandboxID+"/contexts", api.CreateContextRequest{Language: "python"}, &c)
		ids = append(ids, c.ContextID)
		return err
	})
	if err != nil {
		return err
	}
	for _, id := range ids[1:] {
		if err := d.del("/api/v1/contexts/" + id); err != nil {
			return err
		}
	}
	run, err := measure(n*4, func() error { return d.printOne(ids[0]) })
	if err != nil {
		return err
	}
	report("run_code print(1) (REST)", run, "python over a pipe", raw, "≤ 3 ms p50")
	report("context create, cold, in a sandbox", cold, "python over a pipe", raw, "≤ 30 ms p50")

	fresh, err := measure(max(n/5, 5), func() error {
		var c api.Context
		if err := d.post("/api/v1/contexts", api.CreateContextRequest{Language: "python"}, &c); err != nil {
			return err
		}
		return d.del("/api/v1/contexts/" + c.ContextID)
	})
	if err != nil {
		return err
	}
	fmt.Printf("%-34s p50 %s p90 %s p95 %s (create + delete of its own sandbox) | no baseline\n",
		"context create, cold, new sandbox", ms(fresh.p50), ms(fresh.p90), ms(fresh.p95))
	return nil
}

// printOne runs print(1) in context id through REST.
func (d *daemon) printOne(id string) error {
	var res api.ExecuteResponse
	if err := d.post("/api/v1/contexts/"+id+"/execute", api.ExecuteRequest{Code: "print(1)"}, &res); err != nil {
		return err
	}
	if res.Output.Stdout != "1\n" {
		return fmt.Errorf("print(1) printed %q", res.Output.Stdout)
	}
	return nil
}

// benchWarm measures creates served by a warm pool of d (started with
// --warm-pools python=size): contexts, then sandboxes. Each is timed only
// once the pool is full again.
func benchWarm(d *daemon, n int, baseline stats) error {
	if err := d.waitPool("python"); err != nil {
		return err
	}
	var ctxIDs []string
	ctxs, err := measureRefilled(d, n, func() error {
		var c api.Context
		if err := d.post("/api/v1/contexts", api.CreateContextRequest{Language: "python"}, &c); err != nil {
			return err
		}
		ctxIDs = append(ctxIDs, c.ContextID)
		if !strings.HasPrefix(c.ContextID, "ctx-") {
			return fmt.Errorf("no context id in %+v", c)
		}
		return nil
	})
	for _, id := range ctxIDs { // untimed: each takes its sandbox with it
		d.del("/api/v1/contexts/" + id)
	}
	if err != nil {
		return err
	}
	report("context create, warm pool", ctxs, "python over a pipe", baseline, "≤ 5 ms p50")
	var ids []string
	sbs, err := measureRefilled(d, n, func() error {
		var sb api.Sandbox
		// The image the python pool makes (contexts' default).
		if err := d.post("/api/v1/sandboxes", api.CreateSandboxRequest{Image: "agent2env/code-interpreter"}, &sb); err != nil {
			return err
		}
		ids = append(ids, sb.ID)
		if sb.Status != api.StatusRunning {
			return fmt.Errorf("sandbox %s from the pool is %s", sb.ID, sb.Status)
		}
		return nil
	})
	for _, id := range ids {
		d.delete(id)
	}
	if err != nil {
		return err
	}
	report("sandbox create, warm pool", sbs, "python over a pipe", baseline, "≤ 2 ms p50")
	return nil
}

// measureRefilled is measure with the pool refilled before each run.
func measureRefilled(d *daemon, n int, fn func() error) (stats, error) {
	ds := make([]time.Duration, 0, n)
	for range n {
		if err := d.waitPool("python"); err != nil {
			return stats{}, err
		}
		start := time.Now()
		if err := fn(); err != nil {
			return stats{}, err
		}
		ds = append(ds, time.Since(start))
	}
	return summarize(ds), nil
}

var poolGauges = regexp.MustCompile(`agent2env_pool_(ready|target)\{pool="([^"]+)"\} (\d+)`)

// waitPool waits until pool has all its sandboxes ready.
func (d *daemon) waitPool(pool string) error {
	deadline := time.Now().Add(15 * time.Minute)
	for {
		resp, err := d.hc.Get("http://" + d.addr + "/metrics")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		vals := map[string]string{}
		for _, m := range poolGauges.FindAllStringSubmatch(string(b), -1) {
			if m[2] == pool {
				vals[m[1]] = m[3]
			}
		}
		if vals["target"] != "" && vals["ready"] == vals["target"] {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("warm pool %s not full: %v", pool, vals)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) del(path string) error {
	req, _ := http.NewRequest(http.MethodDelete, "http://"+d.addr+path, nil)
	resp, err := d.hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("DELETE %s: %d", path, resp.StatusCode)
	}
	return nil
}

// rawPython measures the floor of a code run: a request line written to a
// python process over a pipe, executed, and its output read back.
func rawPython(n int) (stats, error) {
	cmd := exec.Command("python3", "-u", "-c", `import sys
for line in sys.stdin:
    exec(line)
    sys.stdout.write("\x1e\n")`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return stats{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return stats{}, err
	}
	if err := cmd.Start(); err != nil {
		return stats{}, err
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	r := bufio.NewReader(stdout)
	return measure(n, func() error {
		if _, err := io.WriteString(stdin, "print(1)\n"); err != nil {
			return err
		}
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			if line == "\x1e\n" {
				return nil
			}
		}
	})
}
