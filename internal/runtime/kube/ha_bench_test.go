package kube_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

// haBenchN is how many sandboxes BenchmarkDaemons creates per daemon set
// (KUBE_BENCH_N, default 10, times 3), and how many executions each of its
// sessions runs.
func haBenchN() int {
	n, err := strconv.Atoi(os.Getenv("KUBE_BENCH_N"))
	if err != nil || n <= 0 {
		n = 10
	}
	return 3 * n
}

// haWorkers is how many clients BenchmarkDaemons runs at once.
const haWorkers = 12

// BenchmarkDaemons measures the throughput of one daemon and of three on
// one PostgreSQL store and the tier-A cluster, the same client load spread
// round-robin over them: sandboxes created and ready per second (each
// then execs once and is deleted), and session executions per second
// (haWorkers sessions, each on one daemon, running commands one after
// the other). Beside each: the CPU seconds the daemons, the API server,
// etcd, PostgreSQL and the sandboxes' agents used, and how busy the
// machine's CPUs were, which names the bottleneck. The parent logs the
// ratios of three daemons to one (target ≥ 2.5×). Run it with -benchtime
// 1x (scripts/bench-kube.sh does).
func BenchmarkDaemons(b *testing.B) {
	k := startTierA(b)
	type result struct{ creates, execs float64 }
	results := map[int]result{}
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("daemons=%d", n), func(b *testing.B) {
			url := postgresServer.URL(b)
			ds := startDaemons(b, k, url, n)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var pids []int
			for _, d := range ds {
				pids = append(pids, d.cmd.Process.Pid)
			}
			before := sampleCPU(pids)
			total := haBenchN()
			creates := runWorkers(total, func(i int) error {
				c := ds[i%n].api
				sb, err := c.Sandbox.Create(ctx, api.CreateSandboxRequest{Image: testImage})
				if err != nil {
					return err
				}
				if _, err := c.Sandbox.WaitForReady(ctx, sb.ID, 20*time.Millisecond); err != nil {
					return err
				}
				if res, err := c.Sandbox.Execute(ctx, sb.ID, api.ExecRequest{Command: []string{"true"}}); err != nil || res.ExitCode != 0 {
					return fmt.Errorf("exec: %+v, %v", res, err)
				}
				return c.Sandbox.Delete(ctx, sb.ID)
			})
			if creates.err != nil {
				b.Fatal(creates.err)
			}
			mid := sampleCPU(pids)
			// Sessions made first (not timed), then total executions in
			// each, sessions side by side.
			if r := runWorkers(haWorkers, func(i int) error {
				_, err := ds[i%n].api.Sessions().ExecuteCommand(ctx, api.SessionCommandRequest{SessionID: fmt.Sprint("bench", i),
					Command: api.CommandLine{Argv: []string{"true"}}})
				return err
			}); r.err != nil {
				b.Fatal(r.err)
			}
			mid2 := sampleCPU(pids)
			execs := runWorkers(haWorkers*total, func(i int) error {
				s := i % haWorkers
				res, err := ds[s%n].api.Sessions().ExecuteCommand(ctx, api.SessionCommandRequest{SessionID: fmt.Sprint("bench", s),
					Command: api.CommandLine{Argv: []string{"true"}}})
				if err == nil && res.ExitCode != 0 {
					err = fmt.Errorf("exit %d", res.ExitCode)
				}
				return err
			})
			if execs.err != nil {
				b.Fatal(execs.err)
			}
			after := sampleCPU(pids)
			for i := range haWorkers {
				if err := ds[i%n].api.Sessions().Delete(ctx, fmt.Sprint("bench", i)); err != nil {
					b.Error(err)
				}
			}
			r := result{creates: float64(total) / creates.took.Seconds(), execs: float64(haWorkers*total) / execs.took.Seconds()}
			results[n] = r
			b.ReportMetric(r.creates, "creates/s")
			b.ReportMetric(r.execs, "execs/s")
			b.ReportMetric(0, "ns/op")
			b.Logf("%d daemon(s): %d sandboxes create → ready → exec → delete by %d clients in %v: %.1f/s; CPU %s",
				n, total, haWorkers, creates.took.Round(time.Millisecond), r.creates, mid.since(before))
			b.Logf("%d daemon(s): %d session executions (%d sessions) in %v: %.0f/s; CPU %s",
				n, haWorkers*total, haWorkers, execs.took.Round(time.Millisecond), r.execs, after.since(mid2))
		})
	}
	if one, three := results[1], results[3]; one.creates > 0 && three.creates > 0 {
		// Printed, not logged: a parent benchmark's log is not shown.
		fmt.Printf("BenchmarkDaemons: 3 daemons against 1: creates %.2f× (%.1f against %.1f/s), session executions %.2f× (%.0f against %.0f/s); target ≥ 2.5×",
			three.creates/one.creates, three.creates, one.creates, three.execs/one.execs, three.execs, one.execs)
		fmt.Println()
	}
}

