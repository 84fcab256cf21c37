package opensandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

var now = time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)

// fakeSandboxes is the sandbox service in memory. Its list pages hold at
// most two sandboxes, so that the surface must follow cursors.
type fakeSandboxes struct {
	mu        sync.Mutex
	byID      map[string]*api.Sandbox
	order     []string
	created   []api.CreateSandboxRequest
	tenants   []string
	deleted   []string
	createErr error
	lists     int // List calls
}

func newFakeSandboxes(sbs ...api.Sandbox) *fakeSandboxes {
	f := &fakeSandboxes{byID: map[string]*api.Sandbox{}}
	for _, sb := range sbs {
		f.add(sb)
	}
	return f
}

func (f *fakeSandboxes) add(sb api.Sandbox) {
	f.byID[sb.ID] = &sb
	f.order = append(f.order, sb.ID)
}

func (f *fakeSandboxes) CreateAndWait(ctx context.Context, req api.CreateSandboxRequest, _ time.Duration) (*api.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, req)
	f.tenants = append(f.tenants, auth.TenantOf(ctx))
	if f.createErr != nil {
		return nil, f.createErr
	}
	sb := api.Sandbox{ID: fmt.Sprintf("sb-%d", len(f.created)), Image: req.Image, Status: api.StatusPending,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: api.Never, AccessToken: "tok", Metadata: maps.Clone(req.Metadata)}
	if req.TTL != nil && *req.TTL > 0 {
		sb.TTL, sb.ExpiresAt = *req.TTL, now.Add(time.Duration(*req.TTL)*time.Second)
	}
	f.add(sb)
	return &sb, nil
}

func (f *fakeSandboxes) Get(_ context.Context, id string) (*api.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.byID[id]
	if !ok {
		return nil, errdefs.WithCode(errdefs.NotFound("sandbox %s not found", id), api.CodeSandboxNotFound)
	}
	out := *sb
	return &out, nil
}

// selected returns the ids opts' filters select, in opts' order.
func (f *fakeSandboxes) selected(opts service.ListOptions) []string {
	out := f.matching(opts)
	if opts.Order == api.OrderDesc {
		slices.Reverse(out)
	}
	return out
}

// matching returns the ids opts' filters select, oldest first.
func (f *fakeSandboxes) matching(opts service.ListOptions) []string {
	var out []string
	for _, id := range f.order {
		sb := f.byID[id]
		if len(opts.Statuses) > 0 && !slices.Contains(opts.Statuses, sb.Status) {
			continue
		}
		match := true
		for k, v := range opts.Metadata {
			if got, ok := sb.Metadata[k]; !ok || got != v {
				match = false
			}
		}
		if match {
			out = append(out, id)
		}
	}
	return out
}

func (f *fakeSandboxes) List(_ context.Context, opts service.ListOptions) (*api.SandboxList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	ids := f.selected(opts)
	start := 0
	if opts.Cursor != "" {
		start, _ = strconv.Atoi(opts.Cursor)
	}
	end := min(start+min(*opts.Limit, 2), len(ids))
	out := &api.SandboxList{Items: []api.Sandbox{}}
	for _, id := range ids[start:end] {
		out.Items = append(out.Items, *f.byID[id])
	}
	if end < len(ids) {
		out.NextCursor = strconv.Itoa(end)
	}
	return out, nil
}

func (f *fakeSandboxes) Count(_ context.Context, opts service.ListOptions) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.selected(opts)), nil
}

func (f *fakeSandboxes) Renew(_ context.Context, id string, at time.Time) (*api.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.byID[id]
	if !ok {
		return nil, errdefs.WithCode(errdefs.NotFound("sandbox %s not found", id), api.CodeSandboxNotFound)
	}
	sb.ExpiresAt, sb.TTL = at, int(at.Sub(sb.CreatedAt)/time.Second)
	out := *sb
	return &out, nil
}

// PatchMetadata merges patch; a patch of key "fail" fails.
func (f *fakeSandboxes) PatchMetadata(_ context.Context, id string, patch map[string]*string) (*api.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.byID[id]
	if !ok {
		return nil, errdefs.WithCode(errdefs.NotFound("sandbox %s not found", id), api.CodeSandboxNotFound)
	}
	if _, ok := patch["fail"]; ok {
		return nil, errdefs.Unavailable("metadata store is down")
	}
	md := maps.Clone(sb.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	for k, v := range patch {
		if v == nil {
			delete(md, k)
		} else {
			md[k] = *v
		}
	}
	sb.Metadata = md
	out := *sb
	return &out, nil
}

// Pause and Resume move a sandbox between running and paused; from any
// other status they are 409.
func (f *fakeSandboxes) Pause(_ context.Context, id string) (*api.Sandbox, error) {
	return f.move(id, api.StatusRunning, api.StatusPaused)
}

func (f *fakeSandboxes) Resume(_ context.Context, id string) (*api.Sandbox, error) {
	return f.move(id, api.StatusPaused, api.StatusRunning)
}

func (f *fakeSandboxes) move(id string, from, to api.SandboxStatus) (*api.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.byID[id]
	switch {
	case !ok:
		return nil, errdefs.WithCode(errdefs.NotFound("sandbox %s not found", id), api.CodeSandboxNotFound)
	case sb.Status != from:
		return nil, errdefs.Precondition("sandbox %s is %s", id, sb.Status)
	}
	sb.Status = to
	out := *sb
	return &out, nil
}

func (f *fakeSandboxes) Delete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.byID[id]; !ok {
		return errdefs.WithCode(errdefs.NotFound("sandbox %s not found", id), api.CodeSandboxNotFound)
	}
	delete(f.byID, id)
	f.order = slices.DeleteFunc(f.order, func(s string) bool { return s == id })
	f.deleted = append(f.deleted, id)
	return nil
}

