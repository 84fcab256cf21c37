// Package template keeps sandbox templates: named, versioned specs of what
// a sandbox runs, with LiteBoxd's semantics. Every change makes a new
// immutable version (an update, a rollback, an import); versions are
// never rewritten. Service validates and completes specs (ValidateSpec),
// serves the template API's operations, exports and imports LiteBoxd YAML
// (apiVersion liteboxd/v1), and resolves a template version for the
// sandbox manager (Resolve).
//
// Errors are errdefs classes carrying LiteBoxd's wire codes
// (TEMPLATE_NOT_FOUND, VERSION_NOT_FOUND, TEMPLATE_EXISTS, INVALID_YAML).
package template

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/netguard"
	"github.com/agent2env/agent2env/internal/store"
)

// Prepuller starts pulling an image ahead of the sandboxes that will need
// it. Prepull must only start the work and return promptly, with the id
// of the pull task; its context ends with the caller's request. A pull
// already in progress for the image is reported as ErrAlreadyExists or
// ErrFailedPrecondition.
type Prepuller interface {
	Prepull(ctx context.Context, image, template string) (id string, err error)
}

// Service is the template API over a store. It is safe for concurrent
// use; build it with New.
type Service struct {
	store   store.Templates
	prepull Prepuller // nil: prepull requests are ignored
	// sources refuses file sources that are plainly internal.
	sources *netguard.Guard
	// changed, when set, is told the name of each template made, given a
	// new version or deleted (WithChangeHook).
	changed func(ctx context.Context, name string)
	log     *slog.Logger
	now     func() time.Time
	newID   func(prefix string) string
	// parsing admits one import's YAML parse at a time: a 10 MiB file of
	// small nodes takes yaml.v3 about a gigabyte of allocations.
	parsing chan struct{}
}

// Option configures a Service.
type Option func(*Service)

// WithPrepuller makes the service start prepulls for autoPrepull and for
// imports asking for them.
func WithPrepuller(p Prepuller) Option { return func(s *Service) { s.prepull = p } }

// WithSourceGuard sets the guard that file source URLs are checked
// against when a template is made or changed (default: SourceGuard(nil)).
// The fetch checks again, after DNS.
func WithSourceGuard(g *netguard.Guard) Option { return func(s *Service) { s.sources = g } }

// SourceGuard returns the guard for template file sources: every internal
// address refused except what allow names (host names, IP addresses, CIDR
// prefixes of internal mirrors).
func SourceGuard(allow []string) (*netguard.Guard, error) {
	return netguard.New(netguard.Config{Allow: allow, Subject: "template file sources"})
}

