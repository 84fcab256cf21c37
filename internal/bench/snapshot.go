package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agent2env/agent2env/api"
)

// benchSnapshot measures, n times in turn, a live snapshot of sandbox id
// through REST (the request until its answer: the sandbox saved and
// running again) and a restore from it (POST /sandboxes with
// from_snapshot until the sandbox runs, then its first exec), beside
// create, the same run's cold create → ready; then a fork (benchFork).
// Then all of it again with a python context of the sandbox holding
// 100 MB, the size the targets are set at. A daemon without
// snapshots (no working criu) is reported, not failed.
func benchSnapshot(d *daemon, id string, n int, create stats) error {
	if ok, err := benchSnapshotOf(d, id, "", n, create); err != nil || !ok {
		return err
	}
	if err := benchFork(d, id, "", create); err != nil {
		return err
	}
	big, err := d.holding100MB(id)
	if err != nil {
		return err
	}
	if _, err := benchSnapshotOf(d, id, ", 100 MB", n, create); err != nil {
		return err
	}
	if err := benchFork(d, id, ", 100 MB", create); err != nil {
		return err
	}
	return d.del("/api/v1/contexts/" + big)
}

// holding100MB makes a python context in sandbox id holding a 100 MB
// bytearray whose every page is written (resident, not the zero page),
// and returns its id.
func (d *daemon) holding100MB(id string) (string, error) {
	var c api.Context
	if err := d.post("/api/v1/sandboxes/"+id+"/contexts", api.CreateContextRequest{Language: "python"}, &c); err != nil {
		return "", err
	}
	var res api.ExecuteResponse
	code := "b = bytearray(100 << 20)\nb[::4096] = b'\\x01' * len(b[::4096])\nprint(sum(b[::4096]))"
	if err := d.post("/api/v1/contexts/"+c.ContextID+"/execute", api.ExecuteRequest{Code: code}, &res); err != nil {
		return "", err
	}
	if want := fmt.Sprintf("%d\n", (100<<20)/4096); res.Output.Stdout != want {
		return "", fmt.Errorf("the 100 MB context printed %q, not %q", res.Output.Stdout, want)
	}
	return c.ContextID, nil
}

// benchSnapshotOf measures what benchSnapshot says, its rows named with
// suffix (what the sandbox holds); ok is false when the daemon has no
// snapshots (no working criu), which it reports.
func benchSnapshotOf(d *daemon, id, suffix string, n int, create stats) (ok bool, err error) {
	var snaps, restores, firstExecs []time.Duration
	var size int64
	for i := range n {
		var snap api.Snapshot
		start := time.Now()
		if err := d.post("/api/v1/sandboxes/"+id+"/snapshots", api.CreateSnapshotRequest{}, &snap); err != nil {
			if i == 0 && strings.Contains(err.Error(), " 501 ") {
				fmt.Printf("%-36s not measured: %v\n", "snapshot (REST)", err)
				return false, nil
			}
			return false, err
		}
		snaps, size = append(snaps, time.Since(start)), snap.SizeBytes
		var sb api.Sandbox
		start = time.Now()
		if err := d.post("/api/v1/sandboxes", api.CreateSandboxRequest{FromSnapshot: snap.ID}, &sb); err != nil {
			return false, err
		}
		restored := time.Now()
		if err := d.execTrue(sb.ID); err != nil {
			return false, err
		}
		restores, firstExecs = append(restores, restored.Sub(start)), append(firstExecs, time.Since(start))
		if err := d.delete(sb.ID); err != nil {
			return false, err
		}
		if err := d.deleteSnapshot(snap.ID); err != nil {
			return false, err
		}
	}
	for _, l := range []struct {
		name, target string
		took         []time.Duration
	}{
		{"snapshot, live (REST)" + suffix, "≤ 300 ms p50 at 100 MB", snaps},
		{"restore → running (REST)" + suffix, "", restores},
		{"restore → first exec (REST)" + suffix, "≤ 250 ms p50 at 100 MB", firstExecs},
	} {
		st := summarize(l.took)
		fmt.Printf("%-36s p50 %s p90 %s p95 %s   | cold create p50 %s | %.1f× a create | target %s\n",
			l.name, ms(st.p50), ms(st.p90), ms(st.p95), ms(create.p50), float64(st.p50)/float64(create.p50), orNone(l.target))
	}
	fmt.Printf("%-36s %.1f MB on disk\n", "snapshot size"+suffix, float64(size)/(1<<20))
	return true, nil
}

