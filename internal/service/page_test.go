package service

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// TestPageOf follows the cursors of PageOf's pages through a list
// newest first, in either order, and checks a bad cursor is refused.
func TestPageOf(t *testing.T) {
	type item struct {
		id string
		at time.Time
	}
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// Newest first, as the stores list them; c and b were made in the
	// same microsecond, told apart by id.
	items := []item{{"d", base.Add(2 * time.Second)}, {"c", base.Add(time.Second)}, {"b", base.Add(time.Second + 100)}, {"a", base}}
	key := func(it item) (time.Time, string) { return it.at, it.id }
	tests := []struct {
		name string
		page store.Page
		want [][]string
	}{
		{"whole, oldest first", store.Page{}, [][]string{{"a", "b", "c", "d"}}},
		{"whole, newest first", store.Page{Desc: true}, [][]string{{"d", "c", "b", "a"}}},
		{"pages of 3, oldest first", store.Page{Limit: 3}, [][]string{{"a", "b", "c"}, {"d"}}},
		{"pages of 1, newest first", store.Page{Limit: 1, Desc: true}, [][]string{{"d"}, {"c"}, {"b"}, {"a"}}},
		{"one page of 4", store.Page{Limit: 4, Desc: true}, [][]string{{"d", "c", "b", "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got [][]string
			p := tt.page
			for range 10 {
				page, next, err := PageOf(items, p, key)
				if err != nil {
					t.Fatalf("PageOf(%+v): %v", p, err)
				}
				var ids []string
				for _, it := range page {
					ids = append(ids, it.id)
				}
				got = append(got, ids)
				if next == "" {
					break
				}
				p.After = next
			}
			if !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("pages %v, want %v", got, tt.want)
			}
		})
	}
	if _, _, err := PageOf(items, store.Page{After: "nope"}, key); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a bad cursor: %v, want ErrInvalidArgument", err)
	}
}