// WithChangeHook makes the service call f with the name of each template
// it has made, given a new version (an update, a rollback, an import) or
// deleted, once the change is stored: what keeps sandboxes of a template
// ready (warm pools) retires them. f must return promptly; its context
// ends with the request's.
func WithChangeHook(f func(ctx context.Context, name string)) Option {
	return func(s *Service) { s.changed = f }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// WithClock sets the clock that stamps templates and versions.
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// New returns a Service keeping its templates in st.
func New(st store.Templates, opts ...Option) *Service {
	s := &Service{store: st, log: slog.Default(), now: time.Now, newID: randomID, parsing: make(chan struct{}, 1)}
	for _, o := range opts {
		o(s)
	}
	if s.sources == nil {
		s.sources = netguard.Must(SourceGuard(nil))
	}
	return s
}

// randomID returns prefix-xxxxxxxx, LiteBoxd's id form.
func randomID(prefix string) string {
	var b [4]byte
	rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// idAttempts bounds the retries when a random id is already in use.
const idAttempts = 3

// stamp is now as the store keeps it: UTC, microseconds.
func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Wire errors, with LiteBoxd's codes and messages.

func templateNotFound(name string) error {
	return errdefs.WithCode(errdefs.NotFound("Template '%s' not found", name), api.CodeTemplateNotFound)
}

func templateExists(name string) error {
	return errdefs.WithCode(errdefs.Conflict("template with name '%s' already exists", name), api.CodeTemplateExists)
}

// ifNotFound returns alt when err is an ErrNotFound, and err otherwise.
func ifNotFound(err, alt error) error {
	if errors.Is(err, errdefs.ErrNotFound) {
		return alt
	}
	return err
}

func toAPI(t *store.Template) *api.Template {
	spec := t.Spec
	tags := t.Tags
	if tags == nil {
		tags = []string{}
	}
	return &api.Template{
		ID: t.ID, Name: t.Name, DisplayName: t.DisplayName, Description: t.Description, Tags: tags,
		Author: t.Author, IsPublic: t.IsPublic, LatestVersion: t.LatestVersion,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Spec: &spec,
	}
}

func versionToAPI(v *store.TemplateVersion) *api.TemplateVersion {
	return &api.TemplateVersion{ID: v.ID, TemplateID: v.TemplateID, Version: v.Version, Spec: v.Spec,
		Changelog: v.Changelog, CreatedBy: v.CreatedBy, CreatedAt: v.CreatedAt}
}

// meta is the metadata of a create or an update. For an update, empty
// DisplayName and Description and nil Tags and IsPublic keep the stored
// values, as LiteBoxd's PUT does.
type meta struct {
	displayName, description string
	tags                     []string
	isPublic                 *bool
}

// The bounds of a template's metadata: with MaxSpecBytes, a stored
// template fits the API's largest JSON body, so it can be sent back.
const (
	maxDisplayName = 1 << 10
	maxDescription = 16 << 10
	maxTags        = 64
	maxTag         = 128
)

// check refuses metadata past its bounds, naming the field.
func (m meta) check() error {
	switch {
	case len(m.displayName) > maxDisplayName:
		return errdefs.Invalid("displayName is %d bytes; at most %d", len(m.displayName), maxDisplayName)
	case len(m.description) > maxDescription:
		return errdefs.Invalid("description is %d bytes; at most %d", len(m.description), maxDescription)
	case len(m.tags) > maxTags:
		return errdefs.Invalid("tags: %d of them; at most %d", len(m.tags), maxTags)
	// Refused by every store alike: PostgreSQL's text holds no NUL.
	case strings.ContainsRune(m.displayName, 0):
		return errdefs.Invalid("displayName must not contain NUL")
	case strings.ContainsRune(m.description, 0):
		return errdefs.Invalid("description must not contain NUL")
	}
	for _, t := range m.tags {
		if len(t) > maxTag {
			return errdefs.Invalid("tags: %.20q… is %d bytes; at most %d", t, len(t), maxTag)
		}
		if strings.ContainsRune(t, 0) {
			return errdefs.Invalid("tags: %q contains NUL", t)
		}
	}
	return nil
}

// Create makes a template with version 1 (changelog "Initial version").
// The name and spec are checked before the name is looked up. With
// AutoPrepull the spec's image is prepulled; a prepull that cannot start
// does not fail the create.
func (s *Service) Create(ctx context.Context, req api.CreateTemplateRequest) (*api.Template, error) {
	m := meta{req.DisplayName, req.Description, req.Tags, req.IsPublic}
	spec, err := s.check(req.Name, req.Spec)
	if err == nil {
		err = m.check()
	}
	if err != nil {
		return nil, err
	}
	t, err := s.create(ctx, req.Name, m, spec)
	if err != nil {
		return nil, err
	}
	if req.AutoPrepull {
		s.startPrepull(ctx, spec.Image, t.Name)
	}
	return toAPI(t), nil
}

func (s *Service) check(name string, spec api.TemplateSpec) (api.TemplateSpec, error) {
	if err := ValidateName(name); err != nil {
		return spec, err
	}
	return s.validate(spec)
}

// validate is ValidateSpec, and refuses file sources that are plainly
// internal: an internal IP literal or a loopback name.
func (s *Service) validate(spec api.TemplateSpec) (api.TemplateSpec, error) {
	out, err := ValidateSpec(spec)
	if err != nil {
		return out, err
	}
	for i, f := range out.Files {
		if f.Source == "" {
			continue
		}
		if err := s.sources.CheckURL(f.Source); err != nil {
			return api.TemplateSpec{}, errdefs.Invalid("invalid spec: files[%d] (%s): source %s: %v", i, f.Destination, f.Source, err)
		}
	}
	return out, nil
}

// create stores a new template with a checked spec.
func (s *Service) create(ctx context.Context, name string, m meta, spec api.TemplateSpec) (*store.Template, error) {
	now := s.stamp()
	public := true
	if m.isPublic != nil {
		public = *m.isPublic
	}
	tags := slices.Clone(m.tags)
	if tags == nil {
		tags = []string{}
	}
	for attempt := 1; ; attempt++ {
		t := &store.Template{
			ID: s.newID("tpl"), Name: name, DisplayName: m.displayName, Description: m.description, Tags: tags,
			IsPublic: public, CreatedAt: now, UpdatedAt: now,
		}
		v := &store.TemplateVersion{ID: s.newID("ver"), Spec: spec, Changelog: "Initial version", CreatedAt: now}
		err := s.store.CreateTemplate(ctx, t, v)
		if err == nil {
			s.change(ctx, name)
			return t, nil
		}
		if !errors.Is(err, errdefs.ErrAlreadyExists) {
			return nil, fmt.Errorf("create template %s: %w", name, err)
		}
		// The name, or by a rare chance a random id, is taken.
		if _, gerr := s.store.GetTemplate(ctx, name); !errors.Is(gerr, errdefs.ErrNotFound) || attempt == idAttempts {
			return nil, templateExists(name)
		}
	}
}

// ListOptions selects and pages templates. Page < 1 means 1; PageSize < 1
// or > 100 means 20 (LiteBoxd resets rather than clamps).
type ListOptions struct {
	Tag, Search    string
	Page, PageSize int
}

// Default and largest page sizes of List.
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
)

// List returns a page of the templates opts selects, newest first, each
// with its latest spec, and the effective page and page size.
func (s *Service) List(ctx context.Context, opts ListOptions) (*api.TemplateList, error) {
	if opts.Page < 1 {
		opts.Page = 1
	}
	if opts.PageSize < 1 || opts.PageSize > MaxPageSize {
		opts.PageSize = DefaultPageSize
	}
	offset := math.MaxInt
	if opts.Page-1 <= math.MaxInt/opts.PageSize {
		offset = (opts.Page - 1) * opts.PageSize
	}
	ts, total, err := s.store.ListTemplates(ctx, store.TemplateFilter{
		Tag: opts.Tag, Search: opts.Search, Offset: offset, Limit: opts.PageSize,
	})
	if err != nil {
		return nil, err
	}
	out := &api.TemplateList{Items: []api.Template{}, Total: total, Page: opts.Page, PageSize: opts.PageSize}
	for _, t := range ts {
		out.Items = append(out.Items, *toAPI(t))
	}
	return out, nil
}

// Get returns the template named name with its latest spec.
func (s *Service) Get(ctx context.Context, name string) (*api.Template, error) {
	t, err := s.store.GetTemplate(ctx, name)
	if err != nil {
		return nil, ifNotFound(err, templateNotFound(name))
	}
	return toAPI(t), nil
}

// Update makes version N+1 of the template named name with req.Spec (a
// full replacement) and req.Changelog. The spec is checked before the
// name is looked up.
func (s *Service) Update(ctx context.Context, name string, req api.UpdateTemplateRequest) (*api.Template, error) {
	m := meta{req.DisplayName, req.Description, req.Tags, req.IsPublic}
	spec, err := s.validate(req.Spec)
	if err == nil {
		err = m.check()
	}
	if err != nil {
		return nil, err
	}
	t, err := s.update(ctx, name, m, spec, req.Changelog)
	if err != nil {
		return nil, err
	}
	return toAPI(t), nil
}

// update adds a version with a checked spec and merges m into the
// template's metadata.
func (s *Service) update(ctx context.Context, name string, m meta, spec api.TemplateSpec, changelog string) (*store.Template, error) {
	return s.addVersion(ctx, name, func(t *store.Template) (api.TemplateSpec, string, error) {
		if m.displayName != "" {
			t.DisplayName = m.displayName
		}
		if m.description != "" {
			t.Description = m.description
		}
		if m.tags != nil {
			t.Tags = slices.Clone(m.tags)
		}
		if m.isPublic != nil {
			t.IsPublic = *m.isPublic
		}
		return spec, changelog, nil
	})
}

// addVersion adds a version whose spec and changelog fn gives after
// changing the template's metadata; it stamps UpdatedAt and retries when a
// random version id is taken.
func (s *Service) addVersion(ctx context.Context, name string, fn func(t *store.Template) (api.TemplateSpec, string, error)) (*store.Template, error) {
	for attempt := 1; ; attempt++ {
		now := s.stamp()
		var fnErr error
		t, _, err := s.store.AddTemplateVersion(ctx, name, func(t *store.Template) (*store.TemplateVersion, error) {
			spec, changelog, err := fn(t)
			if err != nil {
				fnErr = err
				return nil, err
			}
			t.UpdatedAt = now
			return &store.TemplateVersion{ID: s.newID("ver"), Spec: spec, Changelog: changelog, CreatedAt: now}, nil
		})
		switch {
		case err == nil:
			s.change(ctx, name)
			return t, nil
		case fnErr != nil:
			return nil, fnErr
		case errors.Is(err, errdefs.ErrAlreadyExists) && attempt < idAttempts:
			continue // a random version id was taken
		}
		return nil, ifNotFound(err, templateNotFound(name))
	}
}

// Delete removes the template named name and all its versions. Sandboxes
// made from it are not touched (those of warm pools, no one's yet, are
// retired through the change hook).
func (s *Service) Delete(ctx context.Context, name string) error {
	if err := s.store.DeleteTemplate(ctx, name); err != nil {
		return ifNotFound(err, templateNotFound(name))
	}
	s.change(ctx, name)
	return nil
}

// change tells the change hook, if any, that the template named name
// changed.
func (s *Service) change(ctx context.Context, name string) {
	if s.changed != nil {
		s.changed(ctx, name)
	}
}

// Versions lists the versions of the template named name, newest first.
func (s *Service) Versions(ctx context.Context, name string) (*api.VersionList, error) {
	return s.VersionPage(ctx, name, store.Page{Desc: true})
}

// VersionPage returns the page p of the versions of the template named
// name, by number (newest first with p.Desc), with the cursor of the next
// page.
func (s *Service) VersionPage(ctx context.Context, name string, p store.Page) (*api.VersionList, error) {
	vs, next, err := s.store.ListTemplateVersionPage(ctx, name, p)
	if err != nil {
		return nil, ifNotFound(err, templateNotFound(name))
	}
	out := &api.VersionList{Items: []api.TemplateVersion{}, Total: len(vs), NextCursor: next}
	for _, v := range vs {
		out.Items = append(out.Items, *versionToAPI(v))
	}
	return out, nil
}

// Version returns one version of the template named name. As LiteBoxd,
// an unknown template and an unknown version are both VERSION_NOT_FOUND.
func (s *Service) Version(ctx context.Context, name string, version int) (*api.TemplateVersion, error) {
	v, err := s.getVersion(ctx, name, version)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, errdefs.WithCode(err, api.CodeVersionNotFound)
		}
		return nil, err
	}
	return versionToAPI(v), nil
}

