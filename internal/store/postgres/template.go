package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

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
		t          store.Template
		tags, spec []byte
	)
	if err := row.Scan(&t.ID, &t.Name, &t.DisplayName, &t.Description, &tags, &t.Author, &t.IsPublic,
		&t.LatestVersion, &t.CreatedAt, &t.UpdatedAt, &spec); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(tags, &t.Tags); err != nil {
		return nil, fmt.Errorf("decode tags of template %s: %w", t.Name, err)
	}
	if t.Tags == nil {
		t.Tags = []string{}
	}
	if err := json.Unmarshal(spec, &t.Spec); err != nil {
		return nil, fmt.Errorf("decode spec of template %s: %w", t.Name, err)
	}
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return &t, nil
}

func scanVersion(row scanner) (*store.TemplateVersion, error) {
	var (
		v    store.TemplateVersion
		spec []byte
	)
	if err := row.Scan(&v.ID, &v.TemplateID, &v.Version, &spec, &v.Changelog, &v.CreatedBy, &v.CreatedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(spec, &v.Spec); err != nil {
		return nil, fmt.Errorf("decode spec of template version %s: %w", v.ID, err)
	}
	v.CreatedAt = v.CreatedAt.UTC()
	return &v, nil
}

// encodeTags is the JSON array of tags, [] for none.
func encodeTags(tags []string) (string, error) {
	if tags == nil {
		tags = []string{}
	}
	b, err := json.Marshal(tags)
	return string(b), err
}

// templateConflict turns a unique violation into ErrAlreadyExists: of
// the name, or of an id; nil for any other error.
func templateConflict(err error, name string) error {
	code, constraint := pgCode(err)
	switch {
	case code != codeUnique:
		return nil
	case constraint == "templates_name_unique":
		return errdefs.Conflict("template %s already exists", name)
	}
	return errdefs.Conflict("template %s: id already in use: %v", name, err)
}

func insertVersion(ctx context.Context, q querier, v *store.TemplateVersion) error {
	spec, err := json.Marshal(v.Spec)
	if err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	_, err = q.Exec(ctx, `INSERT INTO template_versions (id, template_id, version, spec, changelog, created_by, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, v.ID, v.TemplateID, v.Version, string(spec), v.Changelog, v.CreatedBy, v.CreatedAt)
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
	err = pgx.BeginFunc(ctx, s.w, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO templates (id, name, display_name, description, tags, author, is_public,
			latest_version, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			t.ID, t.Name, t.DisplayName, t.Description, tags, t.Author, t.IsPublic, t.LatestVersion,
			t.CreatedAt, t.UpdatedAt); err != nil {
			return err
		}
		return insertVersion(ctx, tx, v)
	})
	if err != nil {
		if c := templateConflict(err, t.Name); c != nil {
			return c
		}
		return fmt.Errorf("create template %s: %w", t.Name, serverErr(err))
	}
	return nil
}

func getTemplate(ctx context.Context, q querier, name string) (*store.Template, error) {
	if !validText(name) {
		return nil, errdefs.NotFound("template %q not found", name)
	}
	t, err := scanTemplate(q.QueryRow(ctx, templateSelect+` WHERE t.name = $1`, name))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, errdefs.NotFound("template %s not found", name)
	case err != nil:
		return nil, fmt.Errorf("get template %s: %w", name, err)
	}
	return t, nil
}

// GetTemplate returns the template name with its latest spec; ErrNotFound
// if there is none.
func (s *Store) GetTemplate(ctx context.Context, name string) (*store.Template, error) {
	return getTemplate(ctx, s.r, name)
}

// readOnce is a read-only transaction on one snapshot: the reads in it
// agree with each other.
var readOnce = pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}

// ListTemplates returns the page of the templates f selects, newest
// first, and how many f selects in all.
func (s *Store) ListTemplates(ctx context.Context, f store.TemplateFilter) ([]*store.Template, int, error) {
	var (
		where []string
		a     args
	)
	// Tags and search scan every template (there are few). The columns
	// and the tags collate "C", under which lower() folds ASCII only: the
	// match is ASCII case-insensitive, as the filter says.
	if f.Tag != "" {
		where = append(where, `EXISTS (SELECT 1 FROM jsonb_array_elements_text(t.tags) j
			WHERE lower(j COLLATE "C") = lower(`+a.add(f.Tag)+` COLLATE "C"))`)
	}
	if f.Search != "" {
		q := `lower(` + a.add(f.Search) + ` COLLATE "C")`
		where = append(where, `(strpos(lower(t.name), `+q+`) > 0 OR strpos(lower(t.display_name), `+q+`) > 0
			OR strpos(lower(t.description), `+q+`) > 0)`)
	}
	cond := ""
	if len(where) > 0 {
		cond = ` WHERE ` + strings.Join(where, ` AND `)
	}
	countQuery, countArgs := `SELECT COUNT(*) FROM templates t`+cond, slices.Clone(a)
	var limit any // NULL: no limit
	if f.Limit > 0 {
		limit = f.Limit
	}
	query := templateSelect + cond + ` ORDER BY t.created_at DESC, t.name LIMIT ` + a.add(limit) + ` OFFSET ` + a.add(max(f.Offset, 0))
	var (
		total int
		out   []*store.Template
	)
	err := pgx.BeginTxFunc(ctx, s.r, readOnce, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, countQuery, countArgs...).Scan(&total); err != nil {
			return err
		}
		var err error
		out, err = list(ctx, tx, scanTemplate, query, a...)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list templates: %w", err)
	}
	return out, total, nil
}

// AddTemplateVersion adds the version fn makes from the template name as
// its next one, with the template's row locked from the read to the
// write: concurrent updates, from any daemon, get consecutive numbers,
// none the same. fn may change the template's metadata, not its identity
// or numbering.
func (s *Store) AddTemplateVersion(ctx context.Context, name string, fn func(*store.Template) (*store.TemplateVersion, error)) (*store.Template, *store.TemplateVersion, error) {
	if !validText(name) {
		return nil, nil, errdefs.NotFound("template %q not found", name)
	}
	var (
		t *store.Template
		v *store.TemplateVersion
	)
	err := pgx.BeginFunc(ctx, s.w, func(tx pgx.Tx) error {
		// The lock first, alone: the read after it is a new statement,
		// which sees the version a concurrent update committed while this
		// one waited (a join locked in one statement would not).
		if _, err := tx.Exec(ctx, `SELECT 1 FROM templates WHERE name = $1 FOR UPDATE`, name); err != nil {
			return fmt.Errorf("add version to template %s: %w", name, err)
		}
		var err error
		if t, err = getTemplate(ctx, tx, name); err != nil {
			return err
		}
		id, created, latest := t.ID, t.CreatedAt, t.LatestVersion
		if v, err = fn(t); err != nil {
			return err
		}
		if v == nil {
			return fmt.Errorf("add version to template %s: no version given", name)
		}
		t.ID, t.Name, t.CreatedAt = id, name, created
		t.LatestVersion, t.Spec = latest+1, v.Spec
		v.TemplateID, v.Version = id, latest+1
		if err := insertVersion(ctx, tx, v); err != nil {
			if c := templateConflict(err, name); c != nil {
				return c
			}
			return fmt.Errorf("add version to template %s: %w", name, serverErr(err))
		}
		tags, err := encodeTags(t.Tags)
		if err != nil {
			return fmt.Errorf("add version to template %s: encode tags: %w", name, err)
		}
		if t.Tags == nil {
			t.Tags = []string{}
		}
		if _, err = tx.Exec(ctx, `UPDATE templates SET display_name = $1, description = $2, tags = $3, is_public = $4,
			latest_version = $5, updated_at = $6 WHERE id = $7`,
			t.DisplayName, t.Description, tags, t.IsPublic, t.LatestVersion, t.UpdatedAt, id); err != nil {
			return fmt.Errorf("add version to template %s: %w", name, serverErr(err))
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
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
	if !validText(name) {
		return nil, "", errdefs.NotFound("template %q not found", name)
	}
	var out []*store.TemplateVersion
	err = pgx.BeginTxFunc(ctx, s.r, readOnce, func(tx pgx.Tx) error {
		var id string
		err := tx.QueryRow(ctx, `SELECT id FROM templates WHERE name = $1`, name).Scan(&id)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return errdefs.NotFound("template %s not found", name)
		case err != nil:
			return fmt.Errorf("list versions of template %s: %w", name, err)
		}
		var a args
		q := `SELECT ` + versionColumns + ` FROM template_versions v WHERE v.template_id = ` + a.add(id)
		if after > 0 {
			q += ` AND v.version ` + cmp + ` ` + a.add(after)
		}
		out, err = list(ctx, tx, scanVersion, q+order, a...)
		if err != nil {
			return fmt.Errorf("list versions of template %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	out, next := store.CutVersionPage(out, p)
	return out, next, nil
}

// GetTemplateVersion returns version of the template name; ErrNotFound if
// either is missing.
func (s *Store) GetTemplateVersion(ctx context.Context, name string, version int) (*store.TemplateVersion, error) {
	if !validText(name) {
		return nil, errdefs.NotFound("template %q not found", name)
	}
	v, err := scanVersion(s.r.QueryRow(ctx, `SELECT `+versionColumns+` FROM template_versions v
		JOIN templates t ON t.id = v.template_id WHERE t.name = $1 AND v.version = $2`, name, version))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, errdefs.NotFound("version %d of template %s not found", version, name)
	case err != nil:
		return nil, fmt.Errorf("get version %d of template %s: %w", version, name, err)
	}
	return v, nil
}
