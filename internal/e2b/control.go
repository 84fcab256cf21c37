package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/jsonbody"
	"github.com/agent2env/agent2env/internal/service"
)

// Built-in E2B template names and the agent2env images they stand for.
var builtinTemplates = map[string]string{
	"base":                "agent2env/python",
	"code-interpreter-v1": "agent2env/code-interpreter",
}

// DefaultTimeout is a sandbox's lifetime in seconds when a create gives
// none (the SDKs always give one: 300).
const DefaultTimeout = 300

// maxListLimit is the largest page of GET /v2/sandboxes, as E2B's.
const maxListLimit = 100

// diskSizeMB is every sandbox's diskSizeMB, which the SDKs require: the
// service does not report a sandbox's disk size (cpuCount and memoryMB are
// parsed from its cpu and memory limits).
const diskSizeMB = 0

// serveAPI authenticates a control-plane request and routes it by its
// path's segments.
func (h *Handler) serveAPI(w http.ResponseWriter, r *http.Request) {
	r, err := h.authenticate(r)
	if err != nil {
		writeError(w, err)
		return
	}
	root, _ := apiRoot(r.URL.EscapedPath())
	if id, ok := snapshotTemplate(r); ok {
		h.serveSnapshotTemplate(w, r, id)
		return
	}
	switch {
	case root == "/snapshots":
		h.serveSnapshots(w, r)
		return
	case unsupportedAPIs[root] != "":
		writeError(w, errdefs.NotImplemented("E2B's %s (%s) are not supported by agent2env", unsupportedAPIs[root], root))
		return
	}
	seg, v2, ok := apiSegments(r.URL)
	if !ok {
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
		return
	}
	n := len(seg)
	switch {
	case n == 0:
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodPost: h.create,
			http.MethodGet:  func(w http.ResponseWriter, r *http.Request) { h.list(w, r, v2) },
		})
	case n == 1 && seg[0] == "metrics":
		methods(w, r, map[string]http.HandlerFunc{http.MethodGet: h.manyMetrics})
	case n == 1:
		id := seg[0]
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodGet:    func(w http.ResponseWriter, r *http.Request) { h.get(w, r, id) },
			http.MethodDelete: func(w http.ResponseWriter, r *http.Request) { h.delete(w, r, id) },
		})
	case n == 2:
		h.routeSandbox(w, r, seg[0], seg[1])
	default:
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
	}
}

// routeSandbox dispatches /sandboxes/{id}/{op}.
func (h *Handler) routeSandbox(w http.ResponseWriter, r *http.Request, id, op string) {
	post := func(f func(w http.ResponseWriter, r *http.Request, id string)) {
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodPost: func(w http.ResponseWriter, r *http.Request) { f(w, r, id) },
		})
	}
	switch op {
	case "timeout":
		post(h.setTimeout)
	case "refreshes":
		post(h.refresh)
	case "connect":
		post(h.connect)
	case "pause":
		post(h.pause)
	case "resume":
		// E2B's deprecated resume; its SDKs resume by connect.
		writeError(w, errdefs.NotImplemented("resume: resume a paused sandbox by connect (POST /sandboxes/{id}/connect)"))
	case "metrics":
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodGet: func(w http.ResponseWriter, r *http.Request) { h.metrics(w, r, id) },
		})
	case "snapshots":
		post(h.createSnapshot)
	case "logs", "fork", "network":
		writeError(w, errdefs.NotImplemented("sandbox %s are not supported by agent2env yet", op))
	default:
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
	}
}

// apiSegments returns the unescaped segments of u's path after
// /sandboxes or /v2/sandboxes, and whether it is the v2 form.
func apiSegments(u *url.URL) ([]string, bool, bool) {
	p := u.EscapedPath()
	v2 := strings.HasPrefix(p, "/v2/")
	p = strings.TrimPrefix(p, "/v2")
	rest, ok := strings.CutPrefix(p, "/sandboxes")
	if !ok {
		return nil, false, false
	}
	rest = strings.TrimPrefix(rest, "/")
	if rest == "" {
		return nil, v2, true
	}
	seg := strings.Split(rest, "/")
	for i, s := range seg {
		v, err := url.PathUnescape(s)
		if err != nil || v == "" {
			return nil, false, false
		}
		seg[i] = v
	}
	return seg, v2, true
}