// getVersion returns a version, or an ErrNotFound (coded
// TEMPLATE_NOT_FOUND) saying whether the template or the version is
// missing.
func (s *Service) getVersion(ctx context.Context, name string, version int) (*store.TemplateVersion, error) {
	v, err := s.store.GetTemplateVersion(ctx, name, version)
	if !errors.Is(err, errdefs.ErrNotFound) {
		return v, err
	}
	if _, terr := s.store.GetTemplate(ctx, name); terr != nil {
		return nil, ifNotFound(terr, templateNotFound(name))
	}
	return nil, errdefs.WithCode(errdefs.NotFound("version %d not found", version), api.CodeTemplateNotFound)
}

// Rollback makes version N+1 of the template named name with the spec of
// req.TargetVersion; history is not rewritten and metadata is unchanged.
// The changelog defaults to "Rolled back to version X".
func (s *Service) Rollback(ctx context.Context, name string, req api.RollbackRequest) (*api.RollbackResponse, error) {
	if req.TargetVersion < 1 {
		return nil, errdefs.Invalid("target version must be at least 1")
	}
	target, err := s.getVersion(ctx, name, req.TargetVersion)
	if err != nil {
		return nil, err
	}
	changelog := req.Changelog
	if changelog == "" {
		changelog = fmt.Sprintf("Rolled back to version %d", req.TargetVersion)
	}
	var from int
	t, err := s.addVersion(ctx, name, func(t *store.Template) (api.TemplateSpec, string, error) {
		if t.ID != target.TemplateID {
			// The template was deleted and made again meanwhile.
			return api.TemplateSpec{}, "", errdefs.WithCode(errdefs.NotFound("version %d not found", req.TargetVersion), api.CodeTemplateNotFound)
		}
		from = t.LatestVersion
		return target.Spec, changelog, nil
	})
	if err != nil {
		return nil, err
	}
	return &api.RollbackResponse{ID: t.ID, Name: t.Name, LatestVersion: t.LatestVersion,
		RolledBackFrom: from, RolledBackTo: req.TargetVersion, UpdatedAt: t.UpdatedAt}, nil
}

