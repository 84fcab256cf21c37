package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// e2bEnvdStart times the daemon's side of envd's process Start, without
// the Python SDK: n Starts of /bin/true sent by Go as the SDK sends them
// (Connect streaming, JSON envelopes, its headers), read to their end
// event, against n Executes of /bin/true through the Go client, on the
// same sandbox, interleaved, after one untimed of each. Its ratio is the
// surface's own cost over REST's exec (the agent's start, the access
// token's check, the Connect stream), which the SDK's figures hold
// together with the SDK's own.
func e2bEnvdStart(d *daemon, n int) (start, exec stats, err error) {
	url := "http://" + d.addr
	key := "e2b_" + fmt.Sprintf("%040x", 0)
	var sb struct{ SandboxID, EnvdAccessToken string }
	if err := e2bCall(d.hc, http.MethodPost, url+"/sandboxes", []byte(`{"templateID":"base","timeout":600}`), &sb,
		"X-API-KEY", key, "Content-Type", "application/json"); err != nil {
		return stats{}, stats{}, fmt.Errorf("create: %w", err)
	}
	defer e2bCall(d.hc, http.MethodDelete, url+"/sandboxes/"+sb.SandboxID, nil, nil, "X-API-KEY", key)
	msg := []byte(`{"process":{"cmd":"/bin/true","args":[],"envs":{}},"stdin":false}`)
	env := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(env[1:], uint32(len(msg)))
	copy(env[5:], msg)
	startOne := func() error {
		var body []byte
		err := e2bCall(d.hc, http.MethodPost, url+"/process.Process/Start", env, &body,
			"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-Access-Token", sb.EnvdAccessToken,
			"Content-Type", "application/connect+json", "Connect-Protocol-Version", "1",
			"Keepalive-Ping-Interval", "50", "Connect-Timeout-Ms", "60000", "Authorization", "Basic dXNlcjo=")
		if err == nil && !bytes.Contains(body, []byte(`"end"`)) {
			err = fmt.Errorf("process Start answered %q, without its end", body)
		}
		return err
	}
	c, err := client.New(url)
	if err != nil {
		return stats{}, stats{}, err
	}
	execOne := func() error {
		res, err := c.Sandbox.Execute(context.Background(), sb.SandboxID, api.ExecRequest{Command: []string{"/bin/true"}})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exec /bin/true exited %d", res.ExitCode)
		}
		return err
	}
	return interleave(n, startOne, execOne)
}

// interleave times n runs of a and n of b, alternated, after one untimed
// run of each.
func interleave(n int, a, b func() error) (as, bs stats, err error) {
	var ads, bds []time.Duration
	for i := range n + 1 {
		for _, step := range []struct {
			run func() error
			ds  *[]time.Duration
		}{{a, &ads}, {b, &bds}} {
			t := time.Now()
			if err := step.run(); err != nil {
				return stats{}, stats{}, err
			}
			if i > 0 {
				*step.ds = append(*step.ds, time.Since(t))
			}
		}
	}
	return summarize(ads), summarize(bds), nil
}

// e2bExecuteByGo times the daemon's side of the code interpreter's
// run_code("1"), without the Python SDK: n POST /execute of 1 sent by Go
// as the SDK's run_code sends them (its headers, its JSON body, the
// NDJSON answer read to its end), against n Executes of 1 through the Go
// client in the same context (the sandbox's default python context, the
// one run_code runs in), interleaved, after one untimed of each. Its
// ratio is the surface's own cost over REST's execute, which the SDK's
// run_code figure holds together with the SDK's own.
func e2bExecuteByGo(d *daemon, n int) (execute, goExec stats, err error) {
	url := "http://" + d.addr
	key := "e2b_" + fmt.Sprintf("%040x", 0)
	var sb struct{ SandboxID, EnvdAccessToken, TrafficAccessToken string }
	if err := e2bCall(d.hc, http.MethodPost, url+"/sandboxes", []byte(`{"templateID":"code-interpreter-v1","timeout":600}`), &sb,
		"X-API-KEY", key, "Content-Type", "application/json"); err != nil {
		return stats{}, stats{}, fmt.Errorf("create: %w", err)
	}
	defer e2bCall(d.hc, http.MethodDelete, url+"/sandboxes/"+sb.SandboxID, nil, nil, "X-API-KEY", key)
	// What e2b_code_interpreter's run_code sends (httpx's own headers
	// included) for run_code("1").
	hdr := []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49999",
		"X-Access-Token", sb.EnvdAccessToken, "E2B-Traffic-Access-Token", sb.TrafficAccessToken,
		"Content-Type", "application/json", "Accept", "*/*", "Accept-Encoding", "gzip, deflate",
		"User-Agent", "python-httpx/0.29.0"}
	body := []byte(`{"code":"1","context_id":null,"language":null,"env_vars":null}`)
	executeOne := func() error {
		var out []byte
		err := e2bCall(d.hc, http.MethodPost, url+"/execute", body, &out, hdr...)
		if err == nil && (!bytes.Contains(out, []byte(`"text":"1"`)) || !bytes.HasSuffix(out, []byte("{\"type\":\"end_of_execution\"}\n"))) {
			err = fmt.Errorf("/execute of 1 answered %q", out)
		}
		return err
	}
	// The first /execute makes the default context; the Go client runs in
	// that one.
	if err := executeOne(); err != nil {
		return stats{}, stats{}, err
	}
	var list []struct{ ID, Language string }
	if err := e2bCall(d.hc, http.MethodGet, url+"/contexts", nil, &list, hdr...); err != nil {
		return stats{}, stats{}, fmt.Errorf("list contexts: %w", err)
	}
	if len(list) != 1 || list[0].Language != api.LanguagePython {
		return stats{}, stats{}, fmt.Errorf("the sandbox has contexts %+v, want its default python one", list)
	}
	c, err := client.New(url)
	if err != nil {
		return stats{}, stats{}, err
	}
	goOne := func() error {
		res, err := c.Contexts().Execute(context.Background(), list[0].ID, api.ExecuteRequest{Code: "1"})
		if err == nil && res.Result != "1" {
			err = fmt.Errorf("execute 1 gave %q", res.Result)
		}
		return err
	}
	return interleave(n, executeOne, goOne)
}

// e2bCall sends one request with headers hdr (name, value pairs) and
// decodes its JSON answer into out (a *[]byte takes it raw; nil: none).
func e2bCall(hc *http.Client, method, url string, body []byte, out any, hdr ...string) error {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s %s", method, url, resp.Status, strings.TrimSpace(string(b)))
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *[]byte:
		*o = b
		return nil
	default:
		return json.Unmarshal(b, out)
	}
}
