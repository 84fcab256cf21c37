package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// templateSelect reads a template joined with its latest version's spec.
const templateSelect = `SELECT t.id, t.name, t.display_name, t.description, t.tags, t.author, t.is_public,
	t.latest_version, t.created_at, t.updated_at, v.spec
	FROM templates t JOIN template_versions v ON v.template_id = t.id AND v.version = t.latest_version`

const versionColumns = `v.id, v.template_id, v.version, v.spec, v.changelog, v.created_by, v.created_at`

func scanTemplate(row scanner) (*store.Template, error) {
	var (
		t                store.Template
		tags, spec       string
		created, updated int64
	)
	if err := row.Scan(&t.ID, &t.Name, &t.DisplayName, &t.Description, &tags, &t.Author, &t.IsPublic,
		&t.LatestVersion, &created, &updated, &spec); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(tags), &t.Tags); err != nil {
		return nil, fmt.Errorf("decode tags of template %s: %w", t.Name, err)
	}
	if t.Tags == nil {
		t.Tags = []string{}
	}
	if err := json.Unmarshal([]byte(spec), &t.Spec); err != nil {
		return nil, fmt.Errorf("decode spec of template %s: %w", t.Name, err)
	}
	t.CreatedAt, t.UpdatedAt = fromUnix(created), fromUnix(updated)
	return &t, nil
}

func scanVersion(row scanner) (*store.TemplateVersion, error) {
	var (
		v       store.TemplateVersion
		spec    string
		created int64
	)
	if err := row.Scan(&v.ID, &v.TemplateID, &v.Version, &spec, &v.Changelog, &v.CreatedBy, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(spec), &v.Spec); err != nil {
		return nil, fmt.Errorf("decode spec of template version %s: %w", v.ID, err)
	}
	v.CreatedAt = fromUnix(created)
	return &v, nil
}

func encodeTags(tags []string) (string, error) {
	if tags == nil {
		tags = []string{}
	}
	b, err := json.Marshal(tags)
	return string(b), err
}

func encodeSpec(spec api.TemplateSpec) (string, error) {
	b, err := json.Marshal(spec)
	return string(b), err
}

// uniqueErr turns a UNIQUE constraint failure into an ErrAlreadyExists.
func uniqueErr(err error, name string) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "UNIQUE constraint failed: templates.name"):
		return errdefs.Conflict("template %s already exists", name)
	case isUnique(err):
		return errdefs.Conflict("template %s: id already in use: %v", name, err)
	}
	return nil
}

func insertVersion(ctx context.Context, q querier, v *store.TemplateVersion) error {
	spec, err := encodeSpec(v.Spec)
	if err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	_, err = q.ExecContext(ctx, `INSERT INTO template_versions (id, template_id, version, spec, changelog, created_by, created_at)
		VALUES (?,?,?,?,?,?,?)`, v.ID, v.TemplateID, v.Version, spec, v.Changelog, v.CreatedBy, toUnix(v.CreatedAt))
	return err
}

