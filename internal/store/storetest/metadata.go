package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/agent2env/agent2env/internal/store"
)

// metadataTests are Run's cases for sandboxes' metadata and the filters
// and counts of lists.
var metadataTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"SandboxMetadata", testSandboxMetadata},
	{"SandboxFilters", testSandboxFilters},
}

// testSandboxMetadata: metadata is kept at create and by an update, and
// none reads back as empty.
func testSandboxMetadata(t *testing.T, s store.Store) {
	ctx := context.Background()
	sb := sample("md")
	sb.Metadata = map[string]string{"team": "a", "unicode": "ü→✓", "empty": ""}
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, "md")
	if err != nil || !equalMaps(got.Metadata, sb.Metadata) {
		t.Fatalf("metadata %v, %v; want %v", got.Metadata, err, sb.Metadata)
	}
	got, err = s.UpdateSandbox(ctx, "md", func(sb *store.Sandbox) error {
		delete(sb.Metadata, "team")
		sb.Metadata["new"] = "1"
		return nil
	})
	want := map[string]string{"unicode": "ü→✓", "empty": "", "new": "1"}
	if err != nil || !equalMaps(got.Metadata, want) {
		t.Fatalf("updated metadata %v, %v; want %v", got.Metadata, err, want)
	}
	if got, err = s.GetSandbox(ctx, "md"); err != nil || !equalMaps(got.Metadata, want) {
		t.Fatalf("metadata read back %v, %v; want %v", got.Metadata, err, want)
	}
	mustCreateSandbox(t, s, "none")
	if got, err = s.GetSandbox(ctx, "none"); err != nil || len(got.Metadata) != 0 {
		t.Fatalf("metadata of a sandbox without: %v, %v", got.Metadata, err)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// testSandboxFilters: Statuses, Metadata and Pool select in lists and
// counts, with ExcludePooled, and pages follow the filter.
func testSandboxFilters(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, r := range []struct {
		id, status, pool string
		md               map[string]string
	}{
		{"a", "running", "", map[string]string{"team": "x", "env": "dev"}},
		{"b", "pending", "", map[string]string{"team": "x"}},
		{"c", "running", "", map[string]string{"team": "y", "env": "dev"}},
		{"d", "failed", "", nil},
		{"e", "running", "warm", map[string]string{"team": "x"}},
		{"f", "running", "", map[string]string{"team": "x'); DROP TABLE sandboxes; --"}},
	} {
		sb := sample(r.id)
		sb.Status, sb.Pool, sb.Metadata = r.status, r.pool, r.md
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		f    store.SandboxFilter
		want []string
	}{
		{"all", store.SandboxFilter{}, []string{"a", "b", "c", "d", "e", "f"}},
		{"one status", store.SandboxFilter{Statuses: []string{"running"}}, []string{"a", "c", "e", "f"}},
		{"two statuses, no pools", store.SandboxFilter{Statuses: []string{"pending", "failed"}, ExcludePooled: true}, []string{"b", "d"}},
		{"metadata", store.SandboxFilter{Metadata: map[string]string{"team": "x"}}, []string{"a", "b", "e"}},
		{"metadata, every pair", store.SandboxFilter{Metadata: map[string]string{"team": "x", "env": "dev"}}, []string{"a"}},
		{"metadata and status, no pools", store.SandboxFilter{Metadata: map[string]string{"team": "x"}, Statuses: []string{"running"}, ExcludePooled: true}, []string{"a"}},
		{"metadata no one has", store.SandboxFilter{Metadata: map[string]string{"team": "z"}}, nil},
		{"a key no one has", store.SandboxFilter{Metadata: map[string]string{"nope": "x"}}, nil},
		{"quotes are values", store.SandboxFilter{Metadata: map[string]string{"team": "x'); DROP TABLE sandboxes; --"}}, []string{"f"}},
		{"unknown status", store.SandboxFilter{Statuses: []string{"nope"}}, nil},
		{"one pool", store.SandboxFilter{Pool: "warm"}, []string{"e"}},
		{"one pool, running", store.SandboxFilter{Pool: "warm", Statuses: []string{"running"}}, []string{"e"}},
		{"a pool no one is in", store.SandboxFilter{Pool: "cold"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := s.ListSandboxPage(ctx, tc.f, store.Page{})
			if err != nil || !slices.Equal(ids(got), tc.want) {
				t.Errorf("list: %v, %v; want %v", ids(got), err, tc.want)
			}
			if n, err := s.CountSandboxes(ctx, tc.f); err != nil || n != len(tc.want) {
				t.Errorf("count: %d, %v; want %d", n, err, len(tc.want))
			}
			// Pages of one follow the filter to its end.
			var paged []string
			p := store.Page{Limit: 1}
			for range 10 {
				page, next, err := s.ListSandboxPage(ctx, tc.f, p)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, ids(page)...)
				if next == "" {
					break
				}
				p.After = next
			}
			if !slices.Equal(paged, tc.want) {
				t.Errorf("paged: %v, want %v", paged, tc.want)
			}
		})
	}
}
