package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/quantity"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/template"
)

// CreateRequest is a validated-on-use request for a new sandbox: from an
// image, or from a template (Template set; then CPU, Memory, Disk, TTL and
// Env override the template's, and Image must be empty).
type CreateRequest struct {
	Image  string
	CPU    string
	Memory string
	// Disk bounds the sandbox's writable storage ("2Gi"); empty: the
	// daemon's default (Config.DefaultDisk).
	Disk string
	// TTL in seconds; nil means the default, 0 never expires.
	TTL *int
	Env map[string]string
	// Metadata is the client's labels (store.Sandbox.Metadata).
	Metadata map[string]string

	Template        string
	TemplateVersion int // 0: the latest

	// ManagedBy names the service making the sandbox for its own records
	// (store.Sandbox.ManagedBy); empty for a client's request.
	ManagedBy string
	// Mounts are host directories to bind into the sandbox.
	Mounts []sandbox.Mount
	// SpareKernel is the language of a kernel the sandbox's agent starts
	// as it boots, for its first kernel to adopt (sandbox.Spec.SpareKernel),
	// unless the sandbox has startup steps; empty is none.
	SpareKernel string
	// Network, with Image, is what the sandbox may reach beyond its
	// loopback through the egress proxy, as a template's network section
	// gives it (a template's sandboxes have the template's); nil: nothing.
	Network *api.NetworkSpec

	startup      *startup             // from the template
	network      *api.NetworkSpec     // from the template
	persistence  *api.PersistenceSpec // from the template
	runtimeClass string               // from the template
	pool         string               // the warm pool it is made for
}

// Overridden reports whether the request changes anything its template or
// image would give (the sandboxes of a warm pool have no overrides).
func (r *CreateRequest) Overridden() bool {
	return r.CPU != "" || r.Memory != "" || r.Disk != "" || r.TTL != nil || len(r.Env) > 0 || len(r.Mounts) > 0
}

// Fits reports whether sandbox sb, made from the request's template or
// image without overrides, is one the request asks for: its environment,
// disk and mounts unchanged, and its cpu and memory, where the request
// gives them, the same amounts (the OpenSandbox SDKs always send theirs).
// A warm pool's sandbox serves a request it fits; its TTL and metadata
// are set as it is taken (Claim).
func (r *CreateRequest) Fits(sb *store.Sandbox) bool {
	if r.Disk != "" || len(r.Env) > 0 || len(r.Mounts) > 0 || egress(r.Network) != nil {
		return false
	}
	return sameAmount(r.CPU, sb.CPU, quantity.ParseCPU) && sameAmount(r.Memory, sb.Memory, quantity.ParseBytes)
}

// sameAmount reports whether quantity want, unless empty, is the amount
// of have.
func sameAmount(want, have string, parse func(string) (int64, error)) bool {
	if want == "" {
		return true
	}
	w, err := parse(want)
	if err != nil {
		return false
	}
	h, err := parse(have)
	return err == nil && w == h
}

// maxTTL is the largest TTL in seconds: longer ones overflow a
// time.Duration (about 292 years).
const maxTTL = int(math.MaxInt64 / int64(time.Second))

// checkTTL refuses a TTL in seconds that is negative or overflows.
func checkTTL(ttl int) error {
	if ttl < 0 {
		return errdefs.Invalid("ttl %d is negative (0 means never expire)", ttl)
	}
	if ttl > maxTTL {
		return errdefs.Invalid("ttl %d is above the maximum of %d seconds", ttl, maxTTL)
	}
	return nil
}

// resolved is a CreateRequest checked and completed with defaults.
type resolved struct {
	CreateRequest
	ttl         int
	milliCPU    int64
	memBytes    int64
	persistence *sandbox.Persistence
	// diskBytes is Disk's value, or the default.
	diskBytes int64
}