const goodKey = "a2e_0123456789abcdef"

// setup is a handler over fakes.
type setup struct {
	h     *Handler
	sbs   *fakeSandboxes
	snaps *fakeSnapshots
}

// newSetup makes a handler over sandboxes sbs.
func newSetup(t *testing.T, sbs ...api.Sandbox) *setup {
	t.Helper()
	keys, err := auth.NewKeys(goodKey)
	if err != nil {
		t.Fatal(err)
	}
	s := &setup{sbs: newFakeSandboxes(sbs...), snaps: newFakeSnapshots()}
	cfg := Config{Sandboxes: s.sbs, Snapshots: s.snaps, Keys: keys, RequireKey: true, PublicHost: "daemon.example:8080",
		GatewayPrefix: "/api/v1/sandbox/", Now: func() time.Time { return now }, CreateWait: -1}
	if s.h, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	return s
}

// do sends a request with the good key (unless hdr names the key) and
// returns the answer with its JSON body decoded. Every error answer must
// be {code, message}.
func (s *setup) do(t *testing.T, method, target, body string, hdr map[string]string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(HeaderAPIKey, goodKey)
	for k, v := range hdr {
		if k == "Host" {
			if v != "" {
				req.Host = v
			}
			continue
		}
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: body is not a JSON object: %v: %s", method, target, err, rec.Body)
		}
		if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: Content-Type %q", method, target, rec.Header().Get("Content-Type"))
		}
	}
	if rec.Code >= 300 {
		code, _ := out["code"].(string)
		msg, _ := out["message"].(string)
		if code == "" || msg == "" || len(out) != 2 {
			t.Errorf("%s %s: error body %s, want exactly {code, message}", method, target, rec.Body)
		}
	}
	if rec.Header().Get("X-Request-ID") == "" {
		t.Errorf("%s %s: no X-Request-ID", method, target)
	}
	return rec, out
}

// expect is do with the good key, failing the test unless the status is
// want.
func (s *setup) expect(t *testing.T, method, target, body string, want int) map[string]any {
	t.Helper()
	rec, out := s.do(t, method, target, body, nil)
	if rec.Code != want {
		t.Fatalf("%s %s: status %d %s, want %d", method, target, rec.Code, rec.Body, want)
	}
	return out
}

// sdkCreate is the body the Python SDK 1.1.1 sends for
// Sandbox.create("ubuntu").
const sdkCreate = `{"image":{"uri":"ubuntu"},"timeout":600,"resourceLimits":{"cpu":"1","memory":"2Gi"},` +
	`"entrypoint":["tail","-f","/dev/null"],"secureAccess":false}`

func TestAuth(t *testing.T) {
	s := newSetup(t)
	for _, tc := range []struct {
		name, key  string
		wantStatus int
		wantCode   string
	}{
		{"no key", "", http.StatusUnauthorized, "MISSING_API_KEY"},
		{"wrong key", "a2e_not-the-right-one", http.StatusUnauthorized, "INVALID_API_KEY"},
		{"good key", goodKey, http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, body := s.do(t, "GET", "/v1/sandboxes", "", map[string]string{HeaderAPIKey: tc.key})
			if rec.Code != tc.wantStatus || (tc.wantCode != "" && body["code"] != tc.wantCode) {
				t.Fatalf("got %d %s, want %d %s", rec.Code, rec.Body, tc.wantStatus, tc.wantCode)
			}
		})
	}
	// The key's tenant is the request's.
	if rec, _ := s.do(t, "POST", "/v1/sandboxes", sdkCreate, nil); rec.Code != http.StatusAccepted {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	if got := s.sbs.tenants[0]; got != auth.Tenant(goodKey) {
		t.Errorf("tenant %q, want the key's", got)
	}
}

func TestAuthNotRequired(t *testing.T) {
	s := newSetup(t)
	s.h.cfg.RequireKey = false
	if rec, _ := s.do(t, "GET", "/v1/sandboxes", "", map[string]string{HeaderAPIKey: ""}); rec.Code != http.StatusOK {
		t.Fatalf("without keys: %d %s", rec.Code, rec.Body)
	}
}

