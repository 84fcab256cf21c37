package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// openSandboxDriver times Sandbox.create → first commands.run through the
// stock OpenSandbox Python SDK, one per line it reads.
//
//go:embed opensandbox_sdk.py
var openSandboxDriver []byte

// execdTrue is the process OpenSandbox's commands.run("true") asks execd
// for: bash running the command. The Go client runs the same, so the ratio
// is the surface's and the SDK's cost, not bash's (as sdkTrue for E2B).
var execdTrue = []string{"bash", "-c", "true"}

// stockOpenSandbox is the figure OpenSandbox's own server gives on Docker,
// which ours is reported beside (issue 23).
const stockOpenSandbox = "stock OpenSandbox on Docker: 1–5 s to a ready sandbox"

// sdkDriver is a running opensandbox_sdk.py.
type sdkDriver struct{ *pyDriver }

// startSDKDriver starts opensandbox_sdk.py on $AGENT2ENV_PYTHON (the
// interpreter of scripts/test-peers.sh, which has the SDK) against the
// daemon at addr, creating sandboxes of img with cpu and memory (the
// SDK's default limits when empty).
func startSDKDriver(addr, img, cpu, memory string, metricsOff bool) (*sdkDriver, error) {
	python := os.Getenv("AGENT2ENV_PYTHON")
	if python == "" {
		return nil, fmt.Errorf("set AGENT2ENV_PYTHON to the python of scripts/test-peers.sh (make bench does), which has the OpenSandbox SDK")
	}
	args := []string{img}
	if cpu != "" {
		args = append(args, cpu, memory)
	}
	// The daemon has no API keys: any key is let in.
	env := []string{"OPEN_SANDBOX_DOMAIN=" + addr, "OPEN_SANDBOX_API_KEY=bench"}
	if metricsOff {
		env = append(env, "OPENSANDBOX_DISABLE_METRICS=1")
	}
	pd, err := startPyDriver("OpenSandbox SDK driver", python, "opensandbox_sdk.py", openSandboxDriver, args, env)
	if err != nil {
		return nil, err
	}
	return &sdkDriver{pd}, nil
}

// once has the driver create a sandbox and run `true` in it, and returns
// how long that took, as the driver timed it.
func (s *sdkDriver) once() (time.Duration, error) {
	var res struct {
		Seconds float64 `json:"seconds"`
		Error   string  `json:"error"`
	}
	if err := s.ask("go", &res); err != nil {
		return 0, err
	}
	if res.Error != "" {
		return 0, fmt.Errorf("OpenSandbox SDK: %s", res.Error)
	}
	return time.Duration(res.Seconds * float64(time.Second)), nil
}

// replaySDK makes, with a Go HTTP client, the exchanges the Python SDK
// makes for Sandbox.create → commands.run("true") (its create request, the
// execd and egress endpoints, execd's ping, the command's stream to its
// end), and returns how long they took and the sandbox: the server's share
// of the SDK's figure, the rest being the SDK's own work.
func replaySDK(hc *http.Client, addr, img, cpu, memory string) (time.Duration, string, error) {
	limits := map[string]string{"cpu": "1", "memory": "2Gi"} // the SDK's default
	if cpu != "" {
		limits = map[string]string{"cpu": cpu, "memory": memory}
	}
	body, _ := json.Marshal(map[string]any{
		"image": map[string]string{"uri": img}, "entrypoint": []string{"tail", "-f", "/dev/null"},
		"timeout": 600, "resourceLimits": limits, "env": map[string]string{}, "metadata": map[string]string{},
		"secureAccess": false,
	})
	call := func(method, url string, header map[string]string, body []byte, out any) error {
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("OPEN-SANDBOX-API-KEY", "bench")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode >= 300 {
			return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
		}
		if out != nil {
			return json.Unmarshal(raw, out)
		}
		return nil
	}
	base := "http://" + addr + "/v1/sandboxes"
	start := time.Now()
	var sb struct {
		ID string `json:"id"`
	}
	if err := call(http.MethodPost, base, nil, body, &sb); err != nil {
		return 0, "", err
	}
	var execd, egress struct {
		Endpoint string            `json:"endpoint"`
		Headers  map[string]string `json:"headers"`
	}
	if err := call(http.MethodGet, base+"/"+sb.ID+"/endpoints/44772?use_server_proxy=false", nil, nil, &execd); err != nil {
		return 0, sb.ID, err
	}
	if err := call(http.MethodGet, base+"/"+sb.ID+"/endpoints/18080?use_server_proxy=false", nil, nil, &egress); err != nil {
		return 0, sb.ID, err
	}
	if err := call(http.MethodGet, "http://"+execd.Endpoint+"/ping", execd.Headers, nil, nil); err != nil {
		return 0, sb.ID, err
	}
	if err := call(http.MethodPost, "http://"+execd.Endpoint+"/command", execd.Headers, []byte(`{"command":"true"}`), nil); err != nil {
		return 0, sb.ID, err
	}
	return time.Since(start), sb.ID, nil
}

