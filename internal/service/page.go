package service

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// Page is the store's page of a list that limit (nil: the whole list),
// cursor ("": the first page) and order ("": api.OrderAsc) ask for. A
// limit not from 1 to api.MaxPageSize, or an order not api.OrderAsc or
// api.OrderDesc, is ErrInvalidArgument naming its parameter.
func Page(limit *int, cursor string, order api.Order) (store.Page, error) {
	p := store.Page{After: cursor}
	if limit != nil {
		if n := *limit; n < 1 || n > api.MaxPageSize {
			return p, errdefs.Invalid("limit %q: want a number from 1 to %d", strconv.Itoa(n), api.MaxPageSize)
		}
		p.Limit = *limit
	}
	switch order {
	case "", api.OrderAsc:
	case api.OrderDesc:
		p.Desc = true
	default:
		return p, errdefs.Invalid("order %q: want %s (oldest first) or %s (newest first)", order, api.OrderAsc, api.OrderDesc)
	}
	return p, nil
}

// NewestFirst is Page of opts for a list whose order is newest first
// unless opts asks for api.OrderAsc.
func NewestFirst(opts ListOptions) (store.Page, error) {
	return Page(opts.Limit, opts.Cursor, cmp.Or(opts.Order, api.OrderDesc))
}

// PageOf returns the page p of items, a whole list ordered newest first
// by the creation time and id key gives (as the stores list LLM keys and
// prepull tasks), and the cursor of the next page ("" after the last):
// for lists the stores do not page, which are short enough to read whole.
// A cursor the server did not give is ErrInvalidArgument.
func PageOf[T any](items []T, p store.Page, key func(T) (time.Time, string)) ([]T, string, error) {
	after := func(T) bool { return true }
	if p.After != "" {
		at, id, err := store.ParseCursor(p.After)
		if err != nil {
			return nil, "", err
		}
		after = func(item T) bool {
			t, itemID := key(item)
			c := cmp.Or(cmp.Compare(t.UnixMicro(), at.UnixMicro()), strings.Compare(itemID, id))
			return p.Desc && c < 0 || !p.Desc && c > 0
		}
	}
	ordered := slices.Clone(items)
	if !p.Desc {
		slices.Reverse(ordered)
	}
	out := make([]T, 0, len(ordered))
	for _, item := range ordered {
		if !after(item) {
			continue
		}
		if p.Limit > 0 && len(out) == p.Limit {
			return out, store.Cursor(key(out[len(out)-1])), nil
		}
		out = append(out, item)
	}
	return out, "", nil
}