func TestCreate(t *testing.T) {
	ttl := func(n int) *int { return &n }
	// probe is env with the code-interpreter SDK's readiness probe, which
	// every sandbox made here gets.
	probe := func(env map[string]string) map[string]string {
		out := map[string]string{service.JupyterProbeEnv: "127.0.0.1:44771"}
		for k, v := range env {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		body       string
		wantStatus int
		wantReq    *api.CreateSandboxRequest
		wantInMsg  string
		check      func(t *testing.T, body map[string]any, s *setup)
	}{
		{
			name: "python sdk quickstart", body: sdkCreate, wantStatus: http.StatusAccepted,
			wantReq: &api.CreateSandboxRequest{Image: "ubuntu", CPU: "1", Memory: "2Gi", TTL: ttl(600), Env: probe(nil)},
			check: func(t *testing.T, body map[string]any, _ *setup) {
				if body["id"] != "sb-1" || body["status"].(map[string]any)["state"] != "Pending" {
					t.Errorf("id or state: %v", body)
				}
				if body["expiresAt"] != "2026-12-04T15:10:00Z" || body["createdAt"] != "2026-12-04T15:00:00Z" {
					t.Errorf("times: %v", body)
				}
				if _, ok := body["image"]; ok {
					t.Errorf("the create response has no image: %v", body)
				}
				if fmt.Sprint(body["entrypoint"]) != "[tail -f /dev/null]" {
					t.Errorf("entrypoint: %v", body["entrypoint"])
				}
			},
		},
		{
			name: "no expiry: expiresAt absent", wantStatus: http.StatusAccepted,
			body:    `{"image":{"uri":"ubuntu"},"timeout":null,"env":{"A":"1"}}`,
			wantReq: &api.CreateSandboxRequest{Image: "ubuntu", TTL: ttl(0), Env: probe(map[string]string{"A": "1"})},
			check: func(t *testing.T, body map[string]any, _ *setup) {
				if _, ok := body["expiresAt"]; ok {
					t.Errorf("expiresAt present: %v", body)
				}
			},
		},
		{
			name: "timeout omitted: no expiry", body: `{"image":{"uri":"ubuntu"}}`, wantStatus: http.StatusAccepted,
			wantReq: &api.CreateSandboxRequest{Image: "ubuntu", TTL: ttl(0), Env: probe(nil)},
		},
		{
			name: "code interpreter quickstart", wantStatus: http.StatusAccepted,
			body: `{"image":{"uri":"opensandbox/code-interpreter:v1.1.0"},"timeout":600,` +
				`"entrypoint":["/opt/code-interpreter/code-interpreter.sh"],"env":{"PYTHON_VERSION":"3.11"}}`,
			// The image answers the probe itself (its own environment).
			wantReq: &api.CreateSandboxRequest{Image: "agent2env/code-interpreter", TTL: ttl(600),
				Env: map[string]string{"PYTHON_VERSION": "3.11"}},
		},
		{
			// No env: a warm pool of the image can serve it.
			name: "code interpreter image, no env", wantStatus: http.StatusAccepted,
			body:    `{"image":{"uri":"agent2env/code-interpreter"},"timeout":60,"env":{}}`,
			wantReq: &api.CreateSandboxRequest{Image: "agent2env/code-interpreter", TTL: ttl(60), Env: map[string]string{}},
		},
		{
			name: "template with overrides", body: `{"templateId":"py","timeout":120,"resourceLimits":{"cpu":"2"}}`,
			wantStatus: http.StatusAccepted,
			wantReq:    &api.CreateSandboxRequest{Template: "py", Overrides: &api.SandboxOverrides{CPU: "2", TTL: ttl(120), Env: probe(nil)}},
		},
		{
			name: "metadata kept", body: `{"image":{"uri":"ubuntu"},"metadata":{"project":"apollo"}}`,
			wantStatus: http.StatusAccepted,
			wantReq:    &api.CreateSandboxRequest{Image: "ubuntu", TTL: ttl(0), Env: probe(nil), Metadata: map[string]string{"project": "apollo"}},
			check: func(t *testing.T, body map[string]any, s *setup) {
				if fmt.Sprint(body["metadata"]) != "map[project:apollo]" {
					t.Errorf("metadata: %v", body["metadata"])
				}
			},
		},
		{
			name: "own probe value wins", body: `{"image":{"uri":"ubuntu"},"env":{"AGENT2ENV_JUPYTER_PROBE":"127.0.0.1:9"}}`,
			wantStatus: http.StatusAccepted,
			wantReq:    &api.CreateSandboxRequest{Image: "ubuntu", TTL: ttl(0), Env: map[string]string{service.JupyterProbeEnv: "127.0.0.1:9"}},
		},
		{name: "metadata value a label cannot be", body: `{"image":{"uri":"ubuntu"},"metadata":{"a":"Demo Test"}}`,
			wantStatus: http.StatusBadRequest, wantInMsg: "metadata"},
		{name: "reserved metadata key", body: `{"image":{"uri":"ubuntu"},"metadata":{"opensandbox.io/x":"b"}}`,
			wantStatus: http.StatusBadRequest, wantInMsg: "reserved"},
		{name: "no image", body: `{"timeout":60}`, wantStatus: http.StatusBadRequest, wantInMsg: "image.uri"},
		{name: "image auth", body: `{"image":{"uri":"x","auth":{"username":"u","password":"p"}}}`,
			wantStatus: http.StatusBadRequest, wantInMsg: "image.auth"},
		{name: "gpu", body: `{"image":{"uri":"x"},"resourceLimits":{"gpu":"1"}}`,
			wantStatus: http.StatusBadRequest, wantInMsg: "resourceLimits.gpu"},
		// Below 10m a runtime refuses to start the sandbox: refused at
		// create, naming the field and the minimum.
		{name: "cpu below the minimum", body: `{"image":{"uri":"x"},"resourceLimits":{"cpu":"9m"}}`,
			wantStatus: http.StatusBadRequest, wantInMsg: "resourceLimits.cpu: cpu 9m is below the 10m minimum"},
		{name: "cpu not a quantity", body: `{"templateId":"py","resourceLimits":{"cpu":"lots"}}`,
			wantStatus: http.StatusBadRequest, wantInMsg: "resourceLimits.cpu"},
		{name: "main process", body: `{"image":{"uri":"nginx"},"entrypoint":["nginx","-g","daemon off;"]}`,
			wantStatus: http.StatusBadRequest, wantInMsg: "entrypoint"},
		{name: "network policy allowing domains", wantStatus: http.StatusAccepted,
			body: `{"image":{"uri":"x"},"networkPolicy":{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"},` +
				`{"action":"deny","target":"example.com"},{"action":"allow","target":"*.allowed.test"}]}}`,
			wantReq: &api.CreateSandboxRequest{Image: "x", TTL: ttl(0), Env: probe(nil),
				Network: &api.NetworkSpec{AllowedDomains: []string{"pypi.org", "*.allowed.test"}}}},
		{name: "network policy denying inside what it allows", wantStatus: http.StatusBadRequest, wantInMsg: "networkPolicy.egress[1]",
			body: `{"image":{"uri":"x"},"networkPolicy":{"egress":[{"action":"allow","target":"*.allowed.test"},{"action":"deny","target":"a.allowed.test"}]}}`},
		{name: "network policy with a CIDR", wantStatus: http.StatusBadRequest, wantInMsg: "networkPolicy.egress[0].target",
			body: `{"image":{"uri":"x"},"networkPolicy":{"egress":[{"action":"allow","target":"10.0.0.0/8"}]}}`},
		{name: "network policy with a port", wantStatus: http.StatusBadRequest, wantInMsg: "networkPolicy.egress[0].target",
			body: `{"image":{"uri":"x"},"networkPolicy":{"egress":[{"action":"allow","target":"pypi.org:443"}]}}`},
		// A target that is no host name could never match: refused,
		// naming the OpenSandbox field.
		{name: "network policy with a space in a target", wantStatus: http.StatusBadRequest, wantInMsg: "networkPolicy.egress[0].target",
			body: `{"image":{"uri":"x"},"networkPolicy":{"egress":[{"action":"allow","target":"a b"}]}}`},
		{name: "network policy with a bare wildcard", wantStatus: http.StatusBadRequest, wantInMsg: "networkPolicy.egress[1].target",
			body: `{"image":{"uri":"x"},"networkPolicy":{"egress":[{"action":"allow","target":"pypi.org"},{"action":"allow","target":"*"}]}}`},
		{name: "network policy with a wildcard inside", wantStatus: http.StatusBadRequest, wantInMsg: "networkPolicy.egress[0].target",
			body: `{"image":{"uri":"x"},"networkPolicy":{"egress":[{"action":"allow","target":"a.*.org"}]}}`},
		{name: "network policy with an empty label", wantStatus: http.StatusBadRequest, wantInMsg: "networkPolicy.egress[0].target",
			body: `{"image":{"uri":"x"},"networkPolicy":{"egress":[{"action":"allow","target":"pypi..org"}]}}`},
		{name: "network policy with names, a wildcard and an address", wantStatus: http.StatusAccepted,
			body: `{"image":{"uri":"x"},"networkPolicy":{"egress":[{"action":"allow","target":"PyPI.org."},{"action":"allow","target":"*.my_host.test"},{"action":"allow","target":"192.0.2.1"}]}}`},
		{name: "network policy's egress not a list", wantStatus: http.StatusBadRequest,
			wantInMsg: "networkPolicy: egress must be a JSON array (got object)",
			body:      `{"image":{"uri":"x"},"networkPolicy":{"egress":{"action":"allow"}}}`},
		{name: "network policy's unknown member", wantStatus: http.StatusBadRequest, wantInMsg: `networkPolicy: unknown field "ingress"`,
			body: `{"image":{"uri":"x"},"networkPolicy":{"ingress":[]}}`},
		{name: "network policy of a template", wantStatus: http.StatusBadRequest, wantInMsg: "networkPolicy",
			body: `{"templateId":"py","networkPolicy":{"egress":[{"action":"allow","target":"pypi.org"}]}}`},
		{name: "empty network policy", body: `{"image":{"uri":"x"},"networkPolicy":{}}`, wantStatus: http.StatusAccepted},
		{name: "deny-all network policy", body: `{"image":{"uri":"x"},"networkPolicy":{"defaultAction":"deny","egress":[{"action":"deny","target":"*.example.com"}]}}`,
			wantStatus: http.StatusAccepted},
		{name: "allow-all network policy", body: `{"image":{"uri":"x"},"networkPolicy":{"defaultAction":"allow"}}`,
			wantStatus: http.StatusAccepted,
			wantReq:    &api.CreateSandboxRequest{Image: "x", TTL: ttl(0), Env: probe(nil), Network: &api.NetworkSpec{AllowInternetAccess: true}}},
		{name: "allow-all network policy with a deny", wantStatus: http.StatusBadRequest, wantInMsg: "networkPolicy.egress[0]",
			body: `{"image":{"uri":"x"},"networkPolicy":{"defaultAction":"allow","egress":[{"action":"deny","target":"a.b"}]}}`},
		{name: "network policy's unknown default", wantStatus: http.StatusBadRequest, wantInMsg: "networkPolicy.defaultAction",
			body: `{"image":{"uri":"x"},"networkPolicy":{"defaultAction":"log"}}`},
		{name: "network policy of another shape", body: `{"image":{"uri":"x"},"networkPolicy":{"egress":[{"action":"deny","target":"a.b"}],"extra":1}}`,
			wantStatus: http.StatusBadRequest, wantInMsg: "networkPolicy"},
		{name: "volumes", body: `{"image":{"uri":"x"},"volumes":[{"name":"v","mountPath":"/data","host":{"path":"/srv"}}]}`,
			wantStatus: http.StatusBadRequest, wantInMsg: "volumes"},
		{name: "platform", body: `{"image":{"uri":"x"},"platform":{"os":"windows","arch":"amd64"}}`,
			wantStatus: http.StatusBadRequest, wantInMsg: "platform.os"},
		{name: "this platform", body: `{"image":{"uri":"x"},"platform":{"os":"linux","arch":"` + runtime.GOARCH + `"}}`,
			wantStatus: http.StatusAccepted},
		{name: "credential proxy", body: `{"image":{"uri":"x"},"credentialProxy":{"enabled":true}}`,
			wantStatus: http.StatusBadRequest, wantInMsg: "credentialProxy"},
		{name: "lifecycle hooks", body: `{"image":{"uri":"x"},"lifecycle":{"preStart":{}}}`,
			wantStatus: http.StatusBadRequest, wantInMsg: "lifecycle"},
		{name: "renew on access", body: `{"image":{"uri":"x"},"extensions":{"access.renew.extend.seconds":"600"}}`,
			wantStatus: http.StatusBadRequest, wantInMsg: "extensions"},
		{name: "negative timeout", body: `{"image":{"uri":"x"},"timeout":-5}`, wantStatus: http.StatusBadRequest, wantInMsg: "timeout"},
		{name: "fractional timeout", body: `{"image":{"uri":"x"},"timeout":1.5}`, wantStatus: http.StatusBadRequest, wantInMsg: "timeout"},
		{name: "not JSON", body: `{"image":`, wantStatus: http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetup(t)
			rec, body := s.do(t, "POST", "/v1/sandboxes", tc.body, nil)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if msg, _ := body["message"].(string); !strings.Contains(msg, tc.wantInMsg) {
				t.Errorf("message %q does not name %q", msg, tc.wantInMsg)
			}
			if rec.Code == http.StatusAccepted && rec.Header().Get("Location") != "/v1/sandboxes/sb-1" {
				t.Errorf("Location %q", rec.Header().Get("Location"))
			}
			if tc.wantReq != nil {
				if len(s.sbs.created) != 1 {
					t.Fatalf("creates: %v", s.sbs.created)
				}
				got, _ := json.Marshal(s.sbs.created[0])
				want, _ := json.Marshal(tc.wantReq)
				if string(got) != string(want) {
					t.Errorf("service request %s, want %s", got, want)
				}
			}
			if tc.wantStatus == http.StatusBadRequest && len(s.sbs.created) != 0 {
				t.Errorf("a refused request reached the service: %v", s.sbs.created)
			}
			if tc.check != nil {
				tc.check(t, body, s)
			}
		})
	}
}