// methods runs the handler of r's method, or answers 405.
func methods(w http.ResponseWriter, r *http.Request, by map[string]http.HandlerFunc) {
	if f, ok := by[r.Method]; ok {
		f(w, r)
		return
	}
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		if by[m] != nil {
			allowed = append(allowed, m)
		}
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeJSON(w, http.StatusMethodNotAllowed, errorBody{Code: http.StatusMethodNotAllowed,
		Message: "method " + r.Method + " is not allowed here; use " + strings.Join(allowed, " or ")})
}

// createRequest is NewSandbox (v1) and NewSandboxV2, as the SDKs send them.
type createRequest struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int              `json:"timeout"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	AutoPause           *bool             `json:"autoPause"`
	AutoResume          *autoResume       `json:"autoResume"`
	Secure              *bool             `json:"secure"`
	Network             *networkConfig    `json:"network"`
}

// networkConfig is the part of SandboxNetworkConfig agent2env honours:
// AllowPublicTraffic false makes the sandbox's ports require its traffic
// access token through the host form ("<port>-<id>.<domain>"), as on
// E2B; omitted, null or true, they are public there (E2B's default).
type networkConfig struct {
	AllowPublicTraffic *bool `json:"allowPublicTraffic"`
}

// MetadataPublicTraffic is the metadata key that marks a sandbox whose
// user ports are public through the host form: the E2B create sets it
// "true" unless asked for allowPublicTraffic false. It is agent2env's, so
// E2B's views of a sandbox's metadata leave it out, and a create that
// sets it itself is refused.
const MetadataPublicTraffic = "agent2env/e2b-public-traffic"

// publicTraffic reports whether sandbox sb's user ports are public through
// the host form (MetadataPublicTraffic).
func publicTraffic(sb *api.Sandbox) bool { return sb.Metadata[MetadataPublicTraffic] == "true" }

// autoResume is SandboxAutoResumeConfig, which some SDK versions (e2b
// 2.26 on PyPI, 2.28 on npm) send on every create: {"enabled": false}
// unless asked.
type autoResume struct {
	Enabled bool `json:"enabled"`
}

// unsupportedFields are the create fields agent2env cannot honour yet,
// refused by name unless null (or, for the lists, empty).
var unsupportedFields = map[string]string{
	"autoPauseMemory": "pausing on timeout is not supported yet",
	"mcp":             "MCP gateways in sandboxes are not supported",
	"iam":             "workload identities are not supported",
	"volumeMounts":    "volumes are not supported yet",
}

// knownFields are every create field createRequest reads.
var knownFields = []string{"templateID", "timeout", "metadata", "envVars", "allow_internet_access", "autoPause", "autoResume", "secure", "network"}

// egressRules is why the egress fields of network are refused.
const egressRules = "egress rules per sandbox are not supported yet; a template's network section allows domains through its egress proxy"

// unsupportedNetworkFields are the fields of network agent2env cannot
// honour, refused by name unless null or empty.
var unsupportedNetworkFields = map[string]string{
	"allowOut":        egressRules,
	"denyOut":         egressRules,
	"rules":           egressRules,
	"dnsServers":      egressRules,
	"egressProxy":     egressRules,
	"maskRequestHost": "the host of a sandbox's port is always <port>-<sandbox id>.<domain>",
	"httpsPorts":      "sandbox ports are reached over plain HTTP",
}

// parseCreate reads a create body: known fields into req, and refuses every
// other field that is not null or empty, by name, in network too.
func parseCreate(body []byte) (createRequest, error) {
	var req createRequest
	var raw map[string]json.RawMessage
	if err := jsonbody.Unmarshal(body, &raw, "the body", false); err != nil {
		return req, errdefs.Invalid("%v", err)
	}
	if err := refuseFields(raw, "", knownFields, unsupportedFields); err != nil {
		return req, err
	}
	if n, ok := raw["network"]; ok && !empty(n) {
		var network map[string]json.RawMessage
		if err := jsonbody.Unmarshal(n, &network, "network", false); err != nil {
			return req, errdefs.Invalid("%v", err)
		}
		if err := refuseFields(network, "network.", []string{"allowPublicTraffic"}, unsupportedNetworkFields); err != nil {
			return req, err
		}
	}
	if err := jsonbody.Unmarshal(body, &req, "the body", false); err != nil {
		return req, errdefs.Invalid("the body is not a valid sandbox request: %v", err)
	}
	return req, nil
}

// empty reports whether a JSON value is null, [] or {}.
func empty(v json.RawMessage) bool {
	t := string(bytes.TrimSpace(v))
	return t == "null" || t == "[]" || t == "{}"
}

// refuseFields refuses the first field of object raw, other than known,
// that is not empty: named with prefix, with its reason in unsupported
// or as unknown.
func refuseFields(raw map[string]json.RawMessage, prefix string, known []string, unsupported map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if slices.Contains(known, k) || empty(raw[k]) {
			continue
		}
		if why, ok := unsupported[k]; ok {
			return errdefs.Invalid("%s%s: %s", prefix, k, why)
		}
		return errdefs.Invalid("%s%s: unknown field", prefix, k)
	}
	return nil
}

// toAPI checks req and returns agent2env's create request.
func (req *createRequest) toAPI() (api.CreateSandboxRequest, error) {
	var out api.CreateSandboxRequest
	if req.TemplateID == "" {
		return out, errdefs.Invalid("templateID is required")
	}
	if req.AutoResume != nil && req.AutoResume.Enabled {
		return out, errdefs.Invalid("autoResume: pausing on timeout, and so resuming on traffic, is not supported yet")
	}
	if req.AutoPause != nil && *req.AutoPause {
		return out, errdefs.Invalid("autoPause: pausing on timeout is not supported yet; a sandbox is killed when it times out (pause it yourself: POST /sandboxes/{id}/pause)")
	}
	ttl := DefaultTimeout
	if req.Timeout != nil {
		if err := checkSeconds("timeout", *req.Timeout, maxTimeout); err != nil {
			return out, err
		}
		ttl = *req.Timeout
	}
	if _, ok := req.Metadata[MetadataPublicTraffic]; ok {
		return out, errdefs.Invalid("metadata: the key %q is agent2env's; network.allowPublicTraffic says whether the sandbox's ports are public", MetadataPublicTraffic)
	}
	out.Metadata = req.Metadata
	if req.Network == nil || req.Network.AllowPublicTraffic == nil || *req.Network.AllowPublicTraffic {
		out.Metadata = maps.Clone(req.Metadata)
		if out.Metadata == nil {
			out.Metadata = map[string]string{}
		}
		out.Metadata[MetadataPublicTraffic] = "true"
	}
	if service.IsSnapshotID(req.TemplateID) {
		return out, req.restore(&out, ttl)
	}
	image, isImage := builtinTemplates[req.TemplateID]
	if !isImage && strings.ContainsAny(req.TemplateID, "/:@") {
		image, isImage = req.TemplateID, true
	}
	if req.AllowInternetAccess != nil && *req.AllowInternetAccess {
		return out, errdefs.Invalid("allow_internet_access: agent2env sandboxes have no internet access; a template's network section allows domains through its egress proxy")
	}
	if isImage {
		out.Image, out.TTL, out.Env = image, &ttl, req.EnvVars
		return out, nil
	}
	if req.AllowInternetAccess != nil {
		return out, errdefs.Invalid("allow_internet_access: a template's sandboxes have the network its network section gives; omit the field")
	}
	out.Template = req.TemplateID
	out.Overrides = &api.SandboxOverrides{TTL: &ttl, Env: req.EnvVars}
	return out, nil
}

// restore makes out, whose metadata toAPI has set, the request for a
// sandbox made from the snapshot whose id is req's templateID, ending ttl
// seconds from now: it has the snapshot's environment and network, so
// envVars and allow_internet_access are refused unless empty or null.
func (req *createRequest) restore(out *api.CreateSandboxRequest, ttl int) error {
	switch {
	case len(req.EnvVars) > 0:
		return errdefs.Invalid("envVars: a sandbox made from a snapshot has the snapshot's environment; omit envVars")
	case req.AllowInternetAccess != nil:
		return errdefs.Invalid("allow_internet_access: a sandbox made from a snapshot has the snapshot's network; omit the field")
	}
	out.FromSnapshot, out.TTL = req.TemplateID, &ttl
	return nil
}

// templateID is the templateID a sandbox reports: the template it was
// made from, the E2B name of its built-in image, or its image.
func templateID(sb *api.Sandbox) string {
	if sb.Template != "" {
		return sb.Template
	}
	for name, image := range builtinTemplates {
		if sb.Image == image || sb.Image == image+":latest" {
			return name
		}
	}
	return sb.Image
}

// sandboxView is E2B's Sandbox: the create and connect response.
type sandboxView struct {
	TemplateID         string `json:"templateID"`
	SandboxID          string `json:"sandboxID"`
	ClientID           string `json:"clientID"`
	EnvdVersion        string `json:"envdVersion"`
	EnvdAccessToken    string `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string `json:"trafficAccessToken,omitempty"`
}