func (m *Manager) resolve(req CreateRequest) (*resolved, error) {
	r := &resolved{CreateRequest: req}
	if strings.TrimSpace(req.Image) == "" {
		return nil, errdefs.Invalid("image is required")
	}
	if _, err := image.Normalize(req.Image); err != nil {
		return nil, err
	}
	if err := checkMetadata(req.Metadata); err != nil {
		return nil, err
	}
	if r.CPU == "" {
		r.CPU = m.cfg.DefaultCPU
	}
	if r.Memory == "" {
		r.Memory = m.cfg.DefaultMemory
	}
	var err error
	if r.milliCPU, err = ParseCPU(r.CPU); err != nil {
		return nil, err
	}
	if r.memBytes, err = quantity.ParseBytes(r.Memory); err != nil {
		return nil, errdefs.Invalid("memory: %v", err)
	}
	if r.memBytes < quantity.MinBytes {
		return nil, errdefs.Invalid("memory %s is below the 16Mi minimum", r.Memory)
	}
	r.diskBytes = m.cfg.DefaultDisk
	if r.Disk != "" {
		if r.diskBytes, err = quantity.ParseBytes(r.Disk); err != nil {
			return nil, errdefs.Invalid("disk: %v", err)
		}
		if r.diskBytes < quantity.MinBytes {
			return nil, errdefs.Invalid("disk %s is below the 16Mi minimum", r.Disk)
		}
	}
	r.ttl = m.cfg.DefaultTTL
	if req.TTL != nil {
		r.ttl = *req.TTL
	}
	if err := checkTTL(r.ttl); err != nil {
		return nil, err
	}
	if err := ValidEnv(req.Env); err != nil {
		return nil, err
	}
	if p := req.persistence; p != nil && p.Enabled {
		size, err := quantity.ParseBytes(p.Size)
		if err != nil {
			return nil, errdefs.Invalid("persistence.size: %v", err)
		}
		r.persistence = &sandbox.Persistence{SizeBytes: size, StorageClass: p.StorageClassName, Retain: p.ReclaimPolicy == "Retain"}
	}
	return r, nil
}

// Create makes a new sandbox. When the runtime has the image ready (see
// sandbox.ImagePreparer) the sandbox is started before Create returns
// (status running, or failed with a reason); otherwise it is returned
// pending while the runtime prepares the image in the background. Invalid
// requests, and requests the runtime cannot honour, create nothing.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (*store.Sandbox, error) {
	start := time.Now()
	if req.TTL != nil {
		if err := checkTTL(*req.TTL); err != nil {
			return nil, err
		}
	}
	if err := checkMetadata(req.Metadata); err != nil {
		return nil, err
	}
	if m.pool != nil && auth.OwnerOf(ctx) == "" { // an owned sandbox is admitted against its owner
		pinned, err := m.pinVersion(ctx, req)
		if err != nil {
			m.metrics.ObserveCreate(metrics.SourceCold, createLabel(nil, err), time.Since(start))
			return nil, err
		}
		if sb, ok := m.pool.TakeSandbox(ctx, pinned); ok {
			m.metrics.ObserveCreate(metrics.SourcePool, createLabel(sb, nil), time.Since(start))
			return sb, nil
		}
	}
	sb, err := m.create(ctx, req)
	m.metrics.ObserveCreate(metrics.SourceCold, createLabel(sb, err), time.Since(start))
	return sb, err
}

// pinVersion is req with the version of its template that it resolves to
// now (the latest when it names none), for the warm pools: they serve
// that version only, never one a template update left behind nor one of
// a template deleted since. An unknown template is ErrNotFound
// (TEMPLATE_NOT_FOUND). A request no pool serves as it is (no template,
// or one prepare refuses) is returned unchanged, for create to answer.
func (m *Manager) pinVersion(ctx context.Context, req CreateRequest) (CreateRequest, error) {
	if req.Template == "" || req.Image != "" || req.Network != nil || req.TemplateVersion < 0 || m.templates == nil {
		return req, nil
	}
	_, version, err := m.templates.Resolve(ctx, req.Template, req.TemplateVersion)
	if err != nil {
		return req, err
	}
	req.TemplateVersion = version
	return req, nil
}