func TestCreateServiceErrors(t *testing.T) {
	for _, tc := range []struct {
		err        error
		wantStatus int
		wantCode   string
	}{
		{errdefs.WithCode(errdefs.NotFound("image nope not found"), api.CodeImageNotFound), http.StatusNotFound, api.CodeImageNotFound},
		{errdefs.WithCode(errdefs.Invalid("cpu 0"), api.CodeInvalidRequest), http.StatusBadRequest, api.CodeInvalidRequest},
		{fmt.Errorf("disk on fire"), http.StatusInternalServerError, api.CodeInternal},
		{fmt.Errorf("%w: %w", service.ErrImageUnavailable, errdefs.Invalid("prepare image nope: not found")), http.StatusBadRequest, "IMAGE_NOT_AVAILABLE"},
		{fmt.Errorf("%w: no pids", service.ErrStartFailed), http.StatusInternalServerError, "PROVISIONING_ERROR"},
		// A start refused for the request's sake is the request's 400.
		{fmt.Errorf("%w: %w", service.ErrStartFailed, errdefs.Invalid("cpu limit 5m is below 10m")), http.StatusBadRequest, api.CodeInvalidRequest},
	} {
		t.Run(tc.wantCode, func(t *testing.T) {
			s := newSetup(t)
			s.sbs.createErr = tc.err
			rec, body := s.do(t, "POST", "/v1/sandboxes", sdkCreate, nil)
			if rec.Code != tc.wantStatus || body["code"] != tc.wantCode {
				t.Fatalf("got %d %s, want %d %s", rec.Code, rec.Body, tc.wantStatus, tc.wantCode)
			}
		})
	}
}