// Resolve returns the spec of version of the template named name (0: the
// latest) and the version's number, for creating a sandbox. An unknown
// template or version is an ErrNotFound coded TEMPLATE_NOT_FOUND.
func (s *Service) Resolve(ctx context.Context, name string, version int) (api.TemplateSpec, int, error) {
	switch {
	case version < 0:
		return api.TemplateSpec{}, 0, errdefs.Invalid("template version %d is negative", version)
	case version == 0:
		t, err := s.store.GetTemplate(ctx, name)
		if err != nil {
			return api.TemplateSpec{}, 0, ifNotFound(err, errdefs.WithCode(
				errdefs.NotFound("template '%s' not found", name), api.CodeTemplateNotFound))
		}
		return t.Spec, t.LatestVersion, nil
	}
	v, err := s.store.GetTemplateVersion(ctx, name, version)
	if err != nil {
		return api.TemplateSpec{}, 0, ifNotFound(err, errdefs.WithCode(
			errdefs.NotFound("template '%s' version %d not found", name, version), api.CodeTemplateNotFound))
	}
	return v.Spec, v.Version, nil
}

// ExportYAML returns the template named name as a SandboxTemplate YAML
// document with the spec of version (<= 0: the latest).
func (s *Service) ExportYAML(ctx context.Context, name string, version int) ([]byte, error) {
	t, err := s.store.GetTemplate(ctx, name)
	if err != nil {
		return nil, ifNotFound(err, templateNotFound(name))
	}
	spec := t.Spec
	if version > 0 && version != t.LatestVersion {
		v, err := s.getVersion(ctx, name, version)
		if err != nil {
			return nil, err
		}
		spec = v.Spec
	}
	return marshalYAML(toDocument(t, spec))
}

