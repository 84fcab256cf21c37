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