func TestCreateMediaType(t *testing.T) {
	s := newSetup(t)
	rec, body := s.do(t, "POST", "/v1/sandboxes", sdkCreate, map[string]string{"Content-Type": "text/plain"})
	if rec.Code != http.StatusUnsupportedMediaType || body["code"] != api.CodeUnsupportedMediaType {
		t.Fatalf("got %d %s, want 415", rec.Code, rec.Body)
	}
}

// sandbox returns a stored sandbox made at minute m.
func sandbox(id string, st api.SandboxStatus, m int) api.Sandbox {
	at := now.Add(time.Duration(m) * time.Minute)
	return api.Sandbox{ID: id, Image: "ubuntu", Status: st, CreatedAt: at, UpdatedAt: at, ExpiresAt: api.Never, AccessToken: "tok-" + id}
}

func TestGetDelete(t *testing.T) {
	s := newSetup(t, sandbox("a", api.StatusRunning, 0))
	s.sbs.byID["a"].Metadata = map[string]string{"team": "ml"}
	rec, body := s.do(t, "GET", "/v1/sandboxes/a", "", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("get: %d %s", rec.Code, rec.Body)
	}
	if body["image"].(map[string]any)["uri"] != "ubuntu" || body["status"].(map[string]any)["state"] != "Running" ||
		fmt.Sprint(body["metadata"]) != "map[team:ml]" {
		t.Errorf("get: %s", rec.Body)
	}
	if _, ok := body["expiresAt"]; ok {
		t.Errorf("a sandbox that never expires has an expiresAt: %s", rec.Body)
	}
	for _, tc := range []struct {
		method, target string
		wantStatus     int
	}{
		{"GET", "/v1/sandboxes/nope", http.StatusNotFound},
		{"DELETE", "/v1/sandboxes/nope", http.StatusNotFound},
		{"DELETE", "/v1/sandboxes/a", http.StatusNoContent},
		{"GET", "/v1/sandboxes/a", http.StatusNotFound},
	} {
		if rec, _ := s.do(t, tc.method, tc.target, "", nil); rec.Code != tc.wantStatus {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.target, rec.Code, rec.Body, tc.wantStatus)
		}
	}
}

