package opensandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// fakeMetrics answers its usages in turn, the last one again once they
// are used up; or err.
type fakeMetrics struct {
	mu     sync.Mutex
	usages []service.SandboxUsage
	err    error
}

func (f *fakeMetrics) Usage(_ context.Context, id string) (service.SandboxUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return service.SandboxUsage{}, f.err
	}
	u := f.usages[0]
	if len(f.usages) > 1 {
		f.usages = f.usages[1:]
	}
	return u, nil
}

func TestExecdMetrics(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	limits := service.SandboxUsage{MilliCPU: 2000, MemoryLimit: 512 << 20}
	use := func(cpu time.Duration, mem int64, after time.Duration) service.SandboxUsage {
		u := limits
		u.CPUTime, u.MemoryBytes, u.At = cpu, mem, at.Add(after)
		return u
	}
	for _, tc := range []struct {
		name       string
		m          *fakeMetrics
		wantStatus int
		want       string
	}{
		{
			name:       "a quarter of two CPUs over the window",
			m:          &fakeMetrics{usages: []service.SandboxUsage{use(time.Second, 0, 0), use(time.Second+125*time.Millisecond, 96<<20, 250*time.Millisecond)}},
			wantStatus: 200,
			want:       `{"cpu_count":2,"cpu_used_pct":25,"mem_total_mib":512,"mem_used_mib":96,"timestamp":1700000000250}`,
		},
		{
			name:       "more than the limit is 100",
			m:          &fakeMetrics{usages: []service.SandboxUsage{use(0, 1<<20, 0), use(time.Second, 1<<20, 250*time.Millisecond)}},
			wantStatus: 200,
			want:       `{"cpu_count":2,"cpu_used_pct":100,"mem_total_mib":512,"mem_used_mib":1,"timestamp":1700000000250}`,
		},
		{name: "not running", m: &fakeMetrics{err: errdefs.Precondition("sandbox a is stopped")}, wantStatus: 409},
		{name: "not measured", m: &fakeMetrics{err: errdefs.ErrNotImplemented}, wantStatus: 501},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newExecdSetup(t)
			s.h.cfg.Metrics = tc.m
			rec := execdDo(t, s, "GET", "/opensandbox/a/execd/metrics", "", nil, "tok-a")
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.want != "" && strings.TrimSpace(rec.Body.String()) != tc.want {
				t.Errorf("body %s, want %s", rec.Body, tc.want)
			}
		})
	}
}

// /metrics/watch sends a measure a line, every metricsInterval.
func TestExecdWatchMetrics(t *testing.T) {
	resp := watchMetrics(t, &fakeMetrics{usages: []service.SandboxUsage{{MilliCPU: 1000, MemoryLimit: 1 << 30, MemoryBytes: 1 << 20, At: time.UnixMilli(5)}}})
	sc := bufio.NewScanner(resp.Body)
	for i := 0; i < 2; i++ {
		if !sc.Scan() {
			t.Fatalf("line %d: %v", i, sc.Err())
		}
		var m metricsView
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.CPUCount != 1 || m.MemTotalMiB != 1024 || m.MemUsedMiB != 1 {
			t.Errorf("line %d: %s (%v)", i, sc.Text(), err)
		}
	}
}

// /metrics/watch ends once its sandbox is gone, after a line that says
// so; the client need not hang up.
func TestExecdWatchMetricsSandboxGone(t *testing.T) {
	fm := &fakeMetrics{usages: []service.SandboxUsage{{MilliCPU: 1000, At: time.UnixMilli(5)}}}
	resp := watchMetrics(t, fm)
	fm.mu.Lock()
	fm.err = errdefs.NotFound("sandbox a not found")
	fm.mu.Unlock()
	done := make(chan []string)
	go func() {
		var lines []string
		for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
			lines = append(lines, sc.Text())
		}
		done <- lines
	}()
	select {
	case lines := <-done:
		if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], `"error":"sandbox a not found"`) {
			t.Errorf("lines %q, want them to end with the error", lines)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream goes on after its sandbox is gone")
	}
}

// watchMetrics opens /metrics/watch of sandbox a, measured by fm, with a
// line every 10 ms; the test ends it.
func watchMetrics(t *testing.T, fm *fakeMetrics) *http.Response {
	t.Helper()
	oldWindow, oldInterval := metricsWindow, metricsInterval
	metricsWindow, metricsInterval = time.Millisecond, 10*time.Millisecond
	t.Cleanup(func() { metricsWindow, metricsInterval = oldWindow, oldInterval })
	s, _ := newExecdSetup(t)
	s.h.cfg.Metrics = fm
	srv := httptest.NewServer(s.h)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("GET", srv.URL+"/opensandbox/a/execd/metrics/watch", nil)
	req.Header.Set(HeaderAccessToken, "tok-a")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
