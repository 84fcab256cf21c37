package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
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
	return nil
}

// benchRuns measures the task runner's overhead per run: a run of the
// custom agent `true` from its submission to its end event, less the
// agent's own time (everything else: records, sandbox create, workdir,
// exec, end conditions, artifacts, sandbox delete), beside a bare sandbox
// create → ready through REST. before, when set, runs before each run,
// untimed.
func benchRuns(d *daemon, n int, name, img string, create stats, target string, before func() error) error {
	task := fmt.Sprintf("name: bench\nimage: %s\nagent: custom\ngoal: nothing\nentrypoint: 'true'\nartifacts: [/workspace/*.txt]\n", img)
	var ids []string
	overhead, err := measureOverhead(n, func() (time.Duration, error) {
		if before != nil {
			if err := before(); err != nil {
				return 0, err
			}
		}
		start := time.Now()
		var b api.RunBatch
		if err := d.post("/api/v1/runs", api.RunSubmitRequest{Task: task}, &b); err != nil {
			return 0, err
		}
		id := b.Runs[0].ID
		ids = append(ids, id)
		end, err := d.followRun(id)
		if err != nil {
			return 0, err
		}
		if end.Status != api.RunSucceeded {
			return 0, fmt.Errorf("run %s %s: %s", id, end.Status, end.Reason)
		}
		took := time.Since(start)
		var r api.Run
		if err := d.get("/api/v1/runs/"+id, &r); err != nil {
			return 0, err
		}
		return took - time.Duration(r.Timings[api.PhaseAgent]*float64(time.Millisecond)), nil
	})
	for _, id := range ids { // untimed
		d.del("/api/v1/runs/" + id)
	}
	if err != nil {
		return err
	}
	report(name, overhead, "sandbox create → ready", create, target)
	return nil
}

// measureOverhead is measure of durations fn reports.
func measureOverhead(n int, fn func() (time.Duration, error)) (stats, error) {
	ds := make([]time.Duration, 0, n)
	for range n {
		d, err := fn()
		if err != nil {
			return stats{}, err
		}
		ds = append(ds, d)
	}
	return summarize(ds), nil
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