// forkCount is how many sandboxes the fork bench makes at once.
const forkCount = 8

// Published figures of peers, printed beside ours (not measured here):
// E2B pauses a sandbox in about 4 s per GB of its memory and resumes it in
// about 1 s; CodeSandbox clones a running VM in about 2 s.
const (
	e2bPausePerGB       = 4 * time.Second
	e2bResume           = time.Second
	codeSandboxCloneRun = 2 * time.Second
)

// benchFork forks sandbox id into forkCount sandboxes through REST (a live
// snapshot, then the restores in parallel: the request until its answer,
// every copy running with its agent answering) and then runs a first exec
// in every copy at once, then forks the snapshot it kept as many times
// (the restores alone); it reports what each copy takes beside the
// parent: memory (the anonymous memory of its cgroup: its processes'
// pages, not the page cache) and disk (what its writable layer's image
// holds allocated).
func benchFork(d *daemon, id, suffix string, create stats) error {
	var res api.ForkResponse
	start := time.Now()
	if err := d.post("/api/v1/sandboxes/"+id+"/fork", api.ForkRequest{Count: forkCount}, &res); err != nil {
		return err
	}
	forked := time.Since(start)
	errs := make(chan error, len(res.Sandboxes))
	for _, sb := range res.Sandboxes {
		go func() { errs <- d.execTrue(sb.ID) }()
	}
	for range res.Sandboxes {
		if err := <-errs; err != nil {
			return err
		}
	}
	firstExecs := time.Since(start)
	// Again from the snapshot the fork kept: the restores alone.
	var again api.ForkResponse
	start = time.Now()
	if err := d.post("/api/v1/snapshots/"+res.SnapshotID+"/fork", api.ForkRequest{Count: forkCount}, &again); err != nil {
		return err
	}
	ofSnapshot := time.Since(start)
	for _, sb := range again.Sandboxes {
		if err := d.delete(sb.ID); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		name, target string
		took         time.Duration
	}{
		{fmt.Sprintf("fork ×%d → running (REST)%s", forkCount, suffix), "≤ 500 ms wall", forked},
		{fmt.Sprintf("fork ×%d → every first exec%s", forkCount, suffix), "", firstExecs},
		{fmt.Sprintf("fork ×%d of the snapshot%s", forkCount, suffix), "", ofSnapshot},
	} {
		fmt.Printf("%-36s wall %s   | cold create p50 %s | %.1f× a create | target %s\n",
			l.name, ms(l.took), ms(create.p50), float64(l.took)/float64(create.p50), orNone(l.target))
	}
	fmt.Printf("%-36s E2B pauses ≈ %v per GB and resumes in ≈ %v; CodeSandbox clones a running VM in ≈ %v (their published figures)\n",
		"", e2bPausePerGB, e2bResume, codeSandboxCloneRun)
	var mem, disk int64
	for _, sb := range res.Sandboxes {
		m, dk := d.footprint(sb.ID)
		mem, disk = mem+m, disk+dk
	}
	pm, pd := d.footprint(id)
	n := int64(len(res.Sandboxes))
	fmt.Printf("%-36s memory %.1f MB, disk %.1f MB each (mean) | the parent: memory %.1f MB, disk %.1f MB\n",
		"per fork"+suffix, float64(mem/n)/(1<<20), float64(disk/n)/(1<<20), float64(pm)/(1<<20), float64(pd)/(1<<20))
	for _, sb := range res.Sandboxes {
		if err := d.delete(sb.ID); err != nil {
			return err
		}
	}
	return d.deleteSnapshot(res.SnapshotID)
}

// footprint returns the anonymous memory of sandbox id's cgroup (cgroup v1
// or v2, the oci runtime's) and the bytes allocated to its disk image; 0
// for what it cannot read.
func (d *daemon) footprint(id string) (mem, disk int64) {
	for _, pattern := range []string{"/sys/fs/cgroup/memory/agent2env/*/" + id + "/memory.stat",
		"/sys/fs/cgroup/agent2env/*/" + id + "/memory.stat"} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			b, err := os.ReadFile(m)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) == 2 && (f[0] == "total_rss" || f[0] == "anon") {
					mem, _ = strconv.ParseInt(f[1], 10, 64)
				}
			}
		}
	}
	var st syscall.Stat_t
	if syscall.Stat(filepath.Join(d.dataDir, "oci", id, "disk.img"), &st) == nil {
		disk = st.Blocks * 512
	}
	return mem, disk
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