// ExportAll returns a SandboxTemplateList of every template carrying tag
// (any, when empty) and named in names (any, when empty), newest first,
// each with its latest spec.
func (s *Service) ExportAll(ctx context.Context, tag string, names []string) ([]byte, error) {
	ts, _, err := s.store.ListTemplates(ctx, store.TemplateFilter{Tag: tag})
	if err != nil {
		return nil, err
	}
	list := listDocument{APIVersion: api.YAMLAPIVersion, Kind: api.KindList, ExportedAt: s.stamp(), Items: []document{}}
	for _, t := range ts {
		if len(names) > 0 && !slices.Contains(names, t.Name) {
			continue
		}
		list.Items = append(list.Items, toDocument(t, t.Spec))
	}
	return marshalYAML(list)
}

// Import creates or updates the templates of a YAML document, a list or a
// "---" stream of them, by strategy (create-only, update-only,
// create-or-update; empty means create-or-update). Each template succeeds
// or fails alone and the result says what happened to each, in document
// order; updates make a new version every time (changelog "Imported from
// YAML"). With prepull, the images of created and updated templates are
// prepulled and listed in PrepullStarted.
//
// Import fails as a whole, storing nothing, only when data is not YAML or
// too costly to decode (INVALID_YAML), a document is of another kind or
// apiVersion, or data holds more than MaxImportItems templates. One
// import's YAML is parsed at a time.
func (s *Service) Import(ctx context.Context, data []byte, strategy string, prepull bool) (*api.ImportResult, error) {
	select {
	case s.parsing <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("import templates: %w", context.Cause(ctx))
	}
	items, err := parseImport(data)
	<-s.parsing
	if err != nil {
		return nil, err
	}
	if strategy == "" {
		strategy = api.StrategyCreateOrUpdate
	}
	known := strategy == api.StrategyCreateOnly || strategy == api.StrategyUpdateOnly || strategy == api.StrategyCreateOrUpdate
	res := &api.ImportResult{Total: len(items), Results: []api.ImportResultItem{}}
	for _, it := range items {
		r := api.ImportResultItem{Name: it.meta.Name}
		var (
			t   *store.Template
			err = it.err
		)
		switch {
		case err != nil:
		case it.meta.Name == "":
			err = errors.New("template name is required")
		case !known:
			err = fmt.Errorf("invalid strategy: %s", strategy)
		default:
			r.Action, t, err = s.importOne(ctx, it, strategy)
		}
		switch {
		case err != nil && r.Action == api.ActionSkipped:
			r.Error = err.Error()
			res.Skipped++
		case err != nil:
			r.Action, r.Error = api.ActionFailed, err.Error()
			res.Failed++
		case r.Action == api.ActionCreated:
			res.Created++
		case r.Action == api.ActionUpdated:
			res.Updated++
		}
		if err == nil {
			r.Version = t.LatestVersion
			if prepull && s.startPrepull(ctx, t.Spec.Image, t.Name) {
				res.PrepullStarted = append(res.PrepullStarted, t.Spec.Image)
			}
		}
		res.Results = append(res.Results, r)
	}
	return res, nil
}

