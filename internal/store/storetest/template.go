package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// templateTests is the part of the suite for store.Templates.
var templateTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"TemplateCreateGet", testTemplateCreateGet},
	{"TemplateDuplicate", testTemplateDuplicate},
	{"TemplateNotFound", testTemplateNotFound},
	{"TemplateList", testTemplateList},
	{"TemplateAddVersion", testTemplateAddVersion},
	{"TemplateAddVersionAbort", testTemplateAddVersionAbort},
	{"TemplateConcurrentVersions", testTemplateConcurrentVersions},
	{"TemplateDeleteCascades", testTemplateDelete},
	{"TemplateVersionPage", testTemplateVersionPage},
}

// fullSpec uses every field of a spec, so that a backend losing one shows.
func fullSpec(img string) api.TemplateSpec {
	return api.TemplateSpec{
		Image: img, Command: []string{"python", "-m"}, Args: []string{"http.server"},
		Resources: api.ResourceSpec{CPU: "500m", Memory: "512Mi"}, TTL: 3600,
		Env:           map[string]string{"A": "1", "UNICODE": "ü→✓"},
		StartupScript: "pip install x", StartupTimeout: 300,
		Files: []api.FileSpec{{Destination: "/a", Content: "hi\n"}, {Destination: "/b", Source: "https://example.com/b"}},
		ReadinessProbe: &api.ProbeSpec{Exec: api.ExecAction{Command: []string{"true"}},
			InitialDelaySeconds: 1, PeriodSeconds: 10, FailureThreshold: 3},
		Network:     &api.NetworkSpec{AllowInternetAccess: true, AllowedDomains: []string{"pypi.org", "*.github.com"}},
		Persistence: &api.PersistenceSpec{Enabled: true, Mode: "rootfs-overlay", Size: "1Gi", ReclaimPolicy: "Delete"},
	}
}

// newTemplate returns a template record and its first version.
func newTemplate(name string, created time.Time) (*store.Template, *store.TemplateVersion) {
	t := &store.Template{
		ID: "tpl-" + name, Name: name, DisplayName: "Display " + name, Description: "about " + name,
		Tags: []string{"python", "ml"}, IsPublic: true, CreatedAt: created, UpdatedAt: created,
	}
	v := &store.TemplateVersion{ID: "ver-" + name + "-1", Spec: fullSpec("python:3.11"), Changelog: "Initial version",
		CreatedAt: created}
	return t, v
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func mustCreateTemplate(t *testing.T, s store.Store, tpl *store.Template, v *store.TemplateVersion) {
	t.Helper()
	if err := s.CreateTemplate(context.Background(), tpl, v); err != nil {
		t.Fatalf("create template %s: %v", tpl.Name, err)
	}
}

func testTemplateCreateGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	tpl, v := newTemplate("py", now())
	mustCreateTemplate(t, s, tpl, v)
	if tpl.LatestVersion != 1 || v.Version != 1 || v.TemplateID != tpl.ID {
		t.Errorf("create did not number: template latest %d, version %d of %q", tpl.LatestVersion, v.Version, v.TemplateID)
	}
	want := *tpl
	want.Spec = v.Spec
	got, err := s.GetTemplate(ctx, "py")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("get template (-want +got):\n%s", diff)
	}
	gotV, err := s.GetTemplateVersion(ctx, "py", 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(v, gotV); diff != "" {
		t.Errorf("get version (-want +got):\n%s", diff)
	}

	// Nil tags read back as an empty list; a minimal spec stays minimal.
	bare, bv := newTemplate("bare", now())
	bare.Tags, bare.IsPublic = nil, false
	bv.Spec = api.TemplateSpec{Image: "alpine", Resources: api.ResourceSpec{CPU: "1", Memory: "1Gi"}}
	mustCreateTemplate(t, s, bare, bv)
	got, err = s.GetTemplate(ctx, "bare")
	if err != nil {
		t.Fatal(err)
	}
	if got.Tags == nil || len(got.Tags) != 0 || got.IsPublic {
		t.Errorf("bare template: tags %#v, public %v; want [] and false", got.Tags, got.IsPublic)
	}
	if diff := cmp.Diff(bv.Spec, got.Spec); diff != "" {
		t.Errorf("bare spec (-want +got):\n%s", diff)
	}
}

