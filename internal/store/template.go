package store

import (
	"context"
	"time"

	"github.com/agent2env/agent2env/api"
)

// Template is the record of a named template. Its versions are kept
// apart (TemplateVersion); LatestVersion is the newest of them.
type Template struct {
	ID          string
	Name        string
	DisplayName string
	Description string
	// Tags is never nil when read.
	Tags          []string
	Author        string
	IsPublic      bool
	LatestVersion int
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// Spec is the spec of LatestVersion. Reads fill it; writes ignore it
	// and take specs only from TemplateVersion values.
	Spec api.TemplateSpec
}

// TemplateVersion is one immutable version of a template.
type TemplateVersion struct {
	ID         string
	TemplateID string
	Version    int
	Spec       api.TemplateSpec
	Changelog  string
	CreatedBy  string
	CreatedAt  time.Time
}

// TemplateFilter selects templates. Zero values select everything.
type TemplateFilter struct {
	// Tag keeps templates carrying this tag (whole tag, ASCII
	// case-insensitive).
	Tag string
	// Search keeps templates whose name, display name or description
	// contains it (ASCII case-insensitive).
	Search string
	// Offset skips that many matches; Limit <= 0 returns all the rest.
	Offset, Limit int
}

// Templates keeps templates and their immutable versions. Templates are
// addressed by name, which is unique. Errors are errdefs classes:
// ErrNotFound for an unknown template or version, ErrAlreadyExists for a
// name (or id) already in use.
type Templates interface {
	// CreateTemplate stores t with its first version v atomically. It
	// sets t.LatestVersion and v.Version to 1, v.TemplateID to t.ID and
	// t.Spec to v.Spec.
	CreateTemplate(ctx context.Context, t *Template, v *TemplateVersion) error
	// GetTemplate returns the template named name with its latest spec.
	GetTemplate(ctx context.Context, name string) (*Template, error)
	// ListTemplates returns the templates f selects, newest first (ties by
	// name), each with its latest spec, and how many match f regardless
	// of Offset and Limit.
	ListTemplates(ctx context.Context, f TemplateFilter) (items []*Template, total int, err error)
	// AddTemplateVersion appends a version to the template named name
	// atomically. fn gets the stored template (with its latest spec); it
	// may change DisplayName, Description, Tags, IsPublic and UpdatedAt,
	// and returns the new version's ID, Spec, Changelog, CreatedBy and
	// CreatedAt. The store numbers it LatestVersion+1. fn's error aborts
	// and is returned. fn runs inside the store's transaction: it must be
	// quick and must not call the store.
	AddTemplateVersion(ctx context.Context, name string, fn func(t *Template) (*TemplateVersion, error)) (*Template, *TemplateVersion, error)
	// DeleteTemplate removes the template named name and all its versions.
	DeleteTemplate(ctx context.Context, name string) error
	// ListTemplateVersions returns the versions of the template named
	// name, newest first.
	ListTemplateVersions(ctx context.Context, name string) ([]*TemplateVersion, error)
	// ListTemplateVersionPage returns the page p of the versions of the
	// template named name, by number: lowest first, or highest first
	// (p.Desc); and the cursor of the next page ("" after the last), a
	// VersionCursor, which p.After takes too. ErrNotFound if there is no
	// such template.
	ListTemplateVersionPage(ctx context.Context, name string, p Page) (items []*TemplateVersion, next string, err error)
	// GetTemplateVersion returns version of the template named name.
	GetTemplateVersion(ctx context.Context, name string, version int) (*TemplateVersion, error)
}
