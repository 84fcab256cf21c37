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
	var starts, execs []time.Duration
	for i := range n + 1 {
		for _, step := range []struct {
			run func() error
			ds  *[]time.Duration
		}{{startOne, &starts}, {execOne, &execs}} {
			t := time.Now()
			if err := step.run(); err != nil {
				return stats{}, stats{}, err
			}
			if i > 0 {
				*step.ds = append(*step.ds, time.Since(t))
			}
		}
	}
	return summarize(starts), summarize(execs), nil
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
