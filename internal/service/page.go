package service

import (
	"strconv"

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
