package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/agent2env/agent2env/api"
)

// TemplateService holds the template endpoints: named, versioned sandbox
// specs (LiteBoxd's /templates). Use it as Client.Template.
type TemplateService struct {
	c *Client
}

// ListTemplatesOptions filter and page a template listing. The zero value
// lists the first page of every template with the daemon's page size
// (20; at most 100).
type ListTemplatesOptions struct {
	// Tag keeps the templates carrying this exact tag.
	Tag string
	// Search keeps the templates whose name, display name or description
	// contains it, ignoring case.
	Search string
	// Page counts from 1; 0 means the first.
	Page int
	// PageSize is the number of templates a page; 0 means the daemon's
	// default.
	PageSize int
}

// query returns the options as the query string of GET /templates,
// leaving out the zero ones.
func (o ListTemplatesOptions) query() url.Values {
	q := url.Values{}
	if o.Tag != "" {
		q.Set("tag", o.Tag)
	}
	if o.Search != "" {
		q.Set("search", o.Search)
	}
	if o.Page != 0 {
		q.Set("page", strconv.Itoa(o.Page))
	}
	if o.PageSize != 0 {
		q.Set("pageSize", strconv.Itoa(o.PageSize))
	}
	return q
}

// templatePath returns the escaped API path of template name plus suffix.
func templatePath(name, suffix string) (string, error) {
	if name == "" {
		return "", invalidf("template name is empty")
	}
	return "/templates/" + url.PathEscape(name) + suffix, nil
}

// Create creates a template, whose first version has req.Spec. With
// req.AutoPrepull the daemon also starts prepulling its image.
func (s *TemplateService) Create(ctx context.Context, req api.CreateTemplateRequest) (*api.Template, error) {
	var t api.Template
	if err := s.c.doJSON(ctx, http.MethodPost, "/templates", req, &t); err != nil {
		return nil, wrapf(err, "create template %s", req.Name)
	}
	return &t, nil
}

// List returns one page of the templates matching opts, newest first,
// each with its latest spec.
func (s *TemplateService) List(ctx context.Context, opts ListTemplatesOptions) (*api.TemplateList, error) {
	var l api.TemplateList
	if err := s.c.doJSONQuery(ctx, http.MethodGet, "/templates", opts.query(), nil, &l); err != nil {
		return nil, wrapf(err, "list templates")
	}
	return &l, nil
}

// Get returns a template with its latest spec.
func (s *TemplateService) Get(ctx context.Context, name string) (*api.Template, error) {
	p, err := templatePath(name, "")
	if err != nil {
		return nil, wrapf(err, "get template")
	}
	var t api.Template
	if err := s.c.doJSON(ctx, http.MethodGet, p, nil, &t); err != nil {
		return nil, wrapf(err, "get template %s", name)
	}
	return &t, nil
}

// Update makes a new version of a template with req.Spec, which replaces
// the old spec whole, and returns the template as it is now. See
// api.UpdateTemplateRequest for which metadata an empty field keeps.
func (s *TemplateService) Update(ctx context.Context, name string, req api.UpdateTemplateRequest) (*api.Template, error) {
	p, err := templatePath(name, "")
	if err != nil {
		return nil, wrapf(err, "update template")
	}
	var t api.Template
	if err := s.c.doJSON(ctx, http.MethodPut, p, req, &t); err != nil {
		return nil, wrapf(err, "update template %s", name)
	}
	return &t, nil
}

// Delete removes a template and all its versions. Sandboxes made from it
// keep running.
func (s *TemplateService) Delete(ctx context.Context, name string) error {
	p, err := templatePath(name, "")
	if err == nil {
		err = s.c.doJSON(ctx, http.MethodDelete, p, nil, nil)
	}
	if err != nil {
		return wrapf(err, "delete template %s", name)
	}
	return nil
}

// ListVersions returns every version of a template, newest first.
func (s *TemplateService) ListVersions(ctx context.Context, name string) (*api.VersionList, error) {
	return s.ListVersionsPage(ctx, name, ListVersionsOptions{})
}

// ListVersionsOptions asks for a page of a template's versions (agent2env
// additions to the list). The zero value asks for every version, newest
// first.
type ListVersionsOptions struct {
	// Limit and Cursor ask for one page (Limit 0: every version); the
	// next page's cursor is the list's NextCursor.
	Limit  int
	Cursor string
	// Order is the list's order by version: "" (the daemon's default,
	// newest first), api.OrderAsc oldest first or api.OrderDesc newest
	// first.
	Order api.Order
}

// ListVersionsPage is ListVersions' page that opts asks for: one page
// when opts.Limit is set.
func (s *TemplateService) ListVersionsPage(ctx context.Context, name string, opts ListVersionsOptions) (*api.VersionList, error) {
	p, err := templatePath(name, "/versions")
	if err != nil {
		return nil, wrapf(err, "list template versions")
	}
	var l api.VersionList
	if err := s.c.doJSONQuery(ctx, http.MethodGet, p, pageQuery(opts.Limit, opts.Cursor, opts.Order), nil, &l); err != nil {
		return nil, wrapf(err, "list versions of template %s", name)
	}
	return &l, nil
}

// GetVersion returns one version of a template.
func (s *TemplateService) GetVersion(ctx context.Context, name string, version int) (*api.TemplateVersion, error) {
	p, err := templatePath(name, "/versions/"+strconv.Itoa(version))
	if err != nil {
		return nil, wrapf(err, "get template version")
	}
	var v api.TemplateVersion
	if err := s.c.doJSON(ctx, http.MethodGet, p, nil, &v); err != nil {
		return nil, wrapf(err, "get version %d of template %s", version, name)
	}
	return &v, nil
}

// Rollback makes a new version of a template with the spec of
// targetVersion; history is never rewritten. An empty changelog lets the
// daemon write "Rolled back to version N".
func (s *TemplateService) Rollback(ctx context.Context, name string, targetVersion int, changelog string) (*api.RollbackResponse, error) {
	p, err := templatePath(name, "/rollback")
	if err != nil {
		return nil, wrapf(err, "roll back template")
	}
	var out api.RollbackResponse
	req := api.RollbackRequest{TargetVersion: targetVersion, Changelog: changelog}
	if err := s.c.doJSON(ctx, http.MethodPost, p, req, &out); err != nil {
		return nil, wrapf(err, "roll back template %s to version %d", name, targetVersion)
	}
	return &out, nil
}

// ExportYAML returns a template as a SandboxTemplate YAML document, which
// ImportExport.ImportTemplates reads back. version <= 0 exports the
// latest version.
func (s *TemplateService) ExportYAML(ctx context.Context, name string, version int) ([]byte, error) {
	p, err := templatePath(name, "/export")
	if err != nil {
		return nil, wrapf(err, "export template")
	}
	var q url.Values
	if version > 0 {
		q = url.Values{"version": {strconv.Itoa(version)}}
	}
	b, err := s.c.getBytes(ctx, p, q)
	if err != nil {
		return nil, wrapf(err, "export template %s", name)
	}
	return b, nil
}
