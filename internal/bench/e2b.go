package main

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

//go:embed e2b_driver.py
var e2bDriver []byte

// e2bCloudReady is what E2B reports for its cloud: about 150 ms from
// create to a ready sandbox (printed beside ours; not measured here).
const e2bCloudReady = 150 * time.Millisecond

// e2bSDK is the Python driver of the stock E2B SDKs (e2b_driver.py)
// running against one daemon.
type e2bSDK struct{ *pyDriver }

// startE2BSDK starts the driver with python (a venv with e2b and
// e2b-code-interpreter: scripts/test-peers.sh's), pointed at d.
func startE2BSDK(python string, d *daemon) (*e2bSDK, error) {
	url := "http://" + d.addr
	// The bench daemon has no API keys: any key of E2B's form does.
	env := []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=e2b_" + fmt.Sprintf("%040x", 0)}
	pd, err := startPyDriver("E2B SDK driver", python, "e2b_driver.py", e2bDriver, nil, env)
	if err != nil {
		return nil, err
	}
	return &e2bSDK{pd}, nil
}

// do sends one command and returns the durations the driver timed.
func (s *e2bSDK) do(command string) ([]time.Duration, error) {
	var res struct{ MS []float64 }
	if err := s.ask(command, &res); err != nil {
		return nil, err
	}
	ds := make([]time.Duration, len(res.MS))
	for i, v := range res.MS {
		ds[i] = time.Duration(v * float64(time.Millisecond))
	}
	return ds, nil
}

// benchE2B measures the E2B-compatible API through the stock Python SDK
// against agent2env's own Go client (api/client) in the same run:
// Sandbox.create() → its first commands.run("true") against Create (and
// the wait for running) → Execute of the same bash -l -c true, on d (cold, template base =
// image img) and on warm, whose python pool holds code-interpreter
// sandboxes (template code-interpreter-v1), each create timed once the
// pool is full; then run_code("1") against a context's execute of 1
// (alternated by chunks); then
// envd's process Start and the code interpreter's /execute without the
// SDK (e2bEnvdStart, e2bExecuteByGo).
func benchE2B(d, warm *daemon, n int, img string) error {
	python := os.Getenv("AGENT2ENV_PYTHON")
	if python == "" {
		return fmt.Errorf("set AGENT2ENV_PYTHON to the python of scripts/test-peers.sh (make bench does): the E2B benchmarks drive the stock E2B SDK")
	}
	for _, tc := range []struct {
		name, template, image string
		d                     *daemon
		pooled                bool
	}{
		{"E2B create → commands.run, cold", "base", img, d, false},
		{"E2B create → commands.run, warm", "code-interpreter-v1", "agent2env/code-interpreter", warm, true},
	} {
		sdk, err := startE2BSDK(python, tc.d)
		if err != nil {
			return err
		}
		ours, theirs, created, err := e2bCreatePair(sdk, tc.d, n, tc.template, tc.image, tc.pooled)
		sdk.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", tc.name, err)
		}
		report(tc.name, theirs, "Go client", ours, "≤ 1.3x; warm ≤ 50 ms p50")
		fmt.Printf("%-34s of which Sandbox.create p50 %s; E2B's cloud reports ≈ %s to a ready sandbox\n", "", ms(created.p50), ms(e2bCloudReady))
	}
	sdk, err := startE2BSDK(python, d)
	if err != nil {
		return err
	}
	defer sdk.stop()
	theirs, ours, err := e2bRunCodePair(sdk, d, n*4)
	if err != nil {
		return err
	}
	report("E2B run_code('1')", theirs, "Go client execute", ours, "≤ 1.5x")
	start, exec, err := e2bEnvdStart(d, n*4)
	if err != nil {
		return fmt.Errorf("E2B envd Start: %w", err)
	}
	report("E2B envd Start, sent by Go", start, "Go client execute", exec, "reported (the surface's share)")
	execute, goExec, err := e2bExecuteByGo(d, n*4)
	if err != nil {
		return fmt.Errorf("E2B /execute: %w", err)
	}
	report("E2B /execute of 1, sent by Go", execute, "Go client execute", goExec, "reported (the surface's share)")
	return nil
}