// CreateTemplate stores t with its first version v, both or neither; a
// taken name is ErrConflict.
func (s *Store) CreateTemplate(ctx context.Context, t *store.Template, v *store.TemplateVersion) error {
	t.LatestVersion, v.Version, v.TemplateID, t.Spec = 1, 1, t.ID, v.Spec
	tags, err := encodeTags(t.Tags)
	if err != nil {
		return fmt.Errorf("create template %s: encode tags: %w", t.Name, err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create template %s: %w", t.Name, err)
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `INSERT INTO templates (id, name, display_name, description, tags, author, is_public,
		latest_version, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)`,
		t.ID, t.Name, t.DisplayName, t.Description, tags, t.Author, t.IsPublic, t.LatestVersion,
		toUnix(t.CreatedAt), toUnix(t.UpdatedAt))
	if err == nil {
		err = insertVersion(ctx, tx, v)
	}
	if err != nil {
		if u := uniqueErr(err, t.Name); u != nil {
			return u
		}
		return fmt.Errorf("create template %s: %w", t.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create template %s: %w", t.Name, noSpace(err))
	}
	return nil
}

func getTemplate(ctx context.Context, q querier, name string) (*store.Template, error) {
	t, err := scanTemplate(q.QueryRowContext(ctx, templateSelect+` WHERE t.name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("template %s not found", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get template %s: %w", name, err)
	}
	return t, nil
}

// GetTemplate returns the template name with its latest spec; ErrNotFound
// if there is none.
func (s *Store) GetTemplate(ctx context.Context, name string) (*store.Template, error) {
	return getTemplate(ctx, s.r, name)
}

// ListTemplates returns the page of the templates f selects, newest
// first, and how many f selects in all.
func (s *Store) ListTemplates(ctx context.Context, f store.TemplateFilter) ([]*store.Template, int, error) {
	var (
		where []string
		args  []any
	)
	// Tags and search scan every template (there are few): tags are a JSON
	// array, matched case-insensitively through json_each.
	if f.Tag != "" {
		where = append(where, `EXISTS (SELECT 1 FROM json_each(t.tags) j WHERE lower(j.value) = lower(?))`)
		args = append(args, f.Tag)
	}
	if f.Search != "" {
		where = append(where, `(instr(lower(t.name), lower(?)) > 0 OR instr(lower(t.display_name), lower(?)) > 0
			OR instr(lower(t.description), lower(?)) > 0)`)
		args = append(args, f.Search, f.Search, f.Search)
	}
	cond := ""
	if len(where) > 0 {
		cond = ` WHERE ` + strings.Join(where, ` AND `)
	}
	limit := int64(f.Limit)
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	offset := max(int64(f.Offset), 0)

	// One transaction, so that total and items agree.
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("list templates: %w", err)
	}
	defer tx.Rollback()
	var total int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM templates t`+cond, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list templates: %w", err)
	}
	rows, err := tx.QueryContext(ctx, templateSelect+cond+` ORDER BY t.created_at DESC, t.name LIMIT ? OFFSET ?`,
		append(args, limit, offset)...)
	if err != nil {
		return nil, 0, fmt.Errorf("list templates: %w", err)
	}
	defer rows.Close()
	out := []*store.Template{}
	for rows.Next() {
		t, err := scanTemplate(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("list templates: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list templates: %w", err)
	}
	return out, total, nil
}

// AddTemplateVersion adds the version fn makes from the template name as
// its next one, in one write transaction: concurrent updates get
// consecutive numbers, none the same. fn may change the template's
// metadata, not its identity or numbering.
func (s *Store) AddTemplateVersion(ctx context.Context, name string, fn func(*store.Template) (*store.TemplateVersion, error)) (*store.Template, *store.TemplateVersion, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("add version to template %s: %w", name, err)
	}
	defer tx.Rollback()
	t, err := getTemplate(ctx, tx, name)
	if err != nil {
		return nil, nil, err
	}
	id, created, latest := t.ID, t.CreatedAt, t.LatestVersion
	v, err := fn(t)
	if err != nil {
		return nil, nil, err
	}
	if v == nil {
		return nil, nil, fmt.Errorf("add version to template %s: no version given", name)
	}
	// fn may change metadata, not identity or numbering.
	t.ID, t.Name, t.CreatedAt = id, name, created
	t.LatestVersion, t.Spec = latest+1, v.Spec
	v.TemplateID, v.Version = id, latest+1
	if err := insertVersion(ctx, tx, v); err != nil {
		if u := uniqueErr(err, name); u != nil {
			return nil, nil, u
		}
		return nil, nil, fmt.Errorf("add version to template %s: %w", name, err)
	}
	tags, err := encodeTags(t.Tags)
	if err != nil {
		return nil, nil, fmt.Errorf("add version to template %s: encode tags: %w", name, err)
	}
	if t.Tags == nil {
		t.Tags = []string{}
	}
	_, err = tx.ExecContext(ctx, `UPDATE templates SET display_name=?, description=?, tags=?, is_public=?,
		latest_version=?, updated_at=? WHERE id=?`,
		t.DisplayName, t.Description, tags, t.IsPublic, t.LatestVersion, toUnix(t.UpdatedAt), id)
	if err != nil {
		return nil, nil, fmt.Errorf("add version to template %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("add version to template %s: %w", name, noSpace(err))
	}
	return t, v, nil
}

// DeleteTemplate deletes the template name and its versions; ErrNotFound
// if there is none.
func (s *Store) DeleteTemplate(ctx context.Context, name string) error {
	// Versions go by the foreign key's ON DELETE CASCADE.
	return deleteWhere(ctx, s.w, "template", "templates", "name", name)
}

// ListTemplateVersions returns the versions of the template name, newest
// first; ErrNotFound if there is no such template.
func (s *Store) ListTemplateVersions(ctx context.Context, name string) ([]*store.TemplateVersion, error) {
	out, _, err := s.ListTemplateVersionPage(ctx, name, store.Page{Desc: true})
	return out, err
}

// ListTemplateVersionPage returns the page p of the versions of the
// template name, by number, and the cursor of the next page; ErrNotFound
// if there is no such template.
func (s *Store) ListTemplateVersionPage(ctx context.Context, name string, p store.Page) ([]*store.TemplateVersion, string, error) {
	after, cmp, order, err := store.VersionPageSQL(p)
	if err != nil {
		return nil, "", err
	}
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, "", fmt.Errorf("list versions of template %s: %w", name, err)
	}
	defer tx.Rollback()
	var id string
	err = tx.QueryRowContext(ctx, `SELECT id FROM templates WHERE name = ?`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", errdefs.NotFound("template %s not found", name)
	}
	if err != nil {
		return nil, "", fmt.Errorf("list versions of template %s: %w", name, err)
	}
	q, args := `SELECT `+versionColumns+` FROM template_versions v WHERE v.template_id = ?`, []any{id}
	if after > 0 {
		q, args = q+` AND v.version `+cmp+` ?`, append(args, after)
	}
	rows, err := tx.QueryContext(ctx, q+order, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list versions of template %s: %w", name, err)
	}
	defer rows.Close()
	out := []*store.TemplateVersion{}
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, "", fmt.Errorf("list versions of template %s: %w", name, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list versions of template %s: %w", name, err)
	}
	out, next := store.CutVersionPage(out, p)
	return out, next, nil
}

// GetTemplateVersion returns version of the template name; ErrNotFound if
// either is missing.
func (s *Store) GetTemplateVersion(ctx context.Context, name string, version int) (*store.TemplateVersion, error) {
	v, err := scanVersion(s.r.QueryRowContext(ctx, `SELECT `+versionColumns+` FROM template_versions v
		JOIN templates t ON t.id = v.template_id WHERE t.name = ? AND v.version = ?`, name, version))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("version %d of template %s not found", version, name)
	}
	if err != nil {
		return nil, fmt.Errorf("get version %d of template %s: %w", version, name, err)
	}
	return v, nil
}
