package opensandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// createRequest is CreateSandboxRequest, as the SDKs send it. Fields
// agent2env cannot honour are kept raw, to be refused by name.
type createRequest struct {
	Image            *imageSpec        `json:"image"`
	SnapshotID       string            `json:"snapshotId"`
	TemplateID       string            `json:"templateId"`
	Timeout          json.RawMessage   `json:"timeout"`
	ResourceLimits   map[string]string `json:"resourceLimits"`
	ResourceRequests map[string]string `json:"resourceRequests"`
	Env              map[string]string `json:"env"`
	Metadata         map[string]string `json:"metadata"`
	Entrypoint       []string          `json:"entrypoint"`
	NetworkPolicy    json.RawMessage   `json:"networkPolicy"`
	CredentialProxy  *struct {
		Enabled bool `json:"enabled"`
	} `json:"credentialProxy"`
	SecureAccess bool              `json:"secureAccess"`
	Volumes      []json.RawMessage `json:"volumes"`
	Platform     *struct {
		OS   string `json:"os"`
		Arch string `json:"arch"`
	} `json:"platform"`
	Lifecycle  json.RawMessage   `json:"lifecycle"`
	Extensions map[string]string `json:"extensions"`
}

// extRenewOnAccess is the extension that asks for renew-on-access.
const extRenewOnAccess = "access.renew.extend.seconds"

// noMainProcess are the entrypoints that mean "no main process": the
// SDKs' default, and the entrypoint of OpenSandbox's code-interpreter
// image, whose work (kernels) agent2env's agent does itself.
var noMainProcess = [][]string{
	defaultEntrypoint,
	{"/opt/code-interpreter/code-interpreter.sh"},
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// toAPI checks req and returns agent2env's create request, refusing by
// name every field it cannot honour (docs/opensandbox.md §4.1).
func (req *createRequest) toAPI() (api.CreateSandboxRequest, error) {
	var out api.CreateSandboxRequest
	switch {
	case req.TemplateID != "" && req.Image != nil:
		return out, errdefs.Invalid("give one of image and templateId, not both")
	case req.TemplateID != "":
		out.Template = req.TemplateID
	case req.Image == nil || req.Image.URI == "":
		return out, errdefs.Invalid("image.uri is required")
	default:
		if !isNull(req.Image.Auth) {
			return out, unsupported("image.auth", "registry credentials per request are not supported; the daemon pulls with its own")
		}
		out.Image = imageName(req.Image.URI)
	}
	if err := req.refuseUnsupported(); err != nil {
		return out, err
	}
	network, err := networkSpec(req.NetworkPolicy)
	if err != nil {
		return out, err
	}
	if network != nil && out.Template != "" {
		return out, unsupported("networkPolicy", "a template's sandboxes have the network of its network section; give image")
	}
	ttl, err := timeoutTTL(req.Timeout)
	if err != nil {
		return out, err
	}
	var cpu, memory string
	for k, v := range req.ResourceLimits {
		switch k {
		case "cpu":
			if err := service.CheckCPU(v); err != nil {
				return out, errdefs.Invalid("resourceLimits.cpu: %v", err)
			}
			cpu = v
		case "memory":
			memory = v
		default:
			return out, unsupported("resourceLimits."+k, "agent2env limits cpu and memory only")
		}
	}
	// resourceRequests are a scheduling hint; agent2env reserves the
	// limits, which covers them.
	env := req.Env
	if out.Image != codeInterpreterAlias { // whose image answers the probe itself
		env = withProbe(env)
	}
	if out.Template != "" {
		o := &api.SandboxOverrides{CPU: cpu, Memory: memory, Env: env}
		if len(req.Timeout) > 0 {
			o.TTL = &ttl
		}
		if o.CPU != "" || o.Memory != "" || o.TTL != nil || len(o.Env) > 0 {
			out.Overrides = o
		}
		return out, nil
	}
	out.CPU, out.Memory, out.TTL, out.Env, out.Network = cpu, memory, &ttl, env, network
	return out, nil
}

// codeInterpreterImage is the repository of OpenSandbox's code-interpreter
// image (any registry, any tag or digest), the code-interpreter SDK's
// default, which agent2env serves with its own (codeInterpreterAlias):
// python, node and bash with the kernels the agent runs.
const (
	codeInterpreterImage = "opensandbox/code-interpreter"
	codeInterpreterAlias = "agent2env/code-interpreter"
)

// imageName maps OpenSandbox's code-interpreter image onto agent2env's;
// other references are passed on as they are.
func imageName(ref string) string {
	name := ref
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	if name == codeInterpreterImage || strings.HasSuffix(name, "/"+codeInterpreterImage) {
		return codeInterpreterAlias
	}
	return ref
}

// withProbe is a sandbox's env with the variable that has its agent
// answer the code-interpreter SDK's readiness probe
// (service.JupyterProbeEnv); the caller's own value wins. The
// code-interpreter image has it in its own environment: a create of it
// without env of its own can be served by a warm pool.
func withProbe(env map[string]string) map[string]string {
	out := make(map[string]string, len(env)+1)
	out[service.JupyterProbeEnv] = service.JupyterProbeAddr
	for k, v := range env {
		out[k] = v
	}
	return out
}

// refuseUnsupported refuses the fields agent2env cannot honour yet.
func (req *createRequest) refuseUnsupported() error {
	if req.Entrypoint != nil && !slices.ContainsFunc(noMainProcess, func(e []string) bool { return slices.Equal(e, req.Entrypoint) }) {
		return unsupported("entrypoint", `a main process is not supported yet; omit it or give ["tail","-f","/dev/null"]`)
	}
	if req.CredentialProxy != nil && req.CredentialProxy.Enabled {
		return unsupported("credentialProxy", "credential injection is not supported")
	}
	if len(req.Volumes) > 0 {
		return unsupported("volumes", "volumes are not supported yet")
	}
	if p := req.Platform; p != nil {
		if p.OS != "linux" {
			return unsupported("platform.os", "agent2env runs linux sandboxes")
		}
		if p.Arch != runtime.GOARCH {
			return unsupported("platform.arch", "this host runs "+runtime.GOARCH)
		}
	}
	if !isNull(req.Lifecycle) {
		return unsupported("lifecycle", "lifecycle hooks are not supported")
	}
	if _, ok := req.Extensions[extRenewOnAccess]; ok {
		return unsupported("extensions."+extRenewOnAccess, "renew on access is not supported")
	}
	return nil
}

// timeoutTTL returns the ttl of a timeout: seconds, or 0 (never expires)
// for null or no timeout.
func timeoutTTL(raw json.RawMessage) (int, error) {
	if isNull(raw) {
		return 0, nil
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(raw)))
	if err != nil || n < 1 {
		return 0, errdefs.Invalid("timeout: want a whole number of seconds from 1, or null for no expiry")
	}
	return n, nil
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	var (
		areq api.CreateSandboxRequest
		err  error
	)
	if req.SnapshotID != "" {
		areq, err = h.restoreRequest(r.Context(), &req)
	} else {
		areq, err = req.toAPI()
	}
	if err == nil && len(req.Metadata) > 0 {
		err = checkLabels(metadataPatch(req.Metadata))
		areq.Metadata = req.Metadata
	}
	if err != nil {
		writeError(w, err)
		return
	}
	sb, err := h.created(r.Context(), areq)
	switch {
	case errors.Is(err, service.ErrStartFailed) && !errors.Is(err, errdefs.ErrInvalidArgument):
		// A start refused for the request's sake is its 400 below.
		writeErrorStatus(w, http.StatusInternalServerError, "PROVISIONING_ERROR", err.Error())
		return
	case err != nil:
		writeError(w, err)
		return
	}
	w.Header().Set("Location", "/v1/sandboxes/"+url.PathEscape(sb.ID))
	writeJSON(w, http.StatusAccepted, view(sb, false))
}

