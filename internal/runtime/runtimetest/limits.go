package runtimetest

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// cgroupFile prints the first of the files (v2, then v1 names) that exists
// in the sandbox's own cgroup.
func cgroupFile(files ...string) string {
	var b strings.Builder
	for _, f := range files {
		b.WriteString("[ -r /sys/fs/cgroup/" + f + " ] && exec cat /sys/fs/cgroup/" + f + "; ")
	}
	b.WriteString("exit 1")
	return b.String()
}

func (s *suite) testLimits(t *testing.T) {
	_, _, c := s.sandboxWith(t, nil)

	t.Run("memory", func(t *testing.T) {
		limit := strings.TrimSpace(mustSh(t, c, cgroupFile("memory.max", "memory/memory.limit_in_bytes")))
		if limit != strconv.FormatInt(testResources.MemoryBytes, 10) {
			t.Errorf("memory limit in the sandbox = %s, want %d", limit, testResources.MemoryBytes)
		}
		// dd fills a buffer of bs bytes: twice the limit.
		r := sh(t, c, "dd if=/dev/zero of=/dev/null bs=128M count=1", 20*time.Second)
		if r.ExitCode == 0 || r.TimedOut {
			t.Errorf("allocating twice the memory limit: exit %d, timed out %v, stderr %q; want killed", r.ExitCode, r.TimedOut, r.stderr)
		}
		assertUsable(t, c)
	})

	t.Run("pids", func(t *testing.T) {
		// Start more sleepers than the limit allows from a subshell (the
		// shell gives up at the first failed fork), count them with
		// builtins only, as nothing can fork now, and kill the group.
		r := sh(t, c, `(i=0; while [ $i -lt 100 ]; do sleep 30 & i=$((i+1)); done) 2>/dev/null; set -- /proc/[0-9]*; echo $#; kill 0`, 20*time.Second)
		n, err := strconv.Atoi(strings.TrimSpace(r.stdout))
		if err != nil {
			t.Fatalf("count processes: %q (stderr %q)", r.stdout, r.stderr)
		}
		if n > int(testResources.Pids) || n < 10 {
			t.Errorf("%d processes ran with a limit of %d", n, testResources.Pids)
		}
		assertUsable(t, c)
	})

	t.Run("cpu quota visible", func(t *testing.T) {
		got := strings.Fields(mustSh(t, c, cgroupFile("cpu.max", "cpu/cpu.cfs_quota_us")))
		quota := strconv.FormatInt(testResources.MilliCPU*100, 10) // of a 100 ms period
		if len(got) == 0 || got[0] != quota {
			t.Errorf("cpu quota in the sandbox = %v, want %s", got, quota)
		}
	})
}
