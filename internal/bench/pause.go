package main

import (
	"fmt"
	"time"

	"github.com/agent2env/agent2env/api"
)

// benchPause measures pause and resume of sandbox id through REST (each
// request until its answer, the sandbox frozen or thawed by then), n of
// each in turn, beside create, the same run's cold create → ready: what a
// paused sandbox saves over making one anew.
func benchPause(d *daemon, id string, n int, create stats) error {
	var pauses, resumes []time.Duration
	for range n {
		for _, op := range []struct {
			name string
			want api.SandboxStatus
			took *[]time.Duration
		}{{"pause", api.StatusPaused, &pauses}, {"resume", api.StatusRunning, &resumes}} {
			var sb api.Sandbox
			start := time.Now()
			if err := d.post("/api/v1/sandboxes/"+id+"/"+op.name, nil, &sb); err != nil {
				return err
			}
			*op.took = append(*op.took, time.Since(start))
			if sb.Status != op.want {
				return fmt.Errorf("%s: the sandbox is %s, want %s", op.name, sb.Status, op.want)
			}
		}
	}
	for _, l := range []struct {
		name string
		took []time.Duration
	}{{"pause (REST)", pauses}, {"resume (REST)", resumes}} {
		st := summarize(l.took)
		fmt.Printf("%-34s p50 %s p90 %s p95 %s   | cold create p50 %s | %.0f× faster than a create | target ≤ 10 ms p50\n",
			l.name, ms(st.p50), ms(st.p90), ms(st.p95), ms(create.p50), float64(create.p50)/float64(st.p50))
	}
	return nil
}