func testTemplateDuplicate(t *testing.T, s store.Store) {
	ctx := context.Background()
	tpl, v := newTemplate("dup", now())
	mustCreateTemplate(t, s, tpl, v)
	again, av := newTemplate("dup", now())
	again.ID, av.ID = "tpl-other", "ver-other"
	if err := s.CreateTemplate(ctx, again, av); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("duplicate name: %v, want already exists", err)
	}
	// The failed create left nothing behind.
	vs, err := s.ListTemplateVersions(ctx, "dup")
	if err != nil || len(vs) != 1 || vs[0].ID != v.ID {
		t.Errorf("versions after failed duplicate = %v, %v; want only %s", vs, err, v.ID)
	}
	// A reused id is refused too, and its name is not taken.
	other, ov := newTemplate("other", now())
	other.ID = tpl.ID
	if err := s.CreateTemplate(ctx, other, ov); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("duplicate id: %v, want already exists", err)
	}
	if _, err := s.GetTemplate(ctx, "other"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("template of a failed create: %v, want not found", err)
	}
}

func testTemplateNotFound(t *testing.T, s store.Store) {
	ctx := context.Background()
	tpl, v := newTemplate("here", now())
	mustCreateTemplate(t, s, tpl, v)
	called := false
	checks := map[string]error{}
	_, checks["get"] = s.GetTemplate(ctx, "nope")
	_, _, checks["add version"] = s.AddTemplateVersion(ctx, "nope", func(*store.Template) (*store.TemplateVersion, error) {
		called = true
		return &store.TemplateVersion{ID: "x"}, nil
	})
	checks["delete"] = s.DeleteTemplate(ctx, "nope")
	_, checks["versions"] = s.ListTemplateVersions(ctx, "nope")
	_, checks["version of unknown template"] = s.GetTemplateVersion(ctx, "nope", 1)
	_, checks["unknown version"] = s.GetTemplateVersion(ctx, "here", 2)
	_, checks["version 0"] = s.GetTemplateVersion(ctx, "here", 0)
	for op, err := range checks {
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s: %v, want not found", op, err)
		}
	}
	if called {
		t.Error("AddTemplateVersion called fn for an unknown template")
	}
}

