package session

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/manager"
)

// TestMetrics: the service's collector says in /metrics what Stats says:
// sessions, busy ones, cpu and memory committed against capacity,
// executions by outcome.
func TestMetrics(t *testing.T) {
	e := newEnv(t, func(su *setup) {
		su.mgr.Host = manager.Host{MilliCPU: 4000, MemoryBytes: 8 << 30}
		su.mgr.CPUOvercommit, su.mgr.MemoryOvercommit = 2, 1
	})
	e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "m"})
	if _, _, err := e.svc.ExecuteCode(bg, api.SessionExecuteRequest{Code: "1/0", SessionID: "m"}, nil); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(e.svc); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP agent2env_capacity What committed resources may add up to: millicpu, memory bytes.
# TYPE agent2env_capacity gauge
agent2env_capacity{resource="memory_bytes"} 8.589934592e+09
agent2env_capacity{resource="millicpu"} 8000
# HELP agent2env_committed Resource limits of pending, running and paused sandboxes: millicpu, memory bytes.
# TYPE agent2env_committed gauge
agent2env_committed{resource="memory_bytes"} 1.073741824e+09
agent2env_committed{resource="millicpu"} 1000
# HELP agent2env_session_executions_total Executions of code and commands in sessions and contexts, by outcome.
# TYPE agent2env_session_executions_total counter
agent2env_session_executions_total{outcome="error"} 1
agent2env_session_executions_total{outcome="ok"} 1
# HELP agent2env_sessions Sessions that exist.
# TYPE agent2env_sessions gauge
agent2env_sessions 1
# HELP agent2env_sessions_busy Sessions with a request running in them.
# TYPE agent2env_sessions_busy gauge
agent2env_sessions_busy 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