func (m *Manager) create(ctx context.Context, req CreateRequest) (*store.Sandbox, error) {
	r, err := m.prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	origin := "image " + r.Image
	if r.Template != "" {
		origin = fmt.Sprintf("template %s version %d (image %s)", r.Template, r.TemplateVersion, r.Image)
	}
	sb, made, err := m.createRecord(ctx, r, store.Event{Status: string(api.StatusPending), Message: "created from " + origin})
	if err != nil {
		return nil, err
	}
	made = sync.OnceFunc(made)

	ready := true
	preparer, _ := m.rt.(sandbox.ImagePreparer)
	if preparer != nil {
		if ready, err = preparer.ImageReady(ctx, r.Image); err != nil {
			defer made()
			return m.fail(ctx, sb.ID, reasonLookUpImage+r.Image+": "+err.Error())
		}
	}
	if ready && r.startup.empty() {
		defer made()
		// The image is here: start now, whatever the client does meanwhile.
		ctx, done := m.startContext(ctx)
		defer done()
		started, err := m.start(ctx, sb.ID, r, made)
		if unmade := (unmadeError{}); errors.As(err, &unmade) {
			return nil, m.refuseUnmade(ctx, sb, unmade.error)
		}
		return started, err
	}
	// The image must be prepared, or the template has startup steps:
	// either may take long, so the sandbox is returned pending.
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		defer made()
		ctx, cancel := context.WithTimeout(m.bgCtx, m.cfg.StartTimeout)
		defer cancel()
		if !ready {
			m.event(ctx, sb.ID, string(api.StatusPending), "preparing image "+r.Image)
			if err := preparer.PrepareImage(ctx, r.Image); err != nil {
				_, _ = m.fail(ctx, sb.ID, reasonPrepareImage+r.Image+": "+err.Error())
				return
			}
		}
		if _, err := m.start(ctx, sb.ID, r, made); errors.As(err, new(unmadeError)) {
			_, _ = m.fail(ctx, sb.ID, fmt.Sprintf("create sandbox: %v", err))
		}
	}()
	return sb, nil
}

// startContext returns the context of a start a request asked for, and
// the done to call when the start has ended: it has ctx's values but
// not its end, as the start goes on whatever the client does, and ends
// after Config.StartTimeout or at Close, which waits for done. So a
// daemon that shuts down ends its starts in flight, which fail their
// sandboxes, rather than leaving them pending.
func (m *Manager) startContext(ctx context.Context) (context.Context, func()) {
	m.bg.Add(1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StartTimeout)
	stop := context.AfterFunc(m.bgCtx, cancel)
	return ctx, func() {
		stop()
		cancel()
		m.bg.Done()
	}
}

// prepare checks req and completes it from its template and the defaults,
// refusing what the runtime cannot honour; it records nothing.
func (m *Manager) prepare(ctx context.Context, req CreateRequest) (*resolved, error) {
	if req.Network != nil {
		if req.Template != "" {
			return nil, errdefs.Invalid("network: a template's sandboxes have the network of its network section; give network with image")
		}
		n, err := template.NormalizeNetwork(req.Network)
		if err != nil {
			return nil, errdefs.Invalid("%v", err)
		}
		req.network = n
	}
	if req.Template != "" {
		if req.Image != "" {
			return nil, errdefs.Invalid("give either template or image, not both")
		}
		var err error
		if req, err = m.fromTemplate(ctx, req); err != nil {
			return nil, err
		}
	}
	r, err := m.resolve(req)
	if err != nil {
		return nil, err
	}
	if err := m.supported(r); err != nil {
		return nil, err
	}
	return r, nil
}

// Check refuses, as Create would, a request that can never make a
// sandbox, and makes nothing: an unknown template, an image that is not a
// reference, bad limits, one the runtime cannot honour, and cpu or memory
// beyond the host's whole capacity (admission's rule with no other
// sandbox committed), which is ErrInvalidArgument here where a create
// is 507: no wait makes room for it. Room that other sandboxes hold now
// is not checked. Services that queue work for later (task runs) check
// what they will ask for when it is submitted.
func (m *Manager) Check(ctx context.Context, req CreateRequest) error {
	r, err := m.prepare(ctx, req)
	if err != nil {
		return err
	}
	whole := m.capacity()
	if m.refusal(whole, r.milliCPU, r.memBytes, false) != nil {
		return errdefs.Invalid("cpu %s and memory %s: more than the host's whole capacity of %s cpu and %s of memory, so no sandbox of that size is ever admitted",
			r.CPU, r.Memory, cpus(whole.MilliCPUCapacity), quantity.Mebibytes(whole.MemoryBytesCapacity))
	}
	return nil
}

// supported refuses a request the runtime cannot honour, before anything
// is recorded.
func (m *Manager) supported(r *resolved) error {
	caps := m.rt.Capabilities()
	if egress(r.network) != nil && !caps.NetworkPolicy {
		return errdefs.Invalid("network access needs a per-sandbox network policy, which runtime %s cannot enforce", m.rt.Name())
	}
	return caps.Refuse(&sandbox.Spec{Persistence: r.persistence, RuntimeClass: r.runtimeClass}, m.rt.Name())
}