// created creates a sandbox and waits, up to the configured CreateWait,
// for it to run or fail: the SDKs never read a sandbox's state while
// creating, so a sandbox that fails must be refused by the create itself,
// or a client waits out its readiness budget. One whose image could not be
// had is a 400 IMAGE_NOT_AVAILABLE naming image.uri (another that failed
// is service.ErrStartFailed); one still pending is returned as it is.
func (h *Handler) created(ctx context.Context, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	sb, err := h.cfg.Sandboxes.CreateAndWait(ctx, req, h.cfg.CreateWait)
	switch {
	case errors.Is(err, service.ErrImageUnavailable):
		return nil, errdefs.WithCode(errdefs.Invalid("image.uri: %v", err), "IMAGE_NOT_AVAILABLE")
	}
	return sb, err
}

// metadataPatch returns the merge patch that sets md.
func metadataPatch(md map[string]string) map[string]*string {
	patch := make(map[string]*string, len(md))
	for k, v := range md {
		patch[k] = &v
	}
	return patch
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, id string) {
	sb, err := h.cfg.Sandboxes.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, view(sb, true))
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request, id string) {
	if err := h.cfg.Sandboxes.Delete(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// maxPageSize is the largest pageSize, as the stock server's.
const maxPageSize = 200

// listQuery is a list request's filters and page.
type listQuery struct {
	opts service.ListOptions
	// none says the states asked for match no sandbox agent2env has.
	none           bool
	page, pageSize int
}

// parseListQuery reads q (docs/opensandbox.md §4.3). What would widen
// the list is refused rather than dropped: a state agent2env does not
// know, a metadata filter that is not key=value pairs, a key given twice.
func parseListQuery(q url.Values) (listQuery, error) {
	var lq listQuery
	if states := q["state"]; len(states) > 0 {
		for _, st := range states {
			if !slices.Contains(sandboxStates, strings.ToLower(st)) {
				return lq, errdefs.Invalid("state %q: want one of Pending, Running, Pausing, Paused, Resuming, Stopping, Terminated, Failed", st)
			}
			lq.opts.Statuses = append(lq.opts.Statuses, statuses(st)...)
		}
		lq.none = len(lq.opts.Statuses) == 0
	}
	// Several metadata parameters are all matched, as the pairs of one.
	for _, raw := range q["metadata"] {
		pairs, err := url.ParseQuery(raw)
		if err != nil {
			return lq, errdefs.Invalid("metadata: want key=value pairs joined by &, each part URL-encoded: %v", err)
		}
		if lq.opts.Metadata == nil {
			lq.opts.Metadata = make(map[string]string, len(pairs))
		}
		for k, vs := range pairs {
			if _, dup := lq.opts.Metadata[k]; dup || len(vs) > 1 {
				return lq, errdefs.Invalid("metadata: key %q is given more than once", k)
			}
			lq.opts.Metadata[k] = vs[0]
		}
	}
	var err error
	lq.page, lq.pageSize, err = parsePage(q)
	return lq, err
}

// maxPage is the largest page: past it, the position of its first item
// would overflow.
const maxPage = math.MaxInt / maxPageSize

// strictQuery is r's query, refused when any of it cannot be decoded
// (r.URL.Query drops such pairs: a filter would be dropped with them).
func strictQuery(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errdefs.Invalid("the query string: %v", err)
	}
	return q, nil
}

// parsePage reads a list's page (1 to maxPage) and pageSize (1 to
// maxPageSize): 1 and 20 when absent.
func parsePage(q url.Values) (page, pageSize int, err error) {
	page, pageSize = 1, 20
	for _, p := range []struct {
		name string
		dst  *int
		max  int
	}{{"page", &page, maxPage}, {"pageSize", &pageSize, maxPageSize}} {
		raw := q.Get(p.name)
		if raw == "" {
			continue
		}
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > p.max {
			return 0, 0, errdefs.Invalid("%s %q: want a whole number from 1 to %d", p.name, raw, p.max)
		}
		*p.dst = n
	}
	return page, pageSize, nil
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	q, err := strictQuery(r)
	var lq listQuery
	if err == nil {
		lq, err = parseListQuery(q)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	var (
		total int
		page  []api.Sandbox
	)
	if !lq.none {
		total, page, err = h.newestPage(r.Context(), lq)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	items := make([]sandboxView, 0, len(page))
	for i := range page {
		items = append(items, view(&page[i], true))
	}
	pages := (total + lq.pageSize - 1) / lq.pageSize
	writeJSON(w, http.StatusOK, listResponse{
		Items: items,
		Pagination: pagination{
			Page: lq.page, PageSize: lq.pageSize, TotalItems: total, TotalPages: pages, HasNextPage: lq.page < pages,
		},
	})
}

// newestPage returns how many sandboxes lq selects and its page of them,
// newest first as the stock server lists: the service's newest-first list,
// read past the pages before it.
func (h *Handler) newestPage(ctx context.Context, lq listQuery) (int, []api.Sandbox, error) {
	total, err := h.cfg.Sandboxes.Count(ctx, lq.opts)
	if err != nil {
		return 0, nil, err
	}
	skip := (lq.page - 1) * lq.pageSize
	if skip >= total {
		return total, nil, nil
	}
	var out []api.Sandbox
	opts := lq.opts
	opts.Order = api.OrderDesc
	for len(out) < lq.pageSize {
		// Sandboxes deleted since the count leave fewer.
		limit := min(skip+lq.pageSize-len(out), api.MaxPageSize)
		opts.Limit = &limit
		page, err := h.cfg.Sandboxes.List(ctx, opts)
		if err != nil {
			return 0, nil, err
		}
		items := page.Items
		n := min(skip, len(items))
		skip -= n
		items = items[n:]
		out = append(out, items[:min(len(items), lq.pageSize-len(out))]...)
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	return total, out, nil
}

// freeze answers a pause or resume (do): 202 without a body once it is
// done.
func (h *Handler) freeze(w http.ResponseWriter, r *http.Request, id string, do func(context.Context, string) (*api.Sandbox, error)) {
	if _, err := do(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (h *Handler) renew(w http.ResponseWriter, r *http.Request, id string) {
	var body renewBody
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	if body.ExpiresAt == nil {
		writeError(w, errdefs.Invalid("expiresAt is required (RFC 3339)"))
		return
	}
	if !body.ExpiresAt.After(h.cfg.Now()) {
		writeError(w, errdefs.Invalid("expiresAt %s is not in the future", body.ExpiresAt.Format(time.RFC3339)))
		return
	}
	sb, err := h.cfg.Sandboxes.Renew(r.Context(), id, *body.ExpiresAt)
	if err != nil {
		writeError(w, err)
		return
	}
	at := sb.ExpiresAt.UTC()
	writeJSON(w, http.StatusOK, renewBody{ExpiresAt: &at})
}

func (h *Handler) endpoint(w http.ResponseWriter, r *http.Request, id, portText string) {
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		writeError(w, errdefs.Invalid("port %q: want a number from 1 to 65535", portText))
		return
	}
	if r.URL.Query().Has("expires") {
		writeError(w, unsupported("expires", "signed endpoints are not supported; the endpoint's headers carry the sandbox's token"))
		return
	}
	sb, err := h.cfg.Sandboxes.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	host := h.cfg.PublicHost
	if host == "" {
		host = r.Host
	}
	var path string
	switch port {
	case ExecdPort:
		path = ExecdPrefix + url.PathEscape(sb.ID) + "/execd"
	case EgressPort:
		path = ExecdPrefix + url.PathEscape(sb.ID) + "/egress"
	default:
		path = h.cfg.GatewayPrefix + url.PathEscape(sb.ID) + "/port/" + strconv.Itoa(port)
	}
	ep := endpointView{Endpoint: strings.TrimSuffix(host, "/") + path}
	if sb.AccessToken != "" {
		ep.Headers = map[string]string{HeaderAccessToken: sb.AccessToken}
	}
	writeJSON(w, http.StatusOK, ep)
}

func (h *Handler) patchMetadata(w http.ResponseWriter, r *http.Request, id string) {
	var patch map[string]*string
	if err := decodeJSON(w, r, &patch); err != nil {
		writeError(w, err)
		return
	}
	var (
		sb  *api.Sandbox
		err = checkLabels(patch)
	)
	switch {
	case err != nil:
	case len(patch) == 0:
		sb, err = h.cfg.Sandboxes.Get(r.Context(), id)
	default:
		sb, err = h.cfg.Sandboxes.PatchMetadata(r.Context(), id, patch)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, view(sb, true))
}

// reservedPrefix starts the metadata keys the platform keeps for itself.
const reservedPrefix = "opensandbox.io/"

var (
	// labelName is a Kubernetes label name (and value, when not empty).
	labelName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	// dnsSubdomain is a key's optional prefix.
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// checkLabels checks every key and value of a metadata patch.
func checkLabels(patch map[string]*string) error {
	for k, v := range patch {
		if err := checkLabel(k, v); err != nil {
			return err
		}
	}
	return nil
}

// checkLabel checks a metadata key and its value (nil: a deletion)
// against Kubernetes' label rules, as the stock server does.
func checkLabel(key string, value *string) error {
	if strings.HasPrefix(key, reservedPrefix) {
		return errdefs.Invalid("metadata key %q: the prefix %s is reserved", key, reservedPrefix)
	}
	name := key
	if prefix, n, ok := strings.Cut(key, "/"); ok {
		if len(prefix) > 253 || !dnsSubdomain.MatchString(prefix) {
			return errdefs.Invalid("metadata key %q: its prefix must be a DNS subdomain", key)
		}
		name = n
	}
	if len(name) > 63 || !labelName.MatchString(name) {
		return errdefs.Invalid("metadata key %q: want at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", key)
	}
	if value != nil && *value != "" && (len(*value) > 63 || !labelName.MatchString(*value)) {
		return errdefs.Invalid("metadata %q: the value must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", key)
	}
	return nil
}

// createEvent is MetricsEvent, as the SDKs report a create's latency.
type createEvent struct {
	EventType        string `json:"eventType"`
	CreateDurationMs *int64 `json:"createDurationMs"`
	Success          *bool  `json:"success"`
	SandboxID        string `json:"sandboxId"`
	Image            string `json:"image"`
}

// metricsEvent accepts an SDK's telemetry. It is checked and dropped:
// the daemon measures creates itself.
func (h *Handler) metricsEvent(w http.ResponseWriter, r *http.Request) {
	var ev createEvent
	if err := decodeJSON(w, r, &ev); err != nil {
		writeError(w, err)
		return
	}
	if ev.EventType == "" || ev.CreateDurationMs == nil || ev.Success == nil {
		writeError(w, errdefs.Invalid("eventType, createDurationMs and success are required"))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