func testTemplateList(t *testing.T, s store.Store) {
	ctx := context.Background()
	items, total, err := s.ListTemplates(ctx, store.TemplateFilter{})
	if err != nil || items == nil || len(items) != 0 || total != 0 {
		t.Fatalf("empty list = %#v, %d, %v; want [], 0", items, total, err)
	}
	base := now()
	for i, m := range []struct {
		name, display, desc string
		tags                []string
	}{
		{"alpha", "Alpha Python", "first", []string{"Python", "base"}},
		{"beta", "Beta", "has NumPy inside", []string{"python"}},
		{"gamma", "Gamma", "go toolchain", []string{"golang"}},
		{"delta-py", "Delta", "last", nil},
	} {
		tpl, v := newTemplate(m.name, base.Add(time.Duration(i)*time.Second))
		tpl.DisplayName, tpl.Description, tpl.Tags = m.display, m.desc, m.tags
		mustCreateTemplate(t, s, tpl, v)
	}
	// Same creation time: ties go by name.
	tie, tv := newTemplate("aaa-tie", base.Add(3*time.Second))
	tie.Tags = []string{"tie"}
	mustCreateTemplate(t, s, tie, tv)

	tests := []struct {
		name      string
		f         store.TemplateFilter
		want      []string
		wantTotal int
	}{
		{"all newest first", store.TemplateFilter{}, []string{"aaa-tie", "delta-py", "gamma", "beta", "alpha"}, 5},
		{"tag any case", store.TemplateFilter{Tag: "PYTHON"}, []string{"beta", "alpha"}, 2},
		{"tag is whole", store.TemplateFilter{Tag: "py"}, []string{}, 0},
		{"tag quote", store.TemplateFilter{Tag: `"python"`}, []string{}, 0},
		{"search all fields", store.TemplateFilter{Search: "PY"}, []string{"delta-py", "beta", "alpha"}, 3},
		{"search description", store.TemplateFilter{Search: "numpy"}, []string{"beta"}, 1},
		{"search display name", store.TemplateFilter{Search: "gAmMa"}, []string{"gamma"}, 1},
		{"search is literal", store.TemplateFilter{Search: "%"}, []string{}, 0},
		{"tag and search", store.TemplateFilter{Tag: "python", Search: "alpha"}, []string{"alpha"}, 1},
		{"limit", store.TemplateFilter{Limit: 2}, []string{"aaa-tie", "delta-py"}, 5},
		{"offset", store.TemplateFilter{Offset: 2, Limit: 2}, []string{"gamma", "beta"}, 5},
		{"offset past end", store.TemplateFilter{Offset: 10, Limit: 2}, []string{}, 5},
		{"offset without limit", store.TemplateFilter{Offset: 3}, []string{"beta", "alpha"}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, total, err := s.ListTemplates(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, it := range items {
				got = append(got, it.Name)
				if it.Spec.Image != "python:3.11" || it.LatestVersion != 1 {
					t.Errorf("%s listed without its latest spec: %+v", it.Name, it)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" || total != tt.wantTotal {
				t.Errorf("names (-want +got):\n%s\ntotal %d, want %d", diff, total, tt.wantTotal)
			}
		})
	}
}

func testTemplateAddVersion(t *testing.T, s store.Store) {
	ctx := context.Background()
	created := now().Add(-time.Hour)
	tpl, v1 := newTemplate("v", created)
	mustCreateTemplate(t, s, tpl, v1)

	later := now()
	spec2 := api.TemplateSpec{Image: "python:3.12", Resources: api.ResourceSpec{CPU: "1", Memory: "1Gi"}}
	var seen store.Template
	gotT, gotV, err := s.AddTemplateVersion(ctx, "v", func(t *store.Template) (*store.TemplateVersion, error) {
		seen = *t
		t.DisplayName, t.Tags, t.IsPublic, t.UpdatedAt = "New", []string{}, false, later
		// Identity and numbering are the store's: these are ignored.
		t.ID, t.Name, t.CreatedAt, t.LatestVersion = "tpl-evil", "evil", later, 99
		return &store.TemplateVersion{ID: "ver-v-2", Spec: spec2, Changelog: "bump", CreatedBy: "me", CreatedAt: later,
			Version: 42, TemplateID: "tpl-evil"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen.LatestVersion != 1 || seen.Spec.Image != "python:3.11" || seen.DisplayName != "Display v" {
		t.Errorf("fn saw %+v; want the stored template with its latest spec", seen)
	}
	wantT := &store.Template{ID: "tpl-v", Name: "v", DisplayName: "New", Description: "about v", Tags: []string{},
		IsPublic: false, LatestVersion: 2, CreatedAt: created, UpdatedAt: later, Spec: spec2}
	wantV := &store.TemplateVersion{ID: "ver-v-2", TemplateID: "tpl-v", Version: 2, Spec: spec2, Changelog: "bump",
		CreatedBy: "me", CreatedAt: later}
	if diff := cmp.Diff(wantT, gotT); diff != "" {
		t.Errorf("returned template (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantV, gotV); diff != "" {
		t.Errorf("returned version (-want +got):\n%s", diff)
	}
	stored, err := s.GetTemplate(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantT, stored); diff != "" {
		t.Errorf("stored template (-want +got):\n%s", diff)
	}
	vs, err := s.ListTemplateVersions(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*store.TemplateVersion{wantV, v1}, vs); diff != "" {
		t.Errorf("versions, newest first (-want +got):\n%s", diff)
	}
	old, err := s.GetTemplateVersion(ctx, "v", 1)
	if err != nil || old.Spec.Image != "python:3.11" {
		t.Errorf("version 1 after adding 2 = %+v, %v; versions must not change", old, err)
	}
}

func testTemplateAddVersionAbort(t *testing.T, s store.Store) {
	ctx := context.Background()
	tpl, v := newTemplate("a", now())
	mustCreateTemplate(t, s, tpl, v)
	before, _ := s.GetTemplate(ctx, "a")
	boom := errors.New("boom")
	_, _, err := s.AddTemplateVersion(ctx, "a", func(t *store.Template) (*store.TemplateVersion, error) {
		t.DisplayName = "changed"
		return nil, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("add version err = %v, want boom", err)
	}
	// A version whose id is taken aborts the whole change too.
	_, _, err = s.AddTemplateVersion(ctx, "a", func(t *store.Template) (*store.TemplateVersion, error) {
		t.DisplayName = "changed"
		return &store.TemplateVersion{ID: v.ID, Spec: v.Spec, CreatedAt: now()}, nil
	})
	if !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("add version with a used id: %v, want already exists", err)
	}
	after, _ := s.GetTemplate(ctx, "a")
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("aborted add changed the template (-before +after):\n%s", diff)
	}
	if vs, _ := s.ListTemplateVersions(ctx, "a"); len(vs) != 1 {
		t.Errorf("aborted add left %d versions, want 1", len(vs))
	}
}

func testTemplateConcurrentVersions(t *testing.T, s store.Store) {
	ctx := context.Background()
	tpl, v := newTemplate("c", now())
	mustCreateTemplate(t, s, tpl, v)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := s.AddTemplateVersion(ctx, "c", func(t *store.Template) (*store.TemplateVersion, error) {
				return &store.TemplateVersion{ID: fmt.Sprintf("ver-c-concurrent-%d", i), Spec: t.Spec, CreatedAt: now()}, nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := s.GetTemplate(ctx, "c")
	if err != nil || got.LatestVersion != n+1 {
		t.Fatalf("latest version = %v, %v; want %d: lost versions", got, err, n+1)
	}
	vs, err := s.ListTemplateVersions(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	nums := []int{}
	for _, v := range vs {
		nums = append(nums, v.Version)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(nums)))
	want := []int{}
	for i := n + 1; i >= 1; i-- {
		want = append(want, i)
	}
	if diff := cmp.Diff(want, nums); diff != "" {
		t.Errorf("version numbers (-want +got):\n%s", diff)
	}
}

func testTemplateDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	tpl, v := newTemplate("d", now())
	mustCreateTemplate(t, s, tpl, v)
	if _, _, err := s.AddTemplateVersion(ctx, "d", func(t *store.Template) (*store.TemplateVersion, error) {
		return &store.TemplateVersion{ID: "ver-d-2", Spec: t.Spec, CreatedAt: now()}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTemplate(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTemplate(ctx, "d"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get after delete: %v, want not found", err)
	}
	if err := s.DeleteTemplate(ctx, "d"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second delete: %v, want not found", err)
	}
	// The name and the version ids are free again: versions went with it.
	again, av := newTemplate("d", now())
	again.ID = "tpl-d2"
	av.ID = "ver-d-2"
	mustCreateTemplate(t, s, again, av)
	vs, err := s.ListTemplateVersions(ctx, "d")
	if err != nil || len(vs) != 1 || vs[0].Version != 1 || vs[0].TemplateID != "tpl-d2" {
		t.Errorf("versions of the recreated template = %v, %v; want only its version 1", vs, err)
	}
}

func testTemplateVersionPage(t *testing.T, s store.Store) {
	ctx := context.Background()
	created := now()
	tpl, v := newTemplate("p", created)
	mustCreateTemplate(t, s, tpl, v)
	for i := 2; i <= 5; i++ {
		// Versions made in the same microsecond still page by number.
		if _, _, err := s.AddTemplateVersion(ctx, "p", func(t *store.Template) (*store.TemplateVersion, error) {
			return &store.TemplateVersion{ID: fmt.Sprintf("ver-p-%d", 7-i), Spec: t.Spec, CreatedAt: created}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		p    store.Page
		want [][]int
	}{
		{"all, newest first", store.Page{Desc: true}, [][]int{{5, 4, 3, 2, 1}}},
		{"all, oldest first", store.Page{}, [][]int{{1, 2, 3, 4, 5}}},
		{"newest first, pages of 2", store.Page{Limit: 2, Desc: true}, [][]int{{5, 4}, {3, 2}, {1}}},
		{"oldest first, pages of 3", store.Page{Limit: 3}, [][]int{{1, 2, 3}, {4, 5}}},
		{"one page exactly", store.Page{Limit: 5, Desc: true}, [][]int{{5, 4, 3, 2, 1}}},
		{"after version 3, newest first", store.Page{Limit: 10, Desc: true, After: store.VersionCursor(3)}, [][]int{{2, 1}}},
		{"after the last", store.Page{Limit: 1, After: store.VersionCursor(5)}, [][]int{{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := [][]int{}
			for p := tt.p; len(got) < 10; {
				vs, next, err := s.ListTemplateVersionPage(ctx, "p", p)
				if err != nil {
					t.Fatal(err)
				}
				nums := []int{}
				for _, v := range vs {
					nums = append(nums, v.Version)
				}
				got = append(got, nums)
				if next == "" {
					break
				}
				p.After = next
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
		})
	}
	for _, cursor := range []string{"nope", store.Cursor(created, "ver-p-2"), store.VersionCursor(0)} {
		if _, _, err := s.ListTemplateVersionPage(ctx, "p", store.Page{After: cursor}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("cursor %q: %v, want invalid argument", cursor, err)
		}
	}
	if _, _, err := s.ListTemplateVersionPage(ctx, "nope", store.Page{Limit: 1}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("an unknown template: %v, want not found", err)
	}
}