// egress is the egress policy of a network spec (a template's or a
// request's); nil is none.
func egress(n *api.NetworkSpec) *sandbox.Egress {
	if n == nil || (!n.AllowInternetAccess && len(n.AllowedDomains) == 0) {
		return nil
	}
	return &sandbox.Egress{AllowInternet: n.AllowInternetAccess, AllowedDomains: n.AllowedDomains}
}

// createRecord stores the pending record of a new sandbox once admit lets
// it in (MaxSandboxes, capacity), with evs (each dated now) in the same
// write. The store also counts and inserts atomically, a backstop for a
// limit passed outside admission. The caller makes the sandbox: it gets
// the record with the sandbox's making claimed (makers), before the
// record was stored, so that no one ever sees it pending unclaimed while
// it is made; it calls made once the record is no longer pending, or it
// has stopped making it.
func (m *Manager) createRecord(ctx context.Context, r *resolved, evs ...store.Event) (sb *store.Sandbox, made func(), err error) {
	id := newID()
	if made, err = m.claimMaking(ctx, id); err != nil {
		return nil, nil, err
	}
	if sb, err = m.storeRecord(ctx, id, r, evs...); err != nil {
		made()
		return nil, nil, err
	}
	return sb, made, nil
}

// storeRecord is createRecord's record, stored under id.
func (m *Manager) storeRecord(ctx context.Context, id string, r *resolved, evs ...store.Event) (*store.Sandbox, error) {
	now := m.now().UTC()
	for i := range evs {
		evs[i].At = now
	}
	if r.persistence != nil {
		if r.startup == nil {
			r.startup = &startup{}
		}
		r.startup.Persistent = true
	}
	if n := egress(r.network); n != nil { // recorded for Network
		if r.startup == nil {
			r.startup = &startup{}
		}
		r.startup.Network = &api.NetworkSpec{AllowInternetAccess: n.AllowInternet, AllowedDomains: n.AllowedDomains}
	}
	var plan []byte
	if !r.startup.empty() || r.persistence != nil || r.startup.hasNetwork() {
		var err error
		if plan, err = json.Marshal(r.startup); err != nil {
			return nil, fmt.Errorf("record startup plan: %w", err)
		}
	}
	sb := &store.Sandbox{
		AccessToken: newToken(), Spec: plan,
		ID: id, Image: r.Image, CPU: r.CPU, Memory: r.Memory, TTL: r.ttl, Env: r.Env,
		Template: r.Template, TemplateVersion: r.TemplateVersion,
		Status: string(api.StatusPending), Runtime: m.rt.Name(), CreatedAt: now, UpdatedAt: now,
		Pool: r.pool, ManagedBy: r.ManagedBy, Metadata: r.Metadata,
	}
	if r.ttl > 0 && r.pool == "" { // a pooled sandbox's life starts when it is claimed
		exp := now.Add(time.Duration(r.ttl) * time.Second)
		sb.ExpiresAt = &exp
	}
	arrived := m.usageReads.Load()
	m.admitMu.Lock()
	if err := m.admitRecord(ctx, arrived, r, sb); err != nil {
		m.admitMu.Unlock()
		return nil, err
	}
	if sb.Owner == "" {
		// Admitted: the record is reserved and admitMu let go, so that
		// concurrent creates wait for the store's writer side by side
		// instead of one after another; admission counts the
		// reservation until the record is stored.
		m.reserved.add(sb)
		m.admitMu.Unlock()
		defer m.reserved.remove(sb.ID)
	} else {
		// An owned sandbox's record is stored under admitMu, which
		// removeOwned relies on.
		defer m.admitMu.Unlock()
	}
	if err := m.store.CreateSandboxLimited(ctx, sb, m.cfg.MaxSandboxes, evs...); err != nil {
		var limit *store.LimitError
		if errors.As(err, &limit) {
			u, uerr := m.Usage(ctx)
			if uerr != nil {
				u = api.Usage{Sandboxes: limit.Count, MaxSandboxes: limit.Limit}
			}
			return nil, limitError(u)
		}
		return nil, err
	}
	return sb, nil
}

// admitRecord admits sb, the record createRecord is about to store for r,
// and gives it its tenant and owner. The caller holds admitMu, and found
// m.usageReads at arrived before it took it.
func (m *Manager) admitRecord(ctx context.Context, arrived uint64, r *resolved, sb *store.Sandbox) error {
	if err := m.admit(ctx, arrived, r.milliCPU, r.memBytes, true); err != nil {
		return err
	}
	sb.Tenant = auth.TenantOf(ctx)
	if r.pool != "" {
		return nil
	}
	owner, err := m.owner(ctx)
	if err != nil || owner == nil {
		return err
	}
	if err := m.admitOwned(ctx, owner, r.milliCPU, r.memBytes); err != nil {
		return err
	}
	sb.Owner, sb.Tenant = owner.ID, owner.Tenant
	return nil
}

