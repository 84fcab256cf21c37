package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// wireRecorder is a reverse proxy between the stock OpenSandbox clients
// and a daemon that checks OpenSandbox's wire rules (docs/opensandbox.md
// §11) on every exchange as it ends: a create answers 202; an endpoint
// has no scheme and no trailing slash; an error body is JSON with both
// code and message; an event stream is single-line JSON objects, each
// with a type and an integer timestamp, init first and, for a run,
// execution_complete or error last. The Host header is kept, so the
// endpoints the daemon hands out lead back through the proxy and execd's
// exchanges are checked too: the daemon must take the proxy's address as
// its public URL. It is safe for concurrent use.
type wireRecorder struct {
	addr string
	srv  *httptest.Server
	to   *url.URL

	mu         sync.Mutex
	violations []string
	seen       map[string]int // exchanges checked, by kind
}

// maxRecorded bounds the body kept of one exchange: the tests move small
// files.
const maxRecorded = 16 << 20

// newWireRecorder makes a recording proxy, closed with the test, which
// listens at its addr at once and serves once started.
func newWireRecorder(t *testing.T) *wireRecorder {
	t.Helper()
	w := &wireRecorder{seen: map[string]int{}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(w.to)
			r.Out.Host = r.In.Host
			// The request body is read whole before it is sent on. The
			// server ends an HTTP/1 request's body once the response
			// begins; streamed through, the transport's last read of it
			// could come after the daemon's first event had passed, fail,
			// and have the transport drop the connection midway through
			// the stream (seen as "use of closed network connection" and
			// cut streams, now and then).
			if r.In.Body != nil && r.In.Body != http.NoBody {
				b, err := io.ReadAll(r.In.Body)
				if err != nil {
					w.fail(r.In.Method+" "+r.In.URL.Path, "read the request body: "+err.Error())
				}
				r.Out.Body, r.Out.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
				r.Out.TransferEncoding = nil
			}
		},
		FlushInterval: -1, // event streams pass as they are written
		ModifyResponse: func(resp *http.Response) error {
			resp.Body = &recordedBody{ReadCloser: resp.Body, done: func(body []byte) { w.check(resp, body) }}
			return nil
		},
	}
	w.srv = httptest.NewUnstartedServer(proxy)
	t.Cleanup(w.srv.Close)
	w.addr = w.srv.Listener.Addr().String()
	return w
}

// start serves, forwarding to the daemon at target (host:port).
func (w *wireRecorder) start(target string) {
	w.to = &url.URL{Scheme: "http", Host: target}
	w.srv.Start()
}

// recordedBody keeps what is read of a response body and hands it to done
// when it is closed.
type recordedBody struct {
	io.ReadCloser
	buf  bytes.Buffer
	done func([]byte)
	once sync.Once
}

func (b *recordedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.buf.Len() < maxRecorded {
		b.buf.Write(p[:n])
	}
	return n, err
}

func (b *recordedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.done(b.buf.Bytes()) })
	return err
}

var (
	createPath   = regexp.MustCompile(`^/v1/sandboxes$`)
	endpointPath = regexp.MustCompile(`^/v1/sandboxes/[^/]+/endpoints/\d+$`)
	// runPath are the streams of a run: init first, its end last.
	runPath = regexp.MustCompile(`/execd/(command|code|session/[^/]+/run)$`)
)

// check checks one exchange, whose response body was body.
func (w *wireRecorder) check(resp *http.Response, body []byte) {
	req := resp.Request
	what := req.Method + " " + req.URL.Path
	var bad []string
	kind := ""
	switch {
	case req.Method == http.MethodPost && createPath.MatchString(req.URL.Path) && resp.StatusCode < 300:
		kind = "create"
		if resp.StatusCode != http.StatusAccepted {
			bad = append(bad, fmt.Sprintf("a create answered %d, not 202", resp.StatusCode))
		}
	case req.Method == http.MethodGet && endpointPath.MatchString(req.URL.Path) && resp.StatusCode == http.StatusOK:
		kind = "endpoint"
		var ep struct {
			Endpoint string `json:"endpoint"`
		}
		if err := json.Unmarshal(body, &ep); err != nil || ep.Endpoint == "" {
			bad = append(bad, fmt.Sprintf("endpoint body %q: %v", body, err))
		} else if strings.Contains(ep.Endpoint, "://") || strings.HasSuffix(ep.Endpoint, "/") {
			bad = append(bad, fmt.Sprintf("endpoint %q has a scheme or a trailing slash", ep.Endpoint))
		}
	case resp.StatusCode >= 400 && req.Method != http.MethodHead:
		kind = "error"
		var eb map[string]any
		if err := json.Unmarshal(body, &eb); err != nil {
			bad = append(bad, fmt.Sprintf("error body %q is not JSON: %v", body, err))
		} else if _, ok := eb["code"].(string); !ok {
			bad = append(bad, fmt.Sprintf("error body %s has no string code", body))
		} else if _, ok := eb["message"].(string); !ok {
			bad = append(bad, fmt.Sprintf("error body %s has no string message", body))
		}
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && runPath.MatchString(req.URL.Path):
		kind = "stream"
		bad = append(bad, checkStream(body)...)
	}
	w.mu.Lock()
	if kind != "" {
		w.seen[kind]++
	}
	w.mu.Unlock()
	for _, b := range bad {
		w.fail(what, b)
	}
}

// fail records a violation in exchange what.
func (w *wireRecorder) fail(what, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, what+": "+why)
}

// checkStream checks the frames of a run's event stream.
func checkStream(body []byte) []string {
	var bad []string
	s := string(body)
	if !strings.HasSuffix(s, "\n\n") {
		bad = append(bad, fmt.Sprintf("stream does not end a frame: %q", tail(s)))
	}
	var types []string
	for _, frame := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		if strings.Contains(frame, "\n") {
			bad = append(bad, fmt.Sprintf("frame of more than one line: %q", frame))
			continue
		}
		dec := json.NewDecoder(strings.NewReader(frame))
		dec.UseNumber()
		var ev map[string]any
		if err := dec.Decode(&ev); err != nil {
			bad = append(bad, fmt.Sprintf("frame %q is not a JSON object: %v", frame, err))
			continue
		}
		typ, _ := ev["type"].(string)
		ts, ok := ev["timestamp"].(json.Number)
		if _, err := ts.Int64(); !ok || err != nil {
			bad = append(bad, fmt.Sprintf("frame %s has no integer timestamp", frame))
		}
		if typ == "" {
			bad = append(bad, fmt.Sprintf("frame %s has no type", frame))
		}
		if typ != "ping" {
			types = append(types, typ)
		}
	}
	switch {
	case len(types) == 0:
		bad = append(bad, "no event")
	case types[0] != "init":
		bad = append(bad, fmt.Sprintf("first event %s, not init", types[0]))
	case types[len(types)-1] != "execution_complete" && types[len(types)-1] != "error":
		bad = append(bad, fmt.Sprintf("last event %s, not execution_complete or error", types[len(types)-1]))
	}
	return bad
}

func tail(s string) string {
	if len(s) > 200 {
		return "…" + s[len(s)-200:]
	}
	return s
}

// assert fails t on any violation, and unless the proxy has checked an
// exchange of every kind (so that each rule was put to the test).
func (w *wireRecorder) assert(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.violations {
		t.Error(v)
	}
	for _, kind := range []string{"create", "endpoint", "error", "stream"} {
		if w.seen[kind] == 0 {
			t.Errorf("the proxy checked no %s exchange (seen: %v)", kind, w.seen)
		}
	}
	t.Logf("exchanges checked: %v", w.seen)
}
