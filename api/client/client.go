// Package client is the Go SDK for the agent2env REST API. It speaks the
// wire contract of package api and imports nothing of the server, so
// programs that drive sandboxes depend on the api module alone.
//
// A Client is made with New (or FromEnv) and is safe for concurrent use.
// Its services group the endpoints. Those of the LiteBoxd API are fields,
// as in the LiteBoxd SDK: Sandbox (sandboxes: their lifecycle, pause and
// resume, commands, files, logs and terminals), Image, Template, Prepull
// and ImportExport. The others are methods that return their service:
// Contexts() (code-interpreter contexts), Sessions() (sessions),
// Snapshots() (sandboxes saved with their memory, and sandboxes restored
// or forked from them), Runs() (task runs), LLM() (the LLM proxy's
// archive) and LLMKeys() (per-run LLM keys). A few calls are on the Client
// itself: Health, Version, Capabilities and Stats.
//
//	c, err := client.New("http://127.0.0.1:8080", client.WithToken(token))
//	sb, err := c.Sandbox.Create(ctx, api.CreateSandboxRequest{Image: "agent2env/python"})
//	sb, err = c.Sandbox.WaitForReady(ctx, sb.ID, 0)
//	res, err := c.Sandbox.Execute(ctx, sb.ID, api.ExecRequest{Command: []string{"python3", "-V"}})
//
// Waits (WaitForReady, WaitForCompletion) are bounded by their context: a
// timeout is an error wrapping context.DeadlineExceeded, so the SDK has no
// timeout error type of its own.
//
// Failed requests return a *APIError carrying the daemon's code, message
// and details, which errors.Is matches against the sentinel classes
// (ErrNotFound, ErrAlreadyExists, ...): the daemon's error classes, told
// apart by the wire code (by the HTTP status when the code is unknown). A
// call the client refuses before sending it, such as one with an empty id,
// returns an error that matches ErrInvalidArgument as well.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
)

// Environment variables FromEnv reads, and the URL it falls back to.
// Clients written for the session API the daemon is compatible with find
// it by that API's variables too, MSB_SERVER_URL and MSB_API_KEY, and
// clients of the code-interpreter context API by SANDBOX_BASE_URL (and
// SANDBOX_TIMEOUT, see TimeoutFromEnv).
const (
	EnvURL     = "AGENT2ENV_URL"
	EnvToken   = "AGENT2ENV_TOKEN"
	DefaultURL = "http://127.0.0.1:8080"

	EnvMSBURL     = "MSB_SERVER_URL"
	EnvMSBKey     = "MSB_API_KEY"
	EnvSandboxURL = "SANDBOX_BASE_URL"
	EnvTimeout    = "SANDBOX_TIMEOUT"
)

// apiPrefix is where the versioned API lives below the base URL.
const apiPrefix = "/api/v1"

// Client talks to one agent2env daemon. It is safe for concurrent use and
// must be made with New or FromEnv.
type Client struct {
	// Sandbox holds the sandbox endpoints.
	Sandbox *SandboxService
	// Image holds the image endpoints.
	Image *ImageService
	// Template holds the template endpoints.
	Template *TemplateService
	// Prepull holds the image prepull endpoints.
	Prepull *PrepullService
	// ImportExport holds the template YAML import and export endpoints.
	ImportExport *ImportExportService

	base   *url.URL // scheme, host and any path prefix, without /api/v1
	hc     *http.Client
	header http.Header // sent with every request
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests with hc instead of
// http.DefaultClient (a nil hc changes nothing). Streaming calls last as
// long as the operation they follow, so hc should not set a Timeout;
// bound calls with their context.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithToken sends token as a bearer token. An empty token sends none.
func WithToken(token string) Option {
	return func(c *Client) {
		if token == "" {
			c.header.Del("Authorization")
			return
		}
		c.header.Set("Authorization", "Bearer "+token)
	}
}

// WithHeader sends the header key: value with every request.
func WithHeader(key, value string) Option {
	return func(c *Client) { c.header.Add(key, value) }
}

// WithUserAgent replaces the default User-Agent.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.header.Set("User-Agent", ua) }
}

// New returns a Client for the daemon at baseURL, such as
// http://127.0.0.1:8080. A trailing /api/v1 is accepted and ignored; any
// other path is kept as a prefix, for daemons behind a reverse proxy.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return nil, wrapf(err, "parse agent2env url")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("agent2env url %q: want http://host:port or https://host:port", baseURL)
	}
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), apiPrefix)
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	c := &Client{base: u, hc: http.DefaultClient, header: http.Header{}}
	c.header.Set("User-Agent", "agent2env-go-client")
	for _, o := range opts {
		o(c)
	}
	c.Sandbox = &SandboxService{c: c}
	c.Image = &ImageService{c: c}
	c.Template = &TemplateService{c: c}
	c.Prepull = &PrepullService{c: c}
	c.ImportExport = &ImportExportService{c: c}
	return c, nil
}