// e2bCreatePair times n creates through the Go client and n through the
// SDK (to the first command, and the create alone), interleaved, after
// one untimed of each (connections, imports).
func e2bCreatePair(sdk *e2bSDK, d *daemon, n int, template, image string, pooled bool) (ours, theirs, created stats, err error) {
	c, err := client.New("http://" + d.addr)
	if err != nil {
		return stats{}, stats{}, stats{}, err
	}
	// The image first, untimed, through the Go client: a create that has
	// to make it takes longer than the SDK's create waits.
	if _, err := goCreateExec(c, api.CreateSandboxRequest{Image: image}, sdkTrue); err != nil {
		return stats{}, stats{}, stats{}, err
	}
	var goDs, sdkDs, createDs []time.Duration
	for i := range n + 1 {
		if pooled {
			if err := d.waitPool("python"); err != nil {
				return stats{}, stats{}, stats{}, err
			}
		}
		ds, err := sdk.do("create " + template)
		if err == nil && len(ds) != 2 {
			err = fmt.Errorf("create answered %d figures, want 2", len(ds))
		}
		if err != nil {
			return stats{}, stats{}, stats{}, err
		}
		if pooled {
			if err := d.waitPool("python"); err != nil {
				return stats{}, stats{}, stats{}, err
			}
		}
		took, err := goCreateExec(c, api.CreateSandboxRequest{Image: image}, sdkTrue)
		if err != nil {
			return stats{}, stats{}, stats{}, err
		}
		if i > 0 {
			goDs, sdkDs, createDs = append(goDs, took), append(sdkDs, ds[0]), append(createDs, ds[1])
		}
	}
	return summarize(goDs), summarize(sdkDs), summarize(createDs), nil
}

// sdkTrue is the process E2B's commands.run("true") asks envd for: a
// login shell running the command. The Go client runs the same, so the
// ratio is the surface's and the SDK's cost, not bash's.
var sdkTrue = []string{"/bin/bash", "-l", "-c", "true"}

// runCodeChunk is how many run_code("1") the SDK and the Go client time
// in turn: the two sides alternate in chunks, so that the load of the
// shared machine, which moves within a run, weighs on both alike.
const runCodeChunk = 20

// e2bRunCodePair times n run_code("1") round trips through the SDK (in
// one code-interpreter sandbox, after an untimed run_code) and n executes of "1" through the Go client in a python context of a
// code-interpreter sandbox (after an untimed one), alternated by chunks.
func e2bRunCodePair(sdk *e2bSDK, d *daemon, n int) (theirs, ours stats, err error) {
	c, err := client.New("http://" + d.addr)
	if err != nil {
		return stats{}, stats{}, err
	}
	ctx := context.Background()
	id, err := d.create("agent2env/code-interpreter")
	if err != nil {
		return stats{}, stats{}, err
	}
	defer d.delete(id)
	cx, err := c.Contexts().CreateIn(ctx, id, api.CreateContextRequest{Language: "python"})
	if err != nil {
		return stats{}, stats{}, err
	}
	run := func() error {
		res, err := c.Contexts().Execute(ctx, cx.ContextID, api.ExecuteRequest{Code: "1"})
		if err == nil && res.Result != "1" {
			err = fmt.Errorf("execute 1 gave %q", res.Result)
		}
		return err
	}
	if err := run(); err != nil {
		return stats{}, stats{}, err
	}
	var sdkDs, goDs []time.Duration
	for left := n; left > 0; left -= runCodeChunk {
		k := min(left, runCodeChunk)
		ds, err := sdk.do(fmt.Sprintf("runcode %d", k))
		if err != nil {
			return stats{}, stats{}, err
		}
		sdkDs = append(sdkDs, ds...)
		for range k {
			t := time.Now()
			if err := run(); err != nil {
				return stats{}, stats{}, err
			}
			goDs = append(goDs, time.Since(t))
		}
	}
	return summarize(sdkDs), summarize(goDs), nil
}

// benchE2BOnly runs benchE2B alone, on a daemon and one with a warm pool.
func benchE2BOnly(n int, img string) error {
	bin, d, err := startFirst()
	if err != nil {
		return err
	}
	defer d.stop()
	warm, err := startDaemon(bin, "--warm-pools", "python=3")
	if err != nil {
		return err
	}
	defer warm.stop()
	fmt.Printf("agent2env E2B benchmarks (%d iterations; ratios are the E2B SDK's / the Go client's)\n\n", n)
	return benchE2B(d, warm, n, img)
}