func TestStates(t *testing.T) {
	for st, want := range map[api.SandboxStatus]string{
		api.StatusPending: "Pending", api.StatusRunning: "Running", api.StatusPaused: "Paused", api.StatusTerminating: "Stopping",
		api.StatusSucceeded: "Terminated", api.StatusFailed: "Failed", api.StatusUnknown: "Failed", "stopped": "Failed",
	} {
		if got := state(st); got != want {
			t.Errorf("state(%s) = %s, want %s", st, got, want)
		}
	}
}

func TestList(t *testing.T) {
	s := newSetup(t,
		sandbox("a", api.StatusRunning, 0), sandbox("b", api.StatusPending, 1), sandbox("c", api.StatusRunning, 2),
		sandbox("d", api.StatusFailed, 3), sandbox("e", api.StatusRunning, 4))
	s.sbs.byID["a"].Metadata = map[string]string{"project": "Apollo", "note": "Demo Test"}
	s.sbs.byID["c"].Metadata = map[string]string{"project": "Apollo"}
	for _, tc := range []struct {
		name, query string
		wantIDs     []string
		wantPage    string // page pageSize totalItems totalPages hasNextPage
		wantStatus  int
	}{
		{"all, newest first", "", []string{"e", "d", "c", "b", "a"}, "1 20 5 1 false", 200},
		{"page 2 of 2", "?page=2&pageSize=2", []string{"c", "b"}, "2 2 5 3 true", 200},
		{"last page", "?page=3&pageSize=2", []string{"a"}, "3 2 5 3 false", 200},
		{"past the end", "?page=9&pageSize=2", []string{}, "9 2 5 3 false", 200},
		{"states, any case", "?state=running&state=Failed", []string{"e", "d", "c", "a"}, "1 20 4 1 false", 200},
		{"a state agent2env has no sandbox in", "?state=Pausing", []string{}, "1 20 0 0 false", 200},
		// What would widen the list is refused.
		{"an unknown state", "?state=Sleeping", nil, "", 400},
		{"a known and an unknown state", "?state=Sleeping&state=PENDING", nil, "", 400},
		{"a query pair that cannot be decoded", "?metadata=%zz", nil, "", 400},
		{"a metadata key twice", "?metadata=project%3DApollo%26project%3DX", nil, "", 400},
		{"a metadata key twice, in two parameters", "?metadata=project%3DApollo&metadata=project%3DX", nil, "", 400},
		{"two metadata parameters, both matched", "?metadata=project%3DApollo&metadata=note%3DDemo%2520Test", []string{"a"}, "1 20 1 1 false", 200},
		// A page whose first item's position overflows: 400, not page 1.
		{"page that overflows", "?page=4611686018427387905&pageSize=4", nil, "", 400},
		{"the largest page", "?page=" + strconv.Itoa(maxPage) + "&pageSize=200", []string{}, strconv.Itoa(maxPage) + " 200 5 1 false", 200},
		// The SDK encodes each pair, then the whole value once more.
		{"metadata", "?metadata=project%3DApollo%26note%3DDemo%2520Test", []string{"a"}, "1 20 1 1 false", 200},
		{"metadata and state", "?metadata=project%3DApollo&state=Running", []string{"c", "a"}, "1 20 2 1 false", 200},
		{"page 0", "?page=0", nil, "", 400},
		{"pageSize too big", "?pageSize=201", nil, "", 400},
		{"pageSize not a number", "?pageSize=x", nil, "", 400},
		{"bad metadata", "?metadata=a%3D%25zz", nil, "", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, body := s.do(t, "GET", "/v1/sandboxes"+tc.query, "", nil)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantStatus != 200 {
				return
			}
			var resp listResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			ids := []string{}
			for _, it := range resp.Items {
				ids = append(ids, it.ID)
			}
			if !slices.Equal(ids, tc.wantIDs) {
				t.Errorf("ids %v, want %v", ids, tc.wantIDs)
			}
			p := resp.Pagination
			if got := fmt.Sprint(p.Page, p.PageSize, p.TotalItems, p.TotalPages, p.HasNextPage); got != tc.wantPage {
				t.Errorf("pagination %s, want %s", got, tc.wantPage)
			}
			if _, ok := body["items"].([]any); !ok {
				t.Errorf("items is not an array: %s", rec.Body)
			}
		})
	}
	// A page past the end, or states no sandbox can be in, read no list:
	// the count answers.
	s.sbs.lists = 0
	s.expect(t, "GET", "/v1/sandboxes?page=9&pageSize=2", "", 200)
	s.expect(t, "GET", "/v1/sandboxes?state=Resuming", "", 200)
	if s.sbs.lists != 0 {
		t.Errorf("%d list calls, want 0", s.sbs.lists)
	}
}