func view(sb *api.Sandbox) sandboxView {
	return sandboxView{
		TemplateID: templateID(sb), SandboxID: sb.ID, ClientID: ClientID, EnvdVersion: EnvdVersion,
		// The one access token serves both: envd's calls carry it as
		// X-Access-Token, the code interpreter's as the traffic token.
		EnvdAccessToken: sb.AccessToken, TrafficAccessToken: sb.AccessToken,
	}
}

// listedView is E2B's ListedSandbox; detailView is SandboxDetail.
type listedView struct {
	TemplateID  string            `json:"templateID"`
	SandboxID   string            `json:"sandboxID"`
	ClientID    string            `json:"clientID"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	State       string            `json:"state"`
	EnvdVersion string            `json:"envdVersion"`
	Metadata    map[string]string `json:"metadata"`
}

type detailView struct {
	listedView
	EnvdAccessToken string `json:"envdAccessToken,omitempty"`
	// Network is SandboxNetworkConfig: the part agent2env honours.
	Network networkView `json:"network"`
}

// networkView is the SandboxNetworkConfig of a sandbox's details.
type networkView struct {
	AllowPublicTraffic bool `json:"allowPublicTraffic"`
}

func listed(sb *api.Sandbox) listedView {
	md := maps.Clone(sb.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	delete(md, MetadataPublicTraffic)
	return listedView{
		TemplateID: templateID(sb), SandboxID: sb.ID, ClientID: ClientID,
		StartedAt: sb.CreatedAt.UTC(), EndAt: sb.ExpiresAt.UTC(),
		CPUCount: cpuCount(sb.CPU), MemoryMB: memoryMB(sb.Memory), DiskSizeMB: diskSizeMB,
		State: e2bState(sb), EnvdVersion: EnvdVersion, Metadata: md,
	}
}

// cpuCount is a cpu quantity ("2", "500m") in whole cpus, at least 1.
func cpuCount(q string) int {
	if m, ok := strings.CutSuffix(q, "m"); ok {
		n, err := strconv.Atoi(m)
		if err == nil {
			return max((n+999)/1000, 1)
		}
		return 1
	}
	f, err := strconv.ParseFloat(q, 64)
	if err != nil || f < 1 {
		return 1
	}
	return int(f + 0.999)
}

// memoryMB is a memory quantity ("512Mi", "2Gi", "1G", bytes) in MiB; 0
// when it does not parse.
func memoryMB(q string) int {
	units := []struct {
		suffix string
		mul    float64
	}{{"Ki", 1.0 / 1024}, {"Mi", 1}, {"Gi", 1024}, {"Ti", 1024 * 1024}, {"K", 1e3 / (1 << 20)}, {"M", 1e6 / (1 << 20)}, {"G", 1e9 / (1 << 20)}, {"T", 1e12 / (1 << 20)}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(q, u.suffix); ok {
			f, err := strconv.ParseFloat(n, 64)
			if err != nil {
				return 0
			}
			return int(f * u.mul)
		}
	}
	f, err := strconv.ParseFloat(q, 64)
	if err != nil {
		return 0
	}
	return int(f / (1 << 20))
}

// alive reports whether an agent2env sandbox is one E2B would list as
// running or paused: made and not yet ended.
func alive(sb *api.Sandbox) bool {
	return sb.Status == api.StatusPending || sb.Status == api.StatusRunning || sb.Status == api.StatusPaused
}

// live returns sandbox id when it is alive: an ended one is not found,
// as E2B forgets it.
func (h *Handler) live(ctx context.Context, id string) (*api.Sandbox, error) {
	sb, err := h.cfg.Sandboxes.Get(ctx, id)
	if err == nil && !alive(sb) {
		err = errdefs.NotFound("sandbox %s has ended", id)
	}
	return sb, err
}

// e2bState is E2B's state of a sandbox that is alive.
func e2bState(sb *api.Sandbox) string {
	if sb.Status == api.StatusPaused {
		return "paused"
	}
	return "running"
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	var body json.RawMessage
	if err := decodeJSON(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	req, err := parseCreate(body)
	if err != nil {
		writeError(w, err)
		return
	}
	if a := req.AllowInternetAccess; a != nil && *a && sendsInternetByDefault(r.UserAgent()) {
		// Its SDK's default, not the caller's ask: as if left out.
		req.AllowInternetAccess = nil
	}
	areq, err := req.toAPI()
	if err != nil {
		writeError(w, err)
		return
	}
	sb, err := h.created(r.Context(), areq)
	if err != nil {
		writeError(w, err)
		return
	}
	h.tokens.remember(sb.AccessToken, sb.ID)
	writeJSON(w, http.StatusCreated, view(sb))
}

// created creates a sandbox and waits for it to run: E2B answers a create
// only once the sandbox answers. One that fails, or is still pending at
// the deadline, is refused with nothing left half-made: 400 naming
// templateID when its image could not be had, 503 when it is slow.
func (h *Handler) created(ctx context.Context, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	sb, err := h.cfg.Sandboxes.CreateAndWait(ctx, req, h.cfg.CreateWait)
	switch {
	case errors.Is(err, service.ErrImageUnavailable):
		return nil, errdefs.Invalid("templateID: %v", err)
	case err != nil:
		return nil, err
	case sb.Status != api.StatusRunning:
		_ = h.cfg.Sandboxes.Delete(context.WithoutCancel(ctx), sb.ID)
		return nil, errdefs.Unavailable("the sandbox did not start within %v", h.cfg.CreateWait)
	}
	return sb, nil
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, id string) {
	sb, err := h.live(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	h.tokens.remember(sb.AccessToken, sb.ID)
	writeJSON(w, http.StatusOK, detailView{listedView: listed(sb), EnvdAccessToken: sb.AccessToken,
		Network: networkView{AllowPublicTraffic: h.public(sb)}})
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request, id string) {
	if err := h.cfg.Sandboxes.Delete(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// timeoutBody is SandboxTimeoutRequest.
type timeoutBody struct {
	Timeout *int `json:"timeout"`
}

// connectBody is ConnectSandbox: Memory false asks to resume a paused
// sandbox by a cold boot from its files.
type connectBody struct {
	Timeout *int  `json:"timeout"`
	Memory  *bool `json:"memory"`
}

// maxTimeout is the longest timeout, in seconds, of a create, a connect
// or a set_timeout: E2B's field is an int32.
const maxTimeout = math.MaxInt32

// checkSeconds refuses a field of seconds outside 1 to limit, by name.
func checkSeconds(field string, seconds, limit int) error {
	if seconds < 1 || seconds > limit {
		return errdefs.Invalid("%s: want a whole number of seconds from 1 to %d", field, limit)
	}
	return nil
}

// extend makes sandbox id end seconds from now, which checkSeconds has
// passed.
func (h *Handler) extend(ctx context.Context, id string, seconds int) (*api.Sandbox, error) {
	return h.cfg.Sandboxes.Renew(ctx, id, h.cfg.Now().Add(time.Duration(seconds)*time.Second))
}

// prolong is extend for a connect and a refresh, which, as E2B's, only
// ever extend a sandbox's life (set_timeout may shorten it): an end
// later than seconds from now, or none, is kept.
func (h *Handler) prolong(ctx context.Context, sb *api.Sandbox, seconds int) error {
	if !h.cfg.Now().Add(time.Duration(seconds) * time.Second).After(sb.ExpiresAt) {
		return nil
	}
	_, err := h.extend(ctx, sb.ID, seconds)
	return err
}

// extendLive is extend for a sandbox that is alive: an ended one is not
// found, as for get, and keeps its expiry.
func (h *Handler) extendLive(ctx context.Context, id string, seconds int) error {
	_, err := h.live(ctx, id)
	if err == nil {
		_, err = h.extend(ctx, id, seconds)
	}
	return err
}

func (h *Handler) setTimeout(w http.ResponseWriter, r *http.Request, id string) {
	var body timeoutBody
	err := decodeJSON(w, r, &body, false)
	if err == nil && body.Timeout == nil {
		err = errdefs.Invalid("timeout is required (seconds)")
	}
	if err == nil {
		err = checkSeconds("timeout", *body.Timeout, maxTimeout)
	}
	if err == nil {
		err = h.extendLive(r.Context(), id, *body.Timeout)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// maxRefresh is the longest refresh, in seconds, as E2B's.
const maxRefresh = 3600

// refresh is POST /sandboxes/{id}/refreshes: the sandbox ends {duration}
// seconds from now, unless it ends later.
func (h *Handler) refresh(w http.ResponseWriter, r *http.Request, id string) {
	var body struct {
		Duration *int `json:"duration"`
	}
	err := decodeJSON(w, r, &body, false)
	switch {
	case err != nil:
	case body.Duration == nil:
		err = errdefs.Invalid("duration is required (seconds)")
	default:
		var sb *api.Sandbox
		if err = checkSeconds("duration", *body.Duration, maxRefresh); err == nil {
			sb, err = h.live(r.Context(), id)
		}
		if err == nil {
			err = h.prolong(r.Context(), sb, *body.Duration)
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// connect answers a sandbox, resuming it first if it is paused (201, else
// 200), with the timeout the body gives: a paused sandbox's end set by
// it, a running one's only extended (prolong).
func (h *Handler) connect(w http.ResponseWriter, r *http.Request, id string) {
	var body connectBody
	err := decodeJSON(w, r, &body, true)
	if err == nil && body.Memory != nil && !*body.Memory {
		err = errdefs.Invalid("memory: false: agent2env resumes a paused sandbox with its memory, never by a cold boot; omit it or send true")
	}
	if err == nil && body.Timeout != nil {
		// Before the resume: a refused connect leaves the sandbox as it was.
		err = checkSeconds("timeout", *body.Timeout, maxTimeout)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	sb, err := h.live(r.Context(), id)
	switch {
	case err != nil || body.Timeout == nil:
	case sb.Status == api.StatusPaused:
		// As E2B's, a paused sandbox resumes with the timeout given.
		// Before the resume: a timeout the service refuses (an expiry too
		// far from the sandbox's start) leaves it paused.
		_, err = h.extend(r.Context(), id, *body.Timeout)
	default:
		err = h.prolong(r.Context(), sb, *body.Timeout)
	}
	if err == nil && sb.Status == api.StatusPaused {
		var resumed bool
		if sb, resumed, err = h.resume(r.Context(), id); resumed {
			status = http.StatusCreated
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	h.tokens.remember(sb.AccessToken, sb.ID)
	writeJSON(w, status, view(sb))
}

// resume resumes paused sandbox id and reports whether this call did:
// one that another request (a connect beside this one) has resumed
// meanwhile is returned as it is.
func (h *Handler) resume(ctx context.Context, id string) (*api.Sandbox, bool, error) {
	sb, err := h.cfg.Sandboxes.Resume(ctx, id)
	if errors.Is(err, errdefs.ErrFailedPrecondition) {
		if now, gerr := h.live(ctx, id); gerr == nil && now.Status == api.StatusRunning {
			return now, false, nil
		}
	}
	return sb, err == nil, err
}

// pauseBody is SandboxPauseRequest.
type pauseBody struct {
	// Memory false asks for the files alone, to cold-boot from: agent2env
	// pauses keep memory (the cgroup freezer), always.
	Memory *bool `json:"memory"`
	// RequireHealthyGuest refuses to pause a sandbox whose envd does not
	// answer, since E2B would record it unresponsive in the snapshot; a
	// frozen agent2env sandbox resumes as it was, so only false is taken.
	RequireHealthyGuest *bool `json:"requireHealthyGuest"`
}

// decodeOptional reads the body of a call (what) that may be empty into
// v; a field v does not have is a 400 naming it and those it has (known).
func decodeOptional(w http.ResponseWriter, r *http.Request, v any, what, known string) error {
	var raw json.RawMessage
	if err := decodeJSON(w, r, &raw, true); err != nil || raw == nil {
		return err
	}
	if err := jsonbody.Unmarshal(raw, v, "the body", true); err != nil {
		return errdefs.Invalid("%s: %v (agent2env knows %s)", what, err, known)
	}
	return nil
}

// pause is POST /sandboxes/{id}/pause: the sandbox's processes frozen in
// memory; 204, or 409 when it is alive but not running (the SDK's
// "already paused"); an ended one is not found (the SDK's
// SandboxNotFoundException), as for get.
func (h *Handler) pause(w http.ResponseWriter, r *http.Request, id string) {
	var body pauseBody
	err := decodeOptional(w, r, &body, "pause", "memory and requireHealthyGuest")
	switch {
	case err != nil:
	case body.Memory != nil && !*body.Memory:
		err = errdefs.Invalid("memory: false: agent2env pauses keep the sandbox's memory (its processes frozen); omit it or send true")
	case body.RequireHealthyGuest != nil && *body.RequireHealthyGuest:
		err = errdefs.Invalid("requireHealthyGuest: agent2env does not check the sandbox's agent before a pause (a frozen sandbox resumes as it was); omit it")
	default:
		if _, err = h.live(r.Context(), id); err == nil {
			_, err = h.cfg.Sandboxes.Pause(r.Context(), id)
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listQuery is a list request's filters.
type listQuery struct {
	opts  service.ListOptions
	limit int
}

// parseList reads the query of GET /sandboxes and /v2/sandboxes. Both
// list newest first, as E2B's do; v2's order=asc lists oldest first.
func parseList(q url.Values, v2 bool) (listQuery, error) {
	lq := listQuery{limit: maxListLimit}
	lq.opts.Order = api.OrderDesc
	lq.opts.Statuses = []api.SandboxStatus{api.StatusPending, api.StatusRunning}
	if raw := q.Get("metadata"); raw != "" {
		md, err := parseMetadata(raw)
		if err != nil {
			return lq, err
		}
		lq.opts.Metadata = md
	}
	if !v2 {
		lq.limit = api.MaxPageSize
		return lq, nil
	}
	// E2B lists both states unless told one.
	lq.opts.Statuses = append(lq.opts.Statuses, api.StatusPaused)
	if raw := q.Get("state"); raw != "" {
		var want []api.SandboxStatus
		for _, st := range strings.Split(raw, ",") {
			switch st {
			case "running":
				want = append(want, api.StatusPending, api.StatusRunning)
			case "paused":
				want = append(want, api.StatusPaused)
			default:
				return lq, errdefs.Invalid("state %q: want running or paused", st)
			}
		}
		lq.opts.Statuses = want
	}
	limit, err := parseLimit(q)
	if err != nil {
		return lq, err
	}
	lq.limit = limit
	lq.opts.Cursor = q.Get("nextToken")
	for _, name := range []string{"startedAfter", "template"} {
		if q.Get(name) != "" {
			return lq, errdefs.Invalid("%s: filtering by %s is not supported yet", name, name)
		}
	}
	if o := q.Get("order"); o != "" {
		lq.opts.Order = api.Order(o) // the service refuses another than asc or desc
	}
	return lq, nil
}

// parseMetadata reads the metadata filter of a list, as the SDKs encode
// it: each key and value URL-encoded, the pairs joined as a query string
// (so encoded again), the whole sent as one parameter. Each layer is
// undone, as E2B's API does; a pair without "=" is refused.
func parseMetadata(raw string) (map[string]string, error) {
	md := map[string]string{}
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		var err error
		if ok {
			k, err = unescapeTwice(k)
		}
		if ok && err == nil {
			v, err = unescapeTwice(v)
		}
		if !ok || err != nil || k == "" {
			return nil, errdefs.Invalid("metadata: %q is not a key=value pair, each part URL-encoded", pair)
		}
		md[k] = v
	}
	return md, nil
}

// unescapeTwice undoes two layers of URL encoding.
func unescapeTwice(s string) (string, error) {
	s, err := url.QueryUnescape(s)
	if err == nil {
		s, err = url.QueryUnescape(s)
	}
	return s, err
}

// list is GET /v2/sandboxes, one page and X-Next-Token when more follow,
// and GET /sandboxes (v1), every running sandbox at once.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, v2 bool) {
	lq, err := parseList(r.URL.Query(), v2)
	if err != nil {
		writeError(w, err)
		return
	}
	items := []listedView{}
	opts := lq.opts
	opts.Limit = &lq.limit
	for {
		page, err := h.cfg.Sandboxes.List(r.Context(), opts)
		if err != nil {
			writeError(w, err)
			return
		}
		for i := range page.Items {
			items = append(items, listed(&page.Items[i]))
		}
		if page.NextCursor == "" {
			break
		}
		if v2 {
			w.Header().Set(HeaderNextToken, page.NextCursor)
			break
		}
		opts.Cursor = page.NextCursor
	}
	writeJSON(w, http.StatusOK, items)
}