// start creates and starts the runtime side of a pending sandbox, runs its
// startup plan, and marks it running, or failed with the reason. It
// releases the sandbox's making (made) under its lock as it marks it
// running (markRunning), so that whoever sees it running may stop and
// start it again at once; its caller releases it on the other ends.
func (m *Manager) start(ctx context.Context, id string, r *resolved, made func()) (*store.Sandbox, error) {
	// A Delete ends the runtime's start as it ends a startup: a start may
	// wait long (a Pod the scheduler cannot place), and the sandbox's
	// lock, which the start holds, would keep the Delete waiting.
	lctx, cancel := context.WithCancel(ctx)
	m.starting.Store(id, cancel)
	sb, err := m.launch(lctx, id, r)
	m.starting.Delete(id)
	cancel()
	if err != nil || sb.Status != string(api.StatusPending) {
		return sb, err
	}
	if r.startup.empty() {
		return m.markRunning(ctx, id, "agent ready", made)
	}
	// The startup runs without the lock, so that a Delete can cancel it.
	sctx, cancel := context.WithCancel(ctx)
	m.starting.Store(id, cancel)
	err = m.runStartup(sctx, id, r.startup)
	m.starting.Delete(id)
	cancel()
	if err != nil {
		return m.failStartup(ctx, id, err)
	}
	return m.markRunning(ctx, id, "ready: startup complete", made)
}

// failStartup fails a sandbox whose startup failed: its console output is
// kept in its history, its runtime state released.
func (m *Manager) failStartup(ctx context.Context, id string, cause error) (*store.Sandbox, error) {
	unlock := m.lock(id)
	defer unlock()
	ctx = context.WithoutCancel(ctx)
	if sb, err := m.store.GetSandbox(ctx, id); err != nil || sb.Status != string(api.StatusPending) {
		return sb, sandboxErr(err) // deleted meanwhile
	}
	if logs, err := m.consoleTail(ctx, id); err == nil && logs != "" {
		m.event(ctx, id, string(api.StatusPending), "console: "+logs)
	}
	if err := m.rt.Delete(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("clean up sandbox after failed startup", "sandbox", id, "err", err)
	}
	return m.fail(ctx, id, cause.Error())
}

// markRunning marks a pending sandbox running, unless it was deleted or
// failed meanwhile. It releases the sandbox's making (made) once it holds
// the sandbox's lock.
func (m *Manager) markRunning(ctx context.Context, id, reason string, made func()) (*store.Sandbox, error) {
	unlock := m.lock(id)
	defer unlock()
	made()
	ctx = context.WithoutCancel(ctx)
	if sb, err := m.store.GetSandbox(ctx, id); err != nil || sb.Status != string(api.StatusPending) {
		return sb, sandboxErr(err)
	}
	return m.setStatus(ctx, id, api.StatusRunning, reason)
}

// launch creates and starts the runtime side of a pending sandbox; it
// returns the record, still pending on success.
func (m *Manager) launch(ctx context.Context, id string, r *resolved) (*store.Sandbox, error) {
	unlock := m.lock(id)
	defer unlock()
	// The sandbox may have been deleted while its image was prepared.
	if sb, err := m.store.GetSandbox(ctx, id); err != nil || sb.Status != string(api.StatusPending) {
		return sb, sandboxErr(err)
	}
	spec := &sandbox.Spec{
		ID:    id,
		Image: r.Image,
		Env:   sandboxEnv(r.Env),
		Cwd:   sandbox.WorkDir,
		Resources: sandbox.Resources{
			MilliCPU: r.milliCPU, MemoryBytes: r.memBytes,
			Pids: m.cfg.DefaultPids, DiskBytes: r.diskBytes,
		},
		Network:      sandbox.Network{Egress: egress(r.network)},
		Labels:       map[string]string{"agent2env.image": r.Image},
		Mounts:       r.Mounts,
		Persistence:  r.persistence,
		RuntimeClass: r.runtimeClass,
	}
	if r.startup.empty() {
		// Not before a template's startup, which could change what an
		// interpreter started ahead of it would have seen.
		spec.SpareKernel = r.SpareKernel
	}
	if err := m.rt.Create(ctx, spec); err != nil {
		if errdefs.IsNoSpace(err) {
			return nil, unmadeError{err}
		}
		return m.fail(context.WithoutCancel(ctx), id, fmt.Sprintf("create sandbox: %v", err))
	}
	if err := m.rt.Start(ctx, id); err != nil {
		if derr := m.rt.Delete(context.WithoutCancel(ctx), id); derr != nil {
			m.log.Warn("clean up sandbox after failed start", "sandbox", id, "err", derr)
		}
		ctx := context.WithoutCancel(ctx) // a Delete may have ended the start
		if errors.Is(err, sandbox.ErrImageNotFound) {
			return m.fail(ctx, id, reasonPullImage+r.Image+": "+err.Error())
		}
		return m.fail(ctx, id, fmt.Sprintf("start sandbox: %v", err))
	}
	return m.store.GetSandbox(ctx, id)
}