// TestPauseResume: pause and resume answer 202 without a body once done,
// the sandbox shows Paused meanwhile, and errors are the service's.
func TestPauseResume(t *testing.T) {
	s := newSetup(t, sandbox("a", api.StatusRunning, 0), sandbox("b", api.StatusRunning, 1))
	for _, tc := range []struct {
		name, method, target string
		wantStatus           int
		wantState            string // of a afterwards
	}{
		{"resume a running sandbox", "POST", "/v1/sandboxes/a/resume", 409, "Running"},
		{"pause", "POST", "/v1/sandboxes/a/pause", 202, "Paused"},
		{"pause again", "POST", "/v1/sandboxes/a/pause", 409, "Paused"},
		{"pause an unknown sandbox", "POST", "/v1/sandboxes/nope/pause", 404, "Paused"},
		{"resume", "POST", "/v1/sandboxes/a/resume", 202, "Running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, _ := s.do(t, tc.method, tc.target, "", nil)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantStatus == 202 && rec.Body.Len() != 0 {
				t.Errorf("body %q, want none", rec.Body)
			}
			if tc.wantStatus >= 400 && !strings.Contains(rec.Body.String(), `"code"`) {
				t.Errorf("error body %s is not {code, message}", rec.Body)
			}
			if st := s.expect(t, "GET", "/v1/sandboxes/a", "", 200)["status"].(map[string]any)["state"]; st != tc.wantState {
				t.Errorf("state %v, want %s", st, tc.wantState)
			}
		})
	}
	s.expect(t, "POST", "/v1/sandboxes/b/pause", "", 202)
	rec, _ := s.do(t, "GET", "/v1/sandboxes?state=paused", "", nil)
	var resp listResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || len(resp.Items) != 1 || resp.Items[0].ID != "b" {
		t.Errorf("list of paused sandboxes: %s (%v), want b alone", rec.Body, err)
	}
}

func TestEndpoints(t *testing.T) {
	s := newSetup(t, sandbox("a", api.StatusPending, 0))
	for _, tc := range []struct {
		target, host string
		wantStatus   int
		wantEndpoint string
	}{
		{"/v1/sandboxes/a/endpoints/44772?use_server_proxy=false", "", 200, "daemon.example:8080/opensandbox/a/execd"},
		{"/v1/sandboxes/a/endpoints/18080", "", 200, "daemon.example:8080/opensandbox/a/egress"},
		{"/v1/sandboxes/a/endpoints/8080", "", 200, "daemon.example:8080/api/v1/sandbox/a/port/8080"},
		{"/v1/sandboxes/a/endpoints/8080", "request.host:9", 200, "request.host:9/api/v1/sandbox/a/port/8080"},
		{"/v1/sandboxes/a/endpoints/0", "", 400, ""},
		{"/v1/sandboxes/a/endpoints/65536", "", 400, ""},
		{"/v1/sandboxes/a/endpoints/http", "", 400, ""},
		{"/v1/sandboxes/a/endpoints/8080?expires=1893456000", "", 400, ""},
		{"/v1/sandboxes/nope/endpoints/44772", "", 404, ""},
	} {
		t.Run(tc.target, func(t *testing.T) {
			if tc.host != "" {
				s.h.cfg.PublicHost = ""
				defer func() { s.h.cfg.PublicHost = "daemon.example:8080" }()
			}
			rec, body := s.do(t, "GET", tc.target, "", map[string]string{"Host": tc.host})
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantStatus != 200 {
				return
			}
			if body["endpoint"] != tc.wantEndpoint {
				t.Errorf("endpoint %v, want %s (no scheme, no trailing slash)", body["endpoint"], tc.wantEndpoint)
			}
			if fmt.Sprint(body["headers"]) != "map[X-Access-Token:tok-a]" {
				t.Errorf("headers %v", body["headers"])
			}
		})
	}
}