// workers is the outcome of runWorkers.
type workers struct {
	took time.Duration
	err  error
}

// runWorkers runs op(0) … op(total-1) on haWorkers goroutines and returns
// how long they took all together, and the first error.
func runWorkers(total int, op func(i int) error) workers {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range haWorkers {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := i >= total || first != nil
				mu.Unlock()
				if stop {
					return
				}
				if err := op(i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("operation %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return workers{took: time.Since(start), err: first}
}

// cpuSample is CPU time so far: the machine's, busy and in all, and that
// of the daemons and of this process's other children by command name
// (kube-apiserver, etcd, kwok, postgres with its backends, the agents),
// in clock ticks.
type cpuSample struct {
	busy, total uint64
	daemons     uint64
	byName      map[string]uint64
}

// sampleCPU reads /proc: the machine's counters, the daemons' (pids) and
// every other descendant of this process's, by name.
func sampleCPU(pids []int) cpuSample {
	s := cpuSample{byName: map[string]uint64{}}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1:]
		for i, v := range f {
			n, _ := strconv.ParseUint(v, 10, 64)
			s.total += n
			if i != 3 && i != 4 { // idle, iowait
				s.busy += n
			}
		}
	}
	daemon := map[int]bool{}
	for _, p := range pids {
		daemon[p] = true
	}
	procs := map[int]procStat{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProcStat(pid); ok {
			procs[pid] = p
		}
	}
	self := os.Getpid()
	for pid, p := range procs {
		// Walk up to this process: a descendant is counted under the
		// name of the child of this process it descends from, unless
		// it is a daemon.
		top, cur := -1, pid
		for range 16 {
			if daemon[cur] {
				top = cur
				break
			}
			q, ok := procs[cur]
			if !ok || q.ppid == 0 {
				break
			}
			if q.ppid == self {
				top = cur
				break
			}
			cur = q.ppid
		}
		switch {
		case top < 0:
		case daemon[top]:
			s.daemons += p.ticks
		default:
			s.byName[procs[top].comm] += p.ticks
		}
	}
	return s
}

// procStat is what sampleCPU reads of /proc/<pid>/stat.
type procStat struct {
	comm  string
	ppid  int
	ticks uint64 // utime + stime
}

func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procStat{}, false
	}
	f := strings.Fields(s[closing+1:]) // f[0] is field 3, state
	if len(f) < 13 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return procStat{comm: s[open+1 : closing], ppid: ppid, ticks: ut + st}, true
}

// since says what was used between earlier and s: the machine's CPUs'
// busy share, and the CPU seconds of the daemons and of the others.
func (s cpuSample) since(earlier cpuSample) string {
	const hz = 100 // USER_HZ
	var b strings.Builder
	if d := s.total - earlier.total; d > 0 {
		fmt.Fprintf(&b, "machine %.0f%% busy; ", 100*float64(s.busy-earlier.busy)/float64(d))
	}
	fmt.Fprintf(&b, "daemons %.1f s", float64(s.daemons-earlier.daemons)/hz)
	for name, t := range s.byName {
		if d := t - earlier.byName[name]; d >= hz/10 {
			fmt.Fprintf(&b, ", %s %.1f s", name, float64(d)/hz)
		}
	}
	return b.String()
}