// benchOpenSandbox measures Sandbox.create → the first commands.run
// answered through the stock OpenSandbox Python SDK, against agent2env's
// own create → exec of the same `bash -c true` (execdTrue) through its Go client, iteration by iteration
// in turn (the ratio is taken per iteration): cold on d with img, then
// from warm's python pool (image agent2env/code-interpreter, refilled
// before each create, both clients asking for the pool's cpu and memory).
// Its target: ≤ 1.3× our own client, and ≤ 100 ms p50 from a warm pool.
func benchOpenSandbox(d, warm *daemon, n int, img string) error {
	if err := compareOpenSandbox(d, n, "cold", img, "", "", nil); err != nil {
		return err
	}
	if warm == nil {
		return nil
	}
	const poolImage = "agent2env/code-interpreter"
	if err := warm.waitPool("python"); err != nil {
		return err
	}
	// The pool's sandboxes have the daemon's default cpu and memory: ask
	// for those (the SDK's default is 1 CPU, 2 GiB).
	c, err := client.New("http://" + warm.addr)
	if err != nil {
		return err
	}
	sb, err := c.Sandbox.Create(context.Background(), api.CreateSandboxRequest{Image: poolImage})
	if err != nil {
		return err
	}
	if err := c.Sandbox.Delete(context.Background(), sb.ID); err != nil {
		return err
	}
	return compareOpenSandbox(warm, n, "warm pool", poolImage, sb.CPU, sb.Memory, func() error { return warm.waitPool("python") })
}

// compareOpenSandbox runs n iterations of the SDK's create → run (stock, and
// with its own metrics report off: OPENSANDBOX_DISABLE_METRICS=1), the Go
// client's create → exec and the SDK's HTTP exchanges made by Go
// (replaySDK) on d, in turn, before (when set) running before each,
// untimed, and prints the figures.
func compareOpenSandbox(d *daemon, n int, name, img, cpu, memory string, before func() error) error {
	sdk, err := startSDKDriver(d.addr, img, cpu, memory, false)
	if err != nil {
		return err
	}
	defer sdk.stop()
	quiet, err := startSDKDriver(d.addr, img, cpu, memory, true)
	if err != nil {
		return err
	}
	defer quiet.stop()
	c, err := client.New("http://" + d.addr)
	if err != nil {
		return err
	}
	// Once each, untimed: Python's imports, the first connections; the
	// Go client's first, to make the image outside the SDK's wait.
	if _, err := goCreateExec(c, api.CreateSandboxRequest{Image: img, CPU: cpu, Memory: memory}, execdTrue); err != nil {
		return err
	}
	if _, err := sdk.once(); err != nil {
		return err
	}
	if _, err := quiet.once(); err != nil {
		return err
	}
	var ours, theirs, theirsQuiet, wire, ratios, quietRatios []time.Duration
	for i := range n {
		steps := []func() error{
			func() error {
				t, id, err := replaySDK(d.hc, d.addr, img, cpu, memory)
				wire = append(wire, t)
				if id != "" {
					if derr := d.delete(id); err == nil {
						err = derr
					}
				}
				return err
			},
			func() error {
				t, err := sdk.once()
				theirs = append(theirs, t)
				return err
			},
			func() error {
				t, err := goCreateExec(c, api.CreateSandboxRequest{Image: img, CPU: cpu, Memory: memory}, execdTrue)
				ours = append(ours, t)
				return err
			},
			func() error {
				t, err := quiet.once()
				theirsQuiet = append(theirsQuiet, t)
				return err
			},
		}
		if i%2 == 1 { // alternate who goes first
			steps[1], steps[3] = steps[3], steps[1]
		}
		for _, step := range steps {
			if before != nil {
				if err := before(); err != nil {
					return err
				}
			}
			if err := step(); err != nil {
				return fmt.Errorf("opensandbox %s: %w", name, err)
			}
		}
		ratios = append(ratios, time.Duration(float64(time.Millisecond)*float64(theirs[i])/float64(ours[i])))
		quietRatios = append(quietRatios, time.Duration(float64(time.Millisecond)*float64(theirsQuiet[i])/float64(ours[i])))
	}
	st, so, sw, sr := summarize(theirs), summarize(ours), summarize(wire), summarize(ratios)
	sq, sqr := summarize(theirsQuiet), summarize(quietRatios)
	fmt.Printf("%-34s p50 %s p90 %s p95 %s   | Go client create → exec bash -c true p50 %s p95 %s | ratio per iteration p50 %.2fx | target ≤ 1.3x, ≤ 100 ms p50 warm | %s\n",
		"OpenSandbox SDK create → run, "+name, ms(st.p50), ms(st.p90), ms(st.p95), ms(so.p50), ms(so.p95),
		float64(sr.p50)/float64(time.Millisecond), stockOpenSandbox)
	fmt.Printf("%-34s p50 %s p90 %s p95 %s   | ratio per iteration p50 %.2fx | the SDK's own report of each create (a new HTTPS client per create) turned off\n",
		"  the SDK, OPENSANDBOX_DISABLE_METRICS=1", ms(sq.p50), ms(sq.p90), ms(sq.p95), float64(sqr.p50)/float64(time.Millisecond))
	fmt.Printf("%-34s p50 %s p90 %s p95 %s   | the server's share of the SDK's figure; the rest is the SDK's own work | %.2fx the Go client's p50\n",
		"  its HTTP exchanges, by Go", ms(sw.p50), ms(sw.p90), ms(sw.p95), float64(sw.p50)/float64(so.p50))
	return nil
}

// benchOpenSandboxOnly is -opensandbox-only: benchOpenSandbox on a daemon
// and one with a warm pool, after a create that builds img.
func benchOpenSandboxOnly(n int, img string) error {
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
	fmt.Printf("agent2env OpenSandbox benchmarks (%s, %d iterations; ratios are the SDK's / our Go client's)\n\n", img, n)
	id, err := d.create(img) // the first create may build the image
	if err != nil {
		return err
	}
	if err := d.delete(id); err != nil {
		return err
	}
	return benchOpenSandbox(d, warm, n, img)
}