// TestRenewAndMetadata runs its cases in order on one sandbox: the
// metadata patches build on each other.
func TestRenewAndMetadata(t *testing.T) {
	full := newSetup(t, sandbox("a", api.StatusRunning, 0))
	full.sbs.byID["a"].Metadata = map[string]string{"team": "ml", "old": "x"}
	const renew, patch = "/v1/sandboxes/a/renew-expiration", "/v1/sandboxes/a/metadata"
	for _, tc := range []struct {
		name            string
		s               *setup
		method, target  string
		body            string
		wantStatus      int
		field, wantText string // the answer's field, as fmt.Sprint shows it
	}{
		{"renew", full, "POST", renew, `{"expiresAt":"2026-12-04T17:30:45.123456+01:00"}`, 200, "expiresAt", "2026-12-04T16:30:45.123456Z"},
		{"renew into the past", full, "POST", renew, `{"expiresAt":"2026-12-04T14:00:00Z"}`, 400, "", ""},
		{"renew without a time", full, "POST", renew, `{}`, 400, "", ""},
		{"renew to no time", full, "POST", renew, `{"expiresAt":"tomorrow"}`, 400, "", ""},
		{"renew an unknown sandbox", full, "POST", "/v1/sandboxes/missing/renew-expiration", `{"expiresAt":"2026-12-05T00:00:00Z"}`, 404, "", ""},
		{"merge patch", full, "PATCH", patch, `{"project":"new-project","old":null,"gone":null}`, 200, "metadata", "map[project:new-project team:ml]"},
		{"empty patch", full, "PATCH", patch, `{}`, 200, "metadata", "map[project:new-project team:ml]"},
		{"prefixed key", full, "PATCH", patch, `{"example.com/tier":"gold"}`, 200, "metadata", "map[example.com/tier:gold project:new-project team:ml]"},
		{"reserved key", full, "PATCH", patch, `{"opensandbox.io/x":"1"}`, 400, "", ""},
		{"value too long", full, "PATCH", patch, `{"k":"` + strings.Repeat("v", 64) + `"}`, 400, "", ""},
		{"bad value", full, "PATCH", patch, `{"k":"a b"}`, 400, "", ""},
		{"value not a string", full, "PATCH", patch, `{"k":1}`, 400, "", ""},
		{"patch an unknown sandbox", full, "PATCH", "/v1/sandboxes/nope/metadata", `{"k":"v"}`, 404, "", ""},
		{"service failure", full, "PATCH", patch, `{"fail":"x"}`, 503, "", ""},
		{"the sandbox shows it", full, "GET", "/v1/sandboxes/a", "", 200, "metadata", "map[example.com/tier:gold project:new-project team:ml]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.s.expect(t, tc.method, tc.target, tc.body, tc.wantStatus)
			if tc.field != "" && fmt.Sprint(body[tc.field]) != tc.wantText {
				t.Errorf("%s %v, want %s", tc.field, body[tc.field], tc.wantText)
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	s := newSetup(t, sandbox("a", api.StatusRunning, 0))
	for _, tc := range []struct {
		method, target, body string
		wantStatus           int
		wantAllow            string
	}{
		{"POST", "/v1/metrics/events", `{"eventType":"sandbox.create","createDurationMs":120,"success":true,"sandboxId":"a","image":"ubuntu"}`, 204, ""},
		{"POST", "/v1/metrics/events", `{"eventType":"sandbox.create"}`, 400, ""},
		{"GET", "/v1/sandboxes/a/pause", "", 405, "POST"},
		{"GET", "/v1/sandboxes/a/resume", "", 405, "POST"},
		{"GET", "/v1/snapshots", "", 200, ""},
		{"PUT", "/v1/snapshots", "", 405, "GET"},
		{"POST", "/v1/snapshots/x", "", 405, "GET, DELETE"},
		{"GET", "/v1/sandboxes/a/snapshots", "", 405, "POST"},
		{"GET", "/v1/templates", "", 501, ""},
		{"GET", "/v1/sandboxes/a/networkpolicy", "", 501, ""},
		{"GET", "/v1/nothing", "", 404, ""},
		{"GET", "/v1/", "", 404, ""},
		{"GET", "/v1/sandboxes/a/nothing", "", 404, ""},
		{"GET", "/v1/sandboxes//endpoints/80", "", 404, ""},
		{"GET", "/sandboxes", "", 404, ""},
		{"PUT", "/v1/sandboxes", "", 405, "GET, POST"},
		{"POST", "/v1/sandboxes/a", "", 405, "GET, DELETE"},
		{"GET", "/v1/sandboxes/a/metadata", "", 405, "PATCH"},
		{"GET", "/v1/metrics/events", "", 405, "POST"},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			rec, _ := s.do(t, tc.method, tc.target, tc.body, nil)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if got := rec.Header().Get("Allow"); got != tc.wantAllow {
				t.Errorf("Allow %q, want %q", got, tc.wantAllow)
			}
		})
	}
}

func TestRequestID(t *testing.T) {
	s := newSetup(t)
	rec, _ := s.do(t, "GET", "/v1/sandboxes", "", map[string]string{"X-Request-ID": "req-42"})
	if got := rec.Header().Get("X-Request-ID"); got != "req-42" {
		t.Errorf("X-Request-ID %q, want the client's", got)
	}
}

func TestNew(t *testing.T) {
	if _, err := New(Config{GatewayPrefix: "/g/"}); err == nil {
		t.Error("New without Sandboxes succeeded")
	}
	if _, err := New(Config{Sandboxes: newFakeSandboxes()}); err == nil {
		t.Error("New without GatewayPrefix succeeded")
	}
}

func TestImageName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"opensandbox/code-interpreter:latest", "agent2env/code-interpreter"},
		{"opensandbox/code-interpreter:v1.1.0", "agent2env/code-interpreter"},
		{"opensandbox/code-interpreter", "agent2env/code-interpreter"},
		{"sandbox-registry.cn-zhangjiakou.cr.aliyuncs.com/opensandbox/code-interpreter:v1.0.1", "agent2env/code-interpreter"},
		{"opensandbox/code-interpreter@sha256:0123", "agent2env/code-interpreter"},
		{"localhost:5000/opensandbox/code-interpreter", "agent2env/code-interpreter"},
		{"opensandbox/code-interpreter-extra:1", "opensandbox/code-interpreter-extra:1"},
		{"myopensandbox/code-interpreter:1", "myopensandbox/code-interpreter:1"},
		{"ubuntu", "ubuntu"},
		{"python:3.11", "python:3.11"},
	} {
		if got := imageName(tc.in); got != tc.want {
			t.Errorf("imageName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