// unmadeError is launch's error when the runtime refused to make the
// sandbox for want of room on the host (errdefs.NoSpace: a disk the oci
// runtime allocates whole, --disk-provisioning thick, or a full file
// system): the runtime made nothing, and the record is left pending for
// the caller, which refuses the create (refuseUnmade) when it has not
// answered it yet, or fails the sandbox.
type unmadeError struct{ error }

func (e unmadeError) Unwrap() error { return e.error }

// refuseUnmade answers a create whose sandbox the runtime refused to make
// (unmadeError's cause err) as admission refuses one: its record sb is
// removed, and the refusal carries the usage and a suggestion.
func (m *Manager) refuseUnmade(ctx context.Context, sb *store.Sandbox, err error) error {
	ctx = context.WithoutCancel(ctx)
	m.dropRecords(ctx, []*store.Sandbox{sb})
	return m.hostRefusal(ctx, err, api.CodeNoSpace)
}

// fail marks a sandbox failed with reason.
func (m *Manager) fail(ctx context.Context, id, reason string) (*store.Sandbox, error) {
	m.log.Warn("sandbox failed", "sandbox", id, "reason", reason)
	return m.setStatus(ctx, id, api.StatusFailed, reason)
}

// sandboxEnv is the sandbox's own environment (template and request) as
// a Spec holds it; the runtime puts it over the image's.
func sandboxEnv(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// The reasons a sandbox fails with when its image could not be had: before
// its runtime was asked to start it, or, for a runtime that pulls images
// itself, by its start (sandbox.ErrImageNotFound); StartFailure tells them
// apart.
const (
	reasonLookUpImage  = "look up image "
	reasonPrepareImage = "prepare image "
	reasonPullImage    = "pull image "
)

// The classes of StartFailure's errors: every one is ErrStartFailed, and
// one for a sandbox whose image could not be found or prepared is also
// ErrImageUnavailable (and ErrInvalidArgument: the request named it).
var (
	ErrStartFailed      = errors.New("sandbox failed to start")
	ErrImageUnavailable = errors.New("image unavailable")
)

// ParseCPU returns a sandbox's CPU limit s in millicores, refusing with
// ErrInvalidArgument one that does not parse or is below
// quantity.MinMilliCPU ("0.0001" parses but rounds to 0, which runtimes
// take as no limit; below 10m they refuse to start the sandbox).
func ParseCPU(s string) (int64, error) {
	milli, err := quantity.ParseCPU(s)
	if err != nil {
		return 0, errdefs.Invalid("%v", err)
	}
	if milli < quantity.MinMilliCPU {
		return 0, errdefs.Invalid("cpu %s is below the %dm minimum", s, quantity.MinMilliCPU)
	}
	return milli, nil
}

// StartFailure is why failed sandbox sb did not start, classified.
func StartFailure(sb *store.Sandbox) error {
	if strings.HasPrefix(sb.Reason, reasonLookUpImage) || strings.HasPrefix(sb.Reason, reasonPrepareImage) ||
		strings.HasPrefix(sb.Reason, reasonPullImage) {
		return startError{errdefs.Invalid("%s", sb.Reason), true}
	}
	return startError{fmt.Errorf("sandbox %s failed to start: %s", sb.ID, sb.Reason), false}
}

// startError is StartFailure's error.
type startError struct {
	error
	image bool
}

func (e startError) Unwrap() error { return e.error }
func (e startError) Is(target error) bool {
	return target == ErrStartFailed || e.image && target == ErrImageUnavailable
}