// FromEnv returns a Client for the daemon named by AGENT2ENV_URL, else
// MSB_SERVER_URL, else SANDBOX_BASE_URL (default http://127.0.0.1:8080),
// with the bearer token AGENT2ENV_TOKEN, else MSB_API_KEY, if set. opts
// apply after those and so override them.
func FromEnv(opts ...Option) (*Client, error) {
	base := firstEnv(EnvURL, EnvMSBURL, EnvSandboxURL)
	if base == "" {
		base = DefaultURL
	}
	return New(base, append([]Option{WithToken(firstEnv(EnvToken, EnvMSBKey))}, opts...)...)
}

// firstEnv returns the first of the variables that is set and not empty.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// TimeoutFromEnv returns SANDBOX_TIMEOUT (the code-interpreter context
// API's variable), the seconds an execution may take when the caller gives
// no timeout: a number of seconds or a duration such as 1m30s, as the CLI
// and the Python SDK read it; false when it is unset or neither, or not
// positive.
func TimeoutFromEnv() (float64, bool) {
	s := strings.TrimSpace(os.Getenv(EnvTimeout))
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		d, derr := time.ParseDuration(s)
		v, err = d.Seconds(), derr
	}
	if err != nil || v <= 0 || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// URL returns the absolute URL of path (such as "/mcp") below the base
// URL.
func (c *Client) URL(path string) string { return c.base.String() + path }

// HTTPClient returns an http.Client that sends the Client's headers (its
// token) with every request, for the endpoints this package does not wrap,
// such as the MCP endpoint.
func (c *Client) HTTPClient() *http.Client {
	base := c.hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	return &http.Client{Transport: headerTransport{base: base, header: c.header}, Jar: c.hc.Jar}
}

// headerTransport adds header to every request that lacks it.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, vs := range t.header {
		if req.Header.Get(k) == "" {
			req.Header[k] = vs
		}
	}
	return t.base.RoundTrip(req)
}

// Health checks that the daemon answers GET /health.
func (c *Client) Health(ctx context.Context) error {
	resp, err := c.send(ctx, http.MethodGet, "/health", nil, nil, "")
	if err != nil {
		return wrapf(err, "health check")
	}
	resp.Body.Close()
	return nil
}

// Version returns the daemon's version (GET /api/v1/version).
func (c *Client) Version(ctx context.Context) (api.Version, error) {
	var v api.Version
	if err := c.doJSON(ctx, http.MethodGet, "/version", nil, &v); err != nil {
		return api.Version{}, wrapf(err, "get daemon version")
	}
	return v, nil
}

// send makes a request to path (already escaped, below the base URL) and
// returns the response when its status is 2xx; otherwise it consumes the
// body into an *APIError.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body io.Reader, contentType string) (*http.Response, error) {
	u, err := url.Parse(c.base.String() + path)
	if err != nil {
		return nil, wrapf(err, "build request url")
	}
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, wrapf(err, "build request")
	}
	req.Header = c.header.Clone()
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

// jsonBody encodes v as a request body.
func jsonBody(v any) (io.Reader, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, wrapf(err, "encode request")
	}
	return bytes.NewReader(b), nil
}

// pageQuery returns the query parameters of a list's page: limit (0:
// the whole list), cursor ("": the first page) and order ("": the
// daemon's default), leaving out the zero ones.
func pageQuery(limit int, cursor string, order api.Order) url.Values {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if order != "" {
		q.Set("order", string(order))
	}
	return q
}

// doJSON sends in (unless nil) as a JSON body to the API path and decodes
// the response into out (unless nil).
func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	return c.doJSONQuery(ctx, method, path, nil, in, out)
}

// doJSONQuery is doJSON with a query string.
func (c *Client) doJSONQuery(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	var ct string
	if in != nil {
		var err error
		if body, err = jsonBody(in); err != nil {
			return err
		}
		ct = "application/json"
	}
	resp, err := c.send(ctx, method, apiPrefix+path, query, body, ct)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return wrapf(err, "decode response")
	}
	return nil
}

// getBytes returns the whole body answering GET path (below /api/v1).
func (c *Client) getBytes(ctx context.Context, path string, query url.Values) ([]byte, error) {
	resp, err := c.send(ctx, http.MethodGet, apiPrefix+path, query, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, wrapf(err, "read response")
	}
	return b, nil
}