// importOne applies one decoded template. A skip is reported as
// ActionSkipped with the reason as error.
func (s *Service) importOne(ctx context.Context, it importItem, strategy string) (string, *store.Template, error) {
	name := it.meta.Name
	_, err := s.store.GetTemplate(ctx, name)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return "", nil, err
	}
	exists := err == nil
	switch {
	case exists && strategy == api.StrategyCreateOnly:
		return api.ActionSkipped, nil, errors.New("template already exists (strategy=create-only)")
	case !exists && strategy == api.StrategyUpdateOnly:
		return api.ActionSkipped, nil, errors.New("template not found (strategy=update-only)")
	}
	m := meta{it.meta.DisplayName, it.meta.Description, it.meta.Tags, it.meta.IsPublic}
	if err := m.check(); err != nil {
		return "", nil, err
	}
	if !exists {
		spec, err := s.check(name, it.spec)
		if err != nil {
			return "", nil, err
		}
		t, err := s.create(ctx, name, m, spec)
		if err == nil || !errors.Is(err, errdefs.ErrAlreadyExists) || strategy != api.StrategyCreateOrUpdate {
			return api.ActionCreated, t, err
		}
		// Made by someone else meanwhile: update it instead.
	}
	spec, err := s.validate(it.spec)
	if err != nil {
		return "", nil, err
	}
	t, err := s.update(ctx, name, m, spec, "Imported from YAML")
	return api.ActionUpdated, t, err
}

// startPrepull asks the prepuller, if any, to pull img for template and
// reports whether a pull is now under way. Failures are logged: they
// never fail the create or import that asked.
func (s *Service) startPrepull(ctx context.Context, img, template string) bool {
	if s.prepull == nil {
		return false
	}
	id, err := s.prepull.Prepull(ctx, img, template)
	if err != nil {
		if errors.Is(err, errdefs.ErrAlreadyExists) || errors.Is(err, errdefs.ErrFailedPrecondition) {
			return true // already being pulled
		}
		s.log.Warn("start prepull", "image", img, "template", template, "err", err)
		return false
	}
	s.log.Debug("prepull started", "image", img, "template", template, "prepull", id)
	return true
}
