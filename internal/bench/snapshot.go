package main

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
)

// benchSnapshot measures, n times in turn, a live snapshot of sandbox id
// through REST (the request until its answer: the sandbox saved and
// running again) and a restore from it (POST /sandboxes with
// from_snapshot until the sandbox runs, then its first exec), beside
// create, the same run's cold create → ready. A daemon without snapshots
// (no working criu) is reported, not failed.
func benchSnapshot(d *daemon, id string, n int, create stats) error {
	var snaps, restores, firstExecs []time.Duration
	var size int64
	for i := range n {
		var snap api.Snapshot
		start := time.Now()
		if err := d.post("/api/v1/sandboxes/"+id+"/snapshots", api.CreateSnapshotRequest{}, &snap); err != nil {
			if i == 0 && strings.Contains(err.Error(), " 501 ") {
				fmt.Printf("%-34s not measured: %v\n", "snapshot (REST)", err)
				return nil
			}
			return err
		}
		snaps, size = append(snaps, time.Since(start)), snap.SizeBytes
		var sb api.Sandbox
		start = time.Now()
		if err := d.post("/api/v1/sandboxes", api.CreateSandboxRequest{FromSnapshot: snap.ID}, &sb); err != nil {
			return err
		}
		restored := time.Now()
		if err := d.execTrue(sb.ID); err != nil {
			return err
		}
		restores, firstExecs = append(restores, restored.Sub(start)), append(firstExecs, time.Since(start))
		if err := d.delete(sb.ID); err != nil {
			return err
		}
		if err := d.deleteSnapshot(snap.ID); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		name, target string
		took         []time.Duration
	}{
		{"snapshot, live (REST)", "≤ 300 ms p50 at 100 MB", snaps},
		{"restore → running (REST)", "", restores},
		{"restore → first exec (REST)", "≤ 250 ms p50 at 100 MB", firstExecs},
	} {
		st := summarize(l.took)
		fmt.Printf("%-34s p50 %s p90 %s p95 %s   | cold create p50 %s | %.1f× a create | target %s\n",
			l.name, ms(st.p50), ms(st.p90), ms(st.p95), ms(create.p50), float64(st.p50)/float64(create.p50), orNone(l.target))
	}
	fmt.Printf("%-34s %.1f MB on disk\n", "snapshot size", float64(size)/(1<<20))
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// deleteSnapshot deletes snapshot id through REST.
func (d *daemon) deleteSnapshot(id string) error {
	req, err := http.NewRequest(http.MethodDelete, "http://"+d.addr+"/api/v1/snapshots/"+id, nil)
	if err != nil {
		return err
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("DELETE snapshot %s: %d", id, resp.StatusCode)
	}
	return nil
}
