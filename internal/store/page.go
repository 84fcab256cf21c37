package store

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// Page bounds a listing ordered by creation time, then id: the items
// after the cursor After ("" starts at the first), at most Limit of them
// (Limit <= 0: all the rest). The zero value is the whole listing, oldest
// first.
//
// Cursors mark a place rather than a position, so a page stays right
// while items are added or removed before it.
type Page struct {
	After string
	Limit int
	// Desc lists newest first (by creation time, then id, both
	// descending): the items before the place After marks. A cursor
	// marks the same place in either order.
	Desc bool
}

// Cursor returns the cursor of the place of the item created at at with
// id id: the page after it starts with the next item in the page's order.
func Cursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMicro(), 10) + "/" + id))
}

// ParseCursor returns the creation time (to the microsecond) and id a
// cursor marks; a string Cursor did not make is ErrInvalidArgument.
func ParseCursor(s string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		at, id, ok := strings.Cut(string(b), "/")
		if us, perr := strconv.ParseInt(at, 10, 64); ok && perr == nil && id != "" {
			return time.UnixMicro(us).UTC(), id, nil
		}
	}
	return time.Time{}, "", errdefs.Invalid("page cursor %q is not one this server gave", s)
}

// VersionCursor returns the cursor of the place of a template's version
// version in a listing of its versions, which are ordered by number: the
// page after it starts with the next version in the page's order.
func VersionCursor(version int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("version/" + strconv.Itoa(version)))
}

// ParseVersionCursor returns the version number a cursor VersionCursor
// made marks; another string is ErrInvalidArgument.
func ParseVersionCursor(s string) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		if v, ok := strings.CutPrefix(string(b), "version/"); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return n, nil
			}
		}
	}
	return 0, errdefs.Invalid("page cursor %q is not one this server gave", s)
}

// VersionPageSQL returns what the page p of a template's versions (in a
// query naming the version table v) adds to its query: the version its
// cursor marks (0: none) and the comparison the versions after it make
// with it (v.version cmp after), and the ORDER BY and LIMIT clauses. A
// cursor VersionCursor did not make is ErrInvalidArgument.
func VersionPageSQL(p Page) (after int, cmp, order string, err error) {
	cmp, order = ">", ` ORDER BY v.version`
	if p.Desc {
		cmp, order = "<", ` ORDER BY v.version DESC`
	}
	if p.After != "" {
		if after, err = ParseVersionCursor(p.After); err != nil {
			return 0, "", "", err
		}
	}
	if p.Limit > 0 {
		order += fmt.Sprintf(` LIMIT %d`, p.Limit+1)
	}
	return after, cmp, order, nil
}

// CutVersionPage cuts versions, read with VersionPageSQL's LIMIT (one past
// the page), to the page p and returns the cursor of the next page.
func CutVersionPage(versions []*TemplateVersion, p Page) ([]*TemplateVersion, string) {
	if p.Limit <= 0 || len(versions) <= p.Limit {
		return versions, ""
	}
	versions = versions[:p.Limit]
	return versions, VersionCursor(versions[len(versions)-1].Version)
}

// LimitError says a sandbox was not created because Limit sandboxes
// exist. It matches errdefs.ErrResourceExhausted.
type LimitError struct {
	Count, Limit int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%d sandboxes exist, the limit is %d", e.Count, e.Limit)
}

// Is makes a LimitError match errdefs.ErrResourceExhausted.
func (e *LimitError) Is(target error) bool { return target == errdefs.ErrResourceExhausted }
