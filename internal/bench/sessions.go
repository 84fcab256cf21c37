package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent2env/agent2env/api"
)

// benchSessions measures execute_code print(1) in a reused session over
// REST and over MCP streamable HTTP, beside the context execute path it
// rides on, and the first execute_code of a new session (cold), beside
// sandbox creates → ready made in turn with it (a cold session makes its
// sandbox, then starts its kernel; benchColdSession).
func benchSessions(d *daemon, n int, img string) error {
	var c api.Context
	if err := d.post("/api/v1/contexts", api.CreateContextRequest{Language: "python"}, &c); err != nil {
		return err
	}
	defer d.del("/api/v1/contexts/" + c.ContextID)
	execute := func(path string, body any) func() error {
		return func() error {
			var res api.ExecuteResponse
			if err := d.post(path, body, &res); err != nil {
				return err
			}
			if res.Output.Stdout != "1\n" {
				return fmt.Errorf("print(1) printed %q", res.Output.Stdout)
			}
			return nil
		}
	}
	ctxRun, err := measure(n*4, execute("/api/v1/contexts/"+c.ContextID+"/execute", api.ExecuteRequest{Code: "print(1)"}))
	if err != nil {
		return err
	}
	reused := api.SessionExecuteRequest{Code: "print(1)", SessionID: "bench-reused"}
	if err := execute("/api/v1/sessions/execute", reused)(); err != nil { // makes it
		return err
	}
	defer d.del("/api/v1/sessions/bench-reused")
	rest, err := measure(n*4, execute("/api/v1/sessions/execute", reused))
	if err != nil {
		return err
	}
	report("execute_code print(1), reused (REST)", rest, "context execute", ctxRun, "≤ 3 ms p50")

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: "http://" + d.addr + "/mcp", HTTPClient: d.hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return fmt.Errorf("connect to /mcp: %w", err)
	}
	defer cs.Close()
	mcpRun, err := measure(n*4, func() error {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "execute_code",
			Arguments: map[string]any{"code": "print(1)", "session_id": "bench-reused"}})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("execute_code over MCP failed: %v", res.Content)
		}
		return nil
	})
	if err != nil {
		return err
	}
	report("execute_code print(1), reused (MCP)", mcpRun, "context execute", ctxRun, "≤ 5 ms p50")

	return benchColdSession(d, "new session, no warm pool", n, img)
}

// benchColdSession measures the first execute_code print(1) of n new
// sessions on d, which has no warm pool, beside n sandbox creates → ready
// of img on d, the two in turn iteration by iteration (who goes first
// alternates; each 100 ms after the last, as benchCreateRuntimes spaces
// its creates), so that the machine's drift weighs on both alike, and
// prints it as the row name with the median of the per-iteration ratio.
func benchColdSession(d *daemon, name string, n int, img string) (err error) {
	var sessionIDs, sandboxIDs []string
	defer func() { // untimed
		for _, id := range sessionIDs {
			d.del("/api/v1/sessions/" + id)
		}
		err = errors.Join(err, d.deleteAll(sandboxIDs))
	}()
	var sessions, creates, ratios []time.Duration
	timed := func(fn func() error) (time.Duration, error) {
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		err := fn()
		return time.Since(start), err
	}
	for i := range n {
		session := func() error {
			id := fmt.Sprintf("bench-cold-%d", i)
			sessionIDs = append(sessionIDs, id)
			return d.firstExecute(id)
		}
		create := func() error {
			id, err := d.create(img)
			if id != "" {
				sandboxIDs = append(sandboxIDs, id)
			}
			return err
		}
		first, second := session, create
		if i%2 == 1 {
			first, second = create, session
		}
		a, err := timed(first)
		if err != nil {
			return err
		}
		b, err := timed(second)
		if err != nil {
			return err
		}
		if i%2 == 1 {
			a, b = b, a
		}
		sessions, creates = append(sessions, a), append(creates, b)
		ratios = append(ratios, time.Duration(float64(time.Millisecond)*float64(a)/float64(b)))
	}
	report(name, summarize(sessions), "sandbox create → ready, in turn", summarize(creates), "≤ 40 ms p50 and ≤ 1.5x create")
	fmt.Printf("  session/create per iteration: median %.2f\n", float64(summarize(ratios).p50)/float64(time.Millisecond))
	return nil
}

// benchWarmSession measures the first execute_code of a new session served
// by d's warm pool of python sandboxes (with their kernel started).
func benchWarmSession(d *daemon, n int, baseline stats) error {
	var ids []string
	first, err := measureRefilled(d, n, func() error {
		id := fmt.Sprintf("bench-warm-%d", len(ids))
		ids = append(ids, id)
		return d.firstExecute(id)
	})
	for _, id := range ids { // untimed
		d.del("/api/v1/sessions/" + id)
	}
	if err != nil {
		return err
	}
	report("new session, warm pool", first, "python over a pipe", baseline, "≤ 5 ms p50")
	return nil
}

// firstExecute runs print(1) as the first execute_code of the new session
// id.
func (d *daemon) firstExecute(id string) error {
	var res api.SessionExecuteResponse
	if err := d.post("/api/v1/sessions/execute", api.SessionExecuteRequest{Code: "print(1)", SessionID: id}, &res); err != nil {
		return err
	}
	if !res.Created || res.Output.Stdout != "1\n" {
		return fmt.Errorf("first execute_code of session %s: %+v", id, res)
	}
	return nil
}

// compareColdSession measures the first execute_code of new sessions on
// daemons of two binaries in turn, iteration by iteration (who goes first
// alternates), and prints the median of the per-iteration ratio. The
// sessions are deleted at the end, as benchColdSession deletes its own: a
// delete's teardown (unmounts, the runtime's delete, the disk) runs on
// after its answer and would weigh on the next session.
func compareColdSession(n int, binA, binB string) (err error) {
	ds, stop, err := startPair(binA, binB, func(d *daemon) error {
		if err := d.firstExecute("bench-warmup"); err != nil { // makes the image
			return err
		}
		return d.del("/api/v1/sessions/bench-warmup")
	})
	if err != nil {
		return err
	}
	defer stop()
	made := make([][]string, len(ds))
	defer func() { // untimed
		for j, ids := range made {
			for _, id := range ids {
				err = errors.Join(err, ds[j].del("/api/v1/sessions/"+id))
			}
		}
	}()
	a, b, ratio, err := inTurn(n, ds, func(j, i int) (time.Duration, error) {
		time.Sleep(100 * time.Millisecond)
		id := fmt.Sprintf("bench-cold-%d", i)
		made[j] = append(made[j], id)
		start := time.Now()
		err := ds[j].firstExecute(id)
		return time.Since(start), err
	})
	if err != nil {
		return err
	}
	fmt.Printf("first execute_code of a new session, no pool, %d iterations in turn (load average %s)\n  A %s p50 %s p95 %s\n  B %s p50 %s p95 %s\n  A/B per iteration: median %.2f\n",
		n, loadAvg(), binA, ms(a.p50), ms(a.p95), binB, ms(b.p50), ms(b.p95), ratio)
	return nil
}
