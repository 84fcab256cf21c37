package template

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"python-3-11", true},
		{"0abc9", true},
		{strings.Repeat("a", 63), true},
		{"", false},
		{strings.Repeat("a", 64), false},
		{"-a", false},
		{"a-", false},
		{"A", false},
		{"a_b", false},
		{"a.b", false},
		{"a b", false},
		{"ü", false},
		{"a\n", false},
	}
	for _, tt := range tests {
		err := ValidateName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateName(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, errdefs.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "invalid name: ")) {
			t.Errorf("ValidateName(%q) = %v: want an invalid argument starting \"invalid name: \"", tt.name, err)
		}
	}
}

func TestValidateSpec(t *testing.T) {
	probe := func(cmd ...string) *api.ProbeSpec { return &api.ProbeSpec{Exec: api.ExecAction{Command: cmd}} }
	tests := []struct {
		name    string
		in      api.TemplateSpec
		want    api.TemplateSpec
		wantErr string // substring; "" means valid
	}{
		{name: "defaults", in: api.TemplateSpec{Image: "python:3.11-slim"}, want: defaulted("python:3.11-slim")},
		{name: "image trimmed", in: api.TemplateSpec{Image: "  alpine\t"}, want: defaulted("alpine")},
		{name: "given values kept",
			in:   api.TemplateSpec{Image: "alpine", Resources: api.ResourceSpec{CPU: "2", Memory: "1Gi"}, TTL: 7200, StartupTimeout: 60},
			want: api.TemplateSpec{Image: "alpine", Resources: api.ResourceSpec{CPU: "2", Memory: "1Gi"}, TTL: 7200, StartupTimeout: 60}},
		{name: "ttl 0 stays (never expire)", in: api.TemplateSpec{Image: "alpine", TTL: 0}, want: defaulted("alpine")},
		{name: "probe defaults",
			in: api.TemplateSpec{Image: "alpine", ReadinessProbe: probe("test", "-f", "/ready")},
			want: func() api.TemplateSpec {
				s := defaulted("alpine")
				s.ReadinessProbe = &api.ProbeSpec{Exec: api.ExecAction{Command: []string{"test", "-f", "/ready"}}, PeriodSeconds: 10, FailureThreshold: 3}
				return s
			}()},
		{name: "probe values kept",
			in: api.TemplateSpec{Image: "alpine", ReadinessProbe: &api.ProbeSpec{Exec: api.ExecAction{Command: []string{"true"}},
				InitialDelaySeconds: 2, PeriodSeconds: 1, FailureThreshold: 9}},
			want: func() api.TemplateSpec {
				s := defaulted("alpine")
				s.ReadinessProbe = &api.ProbeSpec{Exec: api.ExecAction{Command: []string{"true"}}, InitialDelaySeconds: 2, PeriodSeconds: 1, FailureThreshold: 9}
				return s
			}()},
		{name: "empty lists and maps dropped",
			in:   api.TemplateSpec{Image: "alpine", Command: []string{}, Args: []string{}, Env: map[string]string{}, Files: []api.FileSpec{}},
			want: defaulted("alpine")},
		{name: "domains normalized",
			in: api.TemplateSpec{Image: "alpine", Network: &api.NetworkSpec{AllowInternetAccess: true,
				AllowedDomains: []string{" PyPI.org. ", "pypi.org", "*.GitHub.com", ""}}},
			want: func() api.TemplateSpec {
				s := defaulted("alpine")
				s.Network = &api.NetworkSpec{AllowInternetAccess: true, AllowedDomains: []string{"pypi.org", "*.github.com"}}
				return s
			}()},
		{name: "persistence defaults",
			in: api.TemplateSpec{Image: "alpine", Persistence: &api.PersistenceSpec{Enabled: true}},
			want: func() api.TemplateSpec {
				s := defaulted("alpine")
				s.Persistence = &api.PersistenceSpec{Enabled: true, Mode: "rootfs-overlay", Size: "1Gi", ReclaimPolicy: "Delete"}
				return s
			}()},
		{name: "persistence disabled kept as given",
			in: api.TemplateSpec{Image: "alpine", Persistence: &api.PersistenceSpec{Mode: "whatever"}},
			want: func() api.TemplateSpec {
				s := defaulted("alpine")
				s.Persistence = &api.PersistenceSpec{Mode: "whatever"}
				return s
			}()},
		{name: "persistence and runtime class",
			in: api.TemplateSpec{Image: "alpine", RuntimeClassName: "gvisor",
				Persistence: &api.PersistenceSpec{Enabled: true, Size: "16Mi", StorageClassName: "fast.ssd-1", ReclaimPolicy: "Retain"}},
			want: func() api.TemplateSpec {
				s := defaulted("alpine")
				s.RuntimeClassName = "gvisor"
				s.Persistence = &api.PersistenceSpec{Enabled: true, Mode: "rootfs-overlay", Size: "16Mi", StorageClassName: "fast.ssd-1", ReclaimPolicy: "Retain"}
				return s
			}()},
		{name: "files", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: "/a", Content: "x"}, {Destination: "/b", Source: "https://x/b"}}},
			want: func() api.TemplateSpec {
				s := defaulted("alpine")
				s.Files = []api.FileSpec{{Destination: "/a", Content: "x"}, {Destination: "/b", Source: "https://x/b"}}
				return s
			}()},

		{name: "no image", in: api.TemplateSpec{}, wantErr: "invalid spec: image is required"},
		{name: "blank image", in: api.TemplateSpec{Image: "  "}, wantErr: "image is required"},
		{name: "bad image", in: api.TemplateSpec{Image: "Not A Ref!"}, wantErr: "invalid image reference"},
		{name: "bad cpu", in: api.TemplateSpec{Image: "alpine", Resources: api.ResourceSpec{CPU: "lots"}}, wantErr: "cpu"},
		{name: "zero cpu", in: api.TemplateSpec{Image: "alpine", Resources: api.ResourceSpec{CPU: "0"}}, wantErr: "cpu"},
		{name: "tiny cpu", in: api.TemplateSpec{Image: "alpine", Resources: api.ResourceSpec{CPU: "0.0001"}}, wantErr: "10m minimum"},
		{name: "cpu below what runtimes enforce", in: api.TemplateSpec{Image: "alpine", Resources: api.ResourceSpec{CPU: "5m"}}, wantErr: "10m minimum"},
		{name: "memory below the minimum", in: api.TemplateSpec{Image: "alpine", Resources: api.ResourceSpec{Memory: "1"}}, wantErr: "16Mi minimum"},
		{name: "larger than a spec may be", in: api.TemplateSpec{Image: "alpine", StartupScript: strings.Repeat("x", MaxSpecBytes)}, wantErr: "a spec has at most"},
		{name: "bad memory", in: api.TemplateSpec{Image: "alpine", Resources: api.ResourceSpec{Memory: "12XB"}}, wantErr: "memory"},
		{name: "negative memory", in: api.TemplateSpec{Image: "alpine", Resources: api.ResourceSpec{Memory: "-1Gi"}}, wantErr: "memory"},
		{name: "negative ttl", in: api.TemplateSpec{Image: "alpine", TTL: -1}, wantErr: "ttl must be >= 0"},
		{name: "huge ttl", in: api.TemplateSpec{Image: "alpine", TTL: maxSeconds + 1}, wantErr: "ttl"},
		{name: "negative startup timeout", in: api.TemplateSpec{Image: "alpine", StartupTimeout: -5}, wantErr: "startupTimeout"},
		{name: "empty env name", in: api.TemplateSpec{Image: "alpine", Env: map[string]string{"": "x"}}, wantErr: "env"},
		{name: "env name with =", in: api.TemplateSpec{Image: "alpine", Env: map[string]string{"A=B": "x"}}, wantErr: "env"},
		{name: "env value with NUL", in: api.TemplateSpec{Image: "alpine", Env: map[string]string{"A": "x\x00"}}, wantErr: "env"},
		{name: "file without destination", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Content: "x"}}}, wantErr: "files[0]: destination is required"},
		{name: "file with neither", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: "/a"}}}, wantErr: "exactly one of content and source"},
		{name: "file source not http", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: "/a", Source: "/etc/shadow"}}}, wantErr: "not an http(s) URL"},
		{name: "file source file URL", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: "/a", Source: "file:///etc/shadow"}}}, wantErr: "not an http(s) URL"},
		{name: "file destination with ..", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: "/a/../../b", Content: "x"}}}, wantErr: "'..'"},
		{name: "file destination with NUL", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: "/a\x00", Content: "x"}}}, wantErr: "NUL"},
		{name: "file destination too long", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: "/" + strings.Repeat("a", 4095), Content: "x"}}}, wantErr: "at most 4095"},
		{name: "file destination the root", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: "/", Content: "x"}}}, wantErr: "names a directory"},
		{name: "file destination ending in /", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: "/etc/", Content: "x"}}}, wantErr: "names a directory"},
		{name: "file destination .", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: ".", Content: "x"}}}, wantErr: "names a directory"},
		{name: "file destination ending in /.", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: "/tmp/.", Content: "x"}}}, wantErr: "names a directory"},
		{name: "file destination twice", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: "/a/b", Content: "x"}, {Destination: "/a//b", Content: "y"}}},
			wantErr: `files[1]: destination "/a//b" is files[0]'s too`},
		{name: "command with NUL", in: api.TemplateSpec{Image: "alpine", Command: []string{"sh", "a\x00b"}}, wantErr: "command and args: [1] contains NUL"},
		{name: "startup script with NUL", in: api.TemplateSpec{Image: "alpine", StartupScript: "echo a\x00b"}, wantErr: "startupScript contains NUL"},
		{name: "args with NUL", in: api.TemplateSpec{Image: "alpine", Command: []string{"sh"}, Args: []string{"\x00"}}, wantErr: "command and args: [1] contains NUL"},
		{name: "empty program", in: api.TemplateSpec{Image: "alpine", Command: []string{""}, Args: []string{"x"}}, wantErr: "the program, the first, is empty"},
		{name: "args alone, empty program", in: api.TemplateSpec{Image: "alpine", Args: []string{""}}, wantErr: "the program, the first, is empty"},
		{name: "probe with NUL", in: api.TemplateSpec{Image: "alpine", ReadinessProbe: probe("test", "\x00")}, wantErr: "readinessProbe: exec.command: [1] contains NUL"},
		{name: "probe empty program", in: api.TemplateSpec{Image: "alpine", ReadinessProbe: probe("")}, wantErr: "readinessProbe: exec.command: the program"},
		{name: "file with both", in: api.TemplateSpec{Image: "alpine", Files: []api.FileSpec{{Destination: "/a", Content: "x", Source: "https://y/z"}}}, wantErr: "exactly one"},
		{name: "probe without command", in: api.TemplateSpec{Image: "alpine", ReadinessProbe: probe()}, wantErr: "exec.command is required"},
		{name: "probe negative", in: api.TemplateSpec{Image: "alpine", ReadinessProbe: &api.ProbeSpec{Exec: api.ExecAction{Command: []string{"true"}}, PeriodSeconds: -1}}, wantErr: ">= 0"},
		{name: "domain with scheme", in: api.TemplateSpec{Image: "alpine", Network: &api.NetworkSpec{AllowedDomains: []string{"https://x.org"}}}, wantErr: "allowedDomains"},
		{name: "domain with port", in: api.TemplateSpec{Image: "alpine", Network: &api.NetworkSpec{AllowedDomains: []string{"x.org:443"}}}, wantErr: "allowedDomains"},
		{name: "domain with path", in: api.TemplateSpec{Image: "alpine", Network: &api.NetworkSpec{AllowedDomains: []string{"x.org/a"}}}, wantErr: "allowedDomains"},
		{name: "domain with a space", in: api.TemplateSpec{Image: "alpine", Network: &api.NetworkSpec{AllowedDomains: []string{"a b.org"}}}, wantErr: "want a domain name"},
		{name: "domain with an empty label", in: api.TemplateSpec{Image: "alpine", Network: &api.NetworkSpec{AllowedDomains: []string{"a..org"}}}, wantErr: "want a domain name"},
		{name: "inner wildcard", in: api.TemplateSpec{Image: "alpine", Network: &api.NetworkSpec{AllowedDomains: []string{"a.*.org"}}}, wantErr: "wildcard"},
		{name: "bare wildcard", in: api.TemplateSpec{Image: "alpine", Network: &api.NetworkSpec{AllowedDomains: []string{"*"}}}, wantErr: "wildcard"},
		{name: "persistence mode", in: api.TemplateSpec{Image: "alpine", Persistence: &api.PersistenceSpec{Enabled: true, Mode: "disk"}}, wantErr: "mode"},
		{name: "persistence size", in: api.TemplateSpec{Image: "alpine", Persistence: &api.PersistenceSpec{Enabled: true, Size: "big"}}, wantErr: "persistence"},
		{name: "persistence size zero", in: api.TemplateSpec{Image: "alpine", Persistence: &api.PersistenceSpec{Enabled: true, Size: "0"}}, wantErr: "positive"},
		{name: "persistence size tiny", in: api.TemplateSpec{Image: "alpine", Persistence: &api.PersistenceSpec{Enabled: true, Size: "15Mi"}}, wantErr: "16Mi minimum"},
		{name: "persistence size negative", in: api.TemplateSpec{Image: "alpine", Persistence: &api.PersistenceSpec{Enabled: true, Size: "-1Gi"}}, wantErr: "persistence"},
		{name: "storage class uppercase", in: api.TemplateSpec{Image: "alpine", Persistence: &api.PersistenceSpec{Enabled: true, StorageClassName: "Fast"}}, wantErr: "storageClassName"},
		{name: "storage class with slash", in: api.TemplateSpec{Image: "alpine", Persistence: &api.PersistenceSpec{Enabled: true, StorageClassName: "a/b"}}, wantErr: "storageClassName"},
		{name: "runtime class with space", in: api.TemplateSpec{Image: "alpine", RuntimeClassName: "g visor"}, wantErr: "runtimeClassName"},
		{name: "runtime class too long", in: api.TemplateSpec{Image: "alpine", RuntimeClassName: strings.Repeat("a", 254)}, wantErr: "runtimeClassName"},
		{name: "persistence reclaim", in: api.TemplateSpec{Image: "alpine", Persistence: &api.PersistenceSpec{Enabled: true, ReclaimPolicy: "Keep"}}, wantErr: "reclaimPolicy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := fmt.Sprintf("%#v", tt.in)
			got, err := ValidateSpec(tt.in)
			if after := fmt.Sprintf("%#v", tt.in); after != before {
				t.Errorf("ValidateSpec changed its argument:\n%s\n%s", before, after)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errdefs.ErrInvalidArgument) ||
					!strings.HasPrefix(err.Error(), "invalid spec: ") {
					t.Fatalf("err = %v, want an invalid argument \"invalid spec: ...%s...\"", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			// Validating what is stored changes nothing.
			again, err := ValidateSpec(got)
			if diff := cmp.Diff(got, again); err != nil || diff != "" {
				t.Errorf("not idempotent (%v):\n%s", err, diff)
			}
		})
	}
}

func TestCreate(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	private := false
	got, err := f.svc.Create(ctx, api.CreateTemplateRequest{
		Name: "py", DisplayName: "Python", Description: "desc", Tags: []string{"python", "ml"}, IsPublic: &private,
		Spec: api.TemplateSpec{Image: "python:3.11-slim", TTL: 7200, Env: map[string]string{"A": "1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	spec := defaulted("python:3.11-slim")
	spec.TTL, spec.Env = 7200, map[string]string{"A": "1"}
	want := &api.Template{ID: got.ID, Name: "py", DisplayName: "Python", Description: "desc", Tags: []string{"python", "ml"},
		Author: "", IsPublic: false, LatestVersion: 1, CreatedAt: epoch, UpdatedAt: epoch, Spec: &spec}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(got.ID, "tpl-") || len(got.ID) != len("tpl-12345678") {
		t.Errorf("id %q: want tpl-xxxxxxxx", got.ID)
	}
	stored, err := f.svc.Get(ctx, "py")
	if diff := cmp.Diff(want, stored); err != nil || diff != "" {
		t.Errorf("get after create (%v) (-want +got):\n%s", err, diff)
	}
	vs, err := f.svc.Versions(ctx, "py")
	if err != nil {
		t.Fatal(err)
	}
	wantV := api.TemplateVersion{ID: vs.Items[0].ID, TemplateID: got.ID, Version: 1, Spec: spec, Changelog: "Initial version", CreatedAt: epoch}
	if diff := cmp.Diff(&api.VersionList{Items: []api.TemplateVersion{wantV}, Total: 1}, vs); diff != "" || !strings.HasPrefix(wantV.ID, "ver-") {
		t.Errorf("versions (-want +got):\n%s", diff)
	}

	// isPublic defaults to true; absent tags are [].
	other, err := f.svc.Create(ctx, api.CreateTemplateRequest{Name: "other", Spec: api.TemplateSpec{Image: "alpine"}})
	if err != nil {
		t.Fatal(err)
	}
	if !other.IsPublic || other.Tags == nil || len(other.Tags) != 0 {
		t.Errorf("defaults: public %v, tags %#v; want true and []", other.IsPublic, other.Tags)
	}
	if len(f.pp.Calls()) != 0 {
		t.Errorf("prepulls without autoPrepull: %v", f.pp.Calls())
	}
}

func TestCreateErrors(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.create(t, "taken", "alpine")
	tests := []struct {
		name  string
		req   api.CreateTemplateRequest
		class error
		code  string
		msg   string
	}{
		{"duplicate", api.CreateTemplateRequest{Name: "taken", Spec: api.TemplateSpec{Image: "alpine"}},
			errdefs.ErrAlreadyExists, api.CodeTemplateExists, "template with name 'taken' already exists"},
		{"bad name", api.CreateTemplateRequest{Name: "Bad_Name", Spec: api.TemplateSpec{Image: "alpine"}},
			errdefs.ErrInvalidArgument, "", "invalid name: name must consist of lowercase letters, numbers, and hyphens, and must start and end with a letter or number"},
		{"no name", api.CreateTemplateRequest{Spec: api.TemplateSpec{Image: "alpine"}},
			errdefs.ErrInvalidArgument, "", "invalid name: name must be between 1 and 63 characters"},
		{"no image", api.CreateTemplateRequest{Name: "new"}, errdefs.ErrInvalidArgument, "", "invalid spec: image is required"},
		// The spec is checked before the name is looked up.
		{"bad spec of a taken name", api.CreateTemplateRequest{Name: "taken", Spec: api.TemplateSpec{Image: "alpine", TTL: -1}},
			errdefs.ErrInvalidArgument, "", "invalid spec: ttl must be >= 0 (0 means never expire)"},
		{"description too long", api.CreateTemplateRequest{Name: "new", Spec: api.TemplateSpec{Image: "alpine"}, Description: strings.Repeat("d", maxDescription+1)},
			errdefs.ErrInvalidArgument, "", fmt.Sprintf("description is %d bytes; at most %d", maxDescription+1, maxDescription)},
		{"too many tags", api.CreateTemplateRequest{Name: "new", Spec: api.TemplateSpec{Image: "alpine"}, Tags: make([]string, maxTags+1)},
			errdefs.ErrInvalidArgument, "", fmt.Sprintf("tags: %d of them; at most %d", maxTags+1, maxTags)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.Create(ctx, tt.req)
			checkErr(t, err, tt.class, tt.code)
			if err != nil && err.Error() != tt.msg {
				t.Errorf("message %q, want %q", err, tt.msg)
			}
			if diff := cmp.Diff([]string{"taken"}, f.names(t)); diff != "" {
				t.Errorf("stored templates changed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCreateAutoPrepull(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.pp.fail = map[string]error{"busybox": errors.New("no space")}
	for _, img := range []string{"python:3.11-slim", "busybox"} {
		name := strings.NewReplacer(":", "-", ".", "-").Replace(img)
		if _, err := f.svc.Create(ctx, api.CreateTemplateRequest{Name: name, Spec: api.TemplateSpec{Image: img}, AutoPrepull: true}); err != nil {
			t.Fatalf("create with a prepull that fails: %v", err)
		}
	}
	want := []prepullCall{{"python:3.11-slim", "python-3-11-slim"}, {"busybox", "busybox"}}
	if diff := cmp.Diff(want, f.pp.Calls()); diff != "" {
		t.Errorf("prepulls (-want +got):\n%s", diff)
	}
	// Without a prepuller autoPrepull is ignored.
	svc := New(f.store)
	if _, err := svc.Create(ctx, api.CreateTemplateRequest{Name: "x", Spec: api.TemplateSpec{Image: "alpine"}, AutoPrepull: true}); err != nil {
		t.Fatal(err)
	}
}

// A random id already in use is retried; a name in use is not.
func TestCreateIDCollision(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	ids := []string{"tpl-1", "ver-1", "tpl-1", "ver-2", "tpl-2", "ver-3", "ver-3", "ver-4"}
	f.svc.newID = func(prefix string) string {
		id := ids[0]
		ids = ids[1:]
		if !strings.HasPrefix(id, prefix) {
			t.Fatalf("id %s for prefix %s", id, prefix)
		}
		return id
	}
	f.create(t, "a", "alpine")
	b := f.create(t, "b", "alpine") // tpl-1 is taken: retried as tpl-2
	if b.ID != "tpl-2" {
		t.Errorf("b got id %s, want tpl-2", b.ID)
	}
	// ver-3 is taken: the update retries with ver-4.
	if _, err := f.svc.Update(ctx, "a", api.UpdateTemplateRequest{Spec: api.TemplateSpec{Image: "alpine"}}); err != nil {
		t.Fatalf("update with a taken version id: %v", err)
	}
	v, err := f.svc.Version(ctx, "a", 2)
	if err != nil || v.ID != "ver-4" {
		t.Errorf("version 2 = %+v, %v; want id ver-4", v, err)
	}
}

func TestUpdate(t *testing.T) {
	ctx := context.Background()
	yes, no := true, false
	tests := []struct {
		name string
		req  api.UpdateTemplateRequest
		want api.Template // metadata after the update
	}{
		{"spec only keeps metadata", api.UpdateTemplateRequest{},
			api.Template{DisplayName: "Old", Description: "old desc", Tags: []string{"a", "b"}, IsPublic: true}},
		{"non-empty text replaces", api.UpdateTemplateRequest{DisplayName: "New", Description: "new desc"},
			api.Template{DisplayName: "New", Description: "new desc", Tags: []string{"a", "b"}, IsPublic: true}},
		{"tags replaced", api.UpdateTemplateRequest{Tags: []string{"c"}},
			api.Template{DisplayName: "Old", Description: "old desc", Tags: []string{"c"}, IsPublic: true}},
		{"empty tags clear", api.UpdateTemplateRequest{Tags: []string{}},
			api.Template{DisplayName: "Old", Description: "old desc", Tags: []string{}, IsPublic: true}},
		{"isPublic false", api.UpdateTemplateRequest{IsPublic: &no},
			api.Template{DisplayName: "Old", Description: "old desc", Tags: []string{"a", "b"}, IsPublic: false}},
		{"isPublic true", api.UpdateTemplateRequest{IsPublic: &yes},
			api.Template{DisplayName: "Old", Description: "old desc", Tags: []string{"a", "b"}, IsPublic: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			created, err := f.svc.Create(ctx, api.CreateTemplateRequest{Name: "t", DisplayName: "Old", Description: "old desc",
				Tags: []string{"a", "b"}, Spec: api.TemplateSpec{Image: "alpine", Env: map[string]string{"OLD": "1"}}})
			if err != nil {
				t.Fatal(err)
			}
			later := f.clock.Advance(time.Minute)
			tt.req.Spec = api.TemplateSpec{Image: "python:3.12", TTL: 60}
			tt.req.Changelog = "to 3.12"
			got, err := f.svc.Update(ctx, "t", tt.req)
			if err != nil {
				t.Fatal(err)
			}
			spec := defaulted("python:3.12")
			spec.TTL = 60 // a full replacement: OLD env is gone
			want := tt.want
			want.ID, want.Name, want.LatestVersion, want.CreatedAt, want.UpdatedAt, want.Spec = created.ID, "t", 2, epoch, later, &spec
			if diff := cmp.Diff(&want, got); diff != "" {
				t.Errorf("updated (-want +got):\n%s", diff)
			}
			if stored, _ := f.svc.Get(ctx, "t"); !cmp.Equal(got, stored) {
				t.Errorf("stored %+v differs from returned %+v", stored, got)
			}
			v, err := f.svc.Version(ctx, "t", 2)
			if err != nil || v.Changelog != "to 3.12" || !v.CreatedAt.Equal(later) || !cmp.Equal(v.Spec, spec) {
				t.Errorf("version 2 = %+v, %v", v, err)
			}
			v1, err := f.svc.Version(ctx, "t", 1)
			if err != nil || v1.Spec.Image != "alpine" || v1.Spec.Env["OLD"] != "1" {
				t.Errorf("version 1 changed: %+v, %v", v1, err)
			}
		})
	}
}

func TestUpdateErrors(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.create(t, "t", "alpine")
	// An identical spec still makes a new version.
	if got, err := f.svc.Update(ctx, "t", api.UpdateTemplateRequest{Spec: api.TemplateSpec{Image: "alpine"}}); err != nil || got.LatestVersion != 2 {
		t.Fatalf("update with the same spec = %+v, %v; want version 2", got, err)
	}
	_, err := f.svc.Update(ctx, "nope", api.UpdateTemplateRequest{Spec: api.TemplateSpec{Image: "alpine"}})
	checkErr(t, err, errdefs.ErrNotFound, api.CodeTemplateNotFound)
	if err != nil && err.Error() != "Template 'nope' not found" {
		t.Errorf("message %q", err)
	}
	// The spec is checked before the name is looked up.
	_, err = f.svc.Update(ctx, "nope", api.UpdateTemplateRequest{})
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
	_, err = f.svc.Update(ctx, "t", api.UpdateTemplateRequest{Spec: api.TemplateSpec{Image: "alpine", TTL: -3}})
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
	for _, bad := range []api.UpdateTemplateRequest{
		{DisplayName: strings.Repeat("n", maxDisplayName+1)},
		// NUL, which PostgreSQL's text refuses, is refused on every store.
		{DisplayName: "a\x00b"},
		{Description: "a\x00b"},
		{Tags: []string{"ok", "a\x00b"}},
	} {
		bad.Spec = api.TemplateSpec{Image: "alpine"}
		_, err = f.svc.Update(ctx, "t", bad)
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
	}
	if got, _ := f.svc.Get(ctx, "t"); got.LatestVersion != 2 {
		t.Errorf("a refused update made version %d", got.LatestVersion)
	}
}

func TestVersionsAndRollback(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	created := f.create(t, "t", "alpine:3.18")
	for _, img := range []string{"alpine:3.19", "alpine:3.20"} {
		f.clock.Advance(time.Second)
		if _, err := f.svc.Update(ctx, "t", api.UpdateTemplateRequest{Spec: api.TemplateSpec{Image: img}, Changelog: img}); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := f.svc.Versions(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var nums []int
	for _, v := range vs.Items {
		nums = append(nums, v.Version)
	}
	if diff := cmp.Diff([]int{3, 2, 1}, nums); diff != "" || vs.Total != 3 {
		t.Errorf("versions newest first (-want +got):\n%s total %d", diff, vs.Total)
	}

	rolledAt := f.clock.Advance(time.Minute)
	got, err := f.svc.Rollback(ctx, "t", api.RollbackRequest{TargetVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := &api.RollbackResponse{ID: created.ID, Name: "t", LatestVersion: 4, RolledBackFrom: 3, RolledBackTo: 1, UpdatedAt: rolledAt}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rollback (-want +got):\n%s", diff)
	}
	v4, err := f.svc.Version(ctx, "t", 4)
	if err != nil || v4.Spec.Image != "alpine:3.18" || v4.Changelog != "Rolled back to version 1" {
		t.Errorf("version 4 = %+v, %v; want version 1's spec", v4, err)
	}
	tpl, _ := f.svc.Get(ctx, "t")
	if tpl.Spec.Image != "alpine:3.18" || tpl.LatestVersion != 4 {
		t.Errorf("template after rollback: %+v", tpl)
	}
	// Rolling back to the current version still adds one; a changelog is kept.
	got, err = f.svc.Rollback(ctx, "t", api.RollbackRequest{TargetVersion: 4, Changelog: "again"})
	if err != nil || got.LatestVersion != 5 || got.RolledBackFrom != 4 {
		t.Errorf("rollback to current = %+v, %v", got, err)
	}
	if v5, _ := f.svc.Version(ctx, "t", 5); v5 == nil || v5.Changelog != "again" {
		t.Errorf("version 5 = %+v", v5)
	}

	errs := []struct {
		name  string
		err   error
		class error
		code  string
		msg   string
	}{
		{"version of unknown template", second(f.svc.Version(ctx, "nope", 1)), errdefs.ErrNotFound, api.CodeVersionNotFound, "Template 'nope' not found"},
		{"unknown version", second(f.svc.Version(ctx, "t", 9)), errdefs.ErrNotFound, api.CodeVersionNotFound, "version 9 not found"},
		{"versions of unknown template", second(f.svc.Versions(ctx, "nope")), errdefs.ErrNotFound, api.CodeTemplateNotFound, "Template 'nope' not found"},
		{"rollback of unknown template", second(f.svc.Rollback(ctx, "nope", api.RollbackRequest{TargetVersion: 1})), errdefs.ErrNotFound, api.CodeTemplateNotFound, "Template 'nope' not found"},
		{"rollback to unknown version", second(f.svc.Rollback(ctx, "t", api.RollbackRequest{TargetVersion: 9})), errdefs.ErrNotFound, api.CodeTemplateNotFound, "version 9 not found"},
		{"rollback to 0", second(f.svc.Rollback(ctx, "t", api.RollbackRequest{})), errdefs.ErrInvalidArgument, "", "target version must be at least 1"},
		{"rollback to -1", second(f.svc.Rollback(ctx, "t", api.RollbackRequest{TargetVersion: -1})), errdefs.ErrInvalidArgument, "", "target version must be at least 1"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, tt.err, tt.class, tt.code)
			if tt.err != nil && tt.err.Error() != tt.msg {
				t.Errorf("message %q, want %q", tt.err, tt.msg)
			}
		})
	}
	if tpl, _ := f.svc.Get(ctx, "t"); tpl.LatestVersion != 5 {
		t.Errorf("failed rollbacks made versions: latest %d", tpl.LatestVersion)
	}
}

func second[T any](_ T, err error) error { return err }

func TestList(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	for i := range 25 {
		f.clock.Advance(time.Second)
		tags := []string{"all"}
		if i%5 == 0 {
			tags = append(tags, "python")
		}
		f.create(t, fmt.Sprintf("t%02d", i), "alpine", tags...)
	}
	tests := []struct {
		name                 string
		opts                 ListOptions
		first                string
		n, total, page, size int
	}{
		{"defaults", ListOptions{}, "t24", 20, 25, 1, 20},
		{"page 2", ListOptions{Page: 2}, "t04", 5, 25, 2, 20},
		{"page past end", ListOptions{Page: 9}, "", 0, 25, 9, 20},
		{"negative page", ListOptions{Page: -3}, "t24", 20, 25, 1, 20},
		{"page size 5", ListOptions{Page: 3, PageSize: 5}, "t14", 5, 25, 3, 5},
		{"page size 100 kept", ListOptions{PageSize: 100}, "t24", 25, 25, 1, 100},
		{"page size 101 reset to 20", ListOptions{PageSize: 101}, "t24", 20, 25, 1, 20},
		{"page size -1 reset to 20", ListOptions{PageSize: -1}, "t24", 20, 25, 1, 20},
		{"huge page", ListOptions{Page: int(^uint(0) >> 1), PageSize: 100}, "", 0, 25, int(^uint(0) >> 1), 100},
		{"tag", ListOptions{Tag: "python"}, "t20", 5, 5, 1, 20},
		{"search", ListOptions{Search: "T1"}, "t19", 10, 10, 1, 20},
		{"tag and search", ListOptions{Tag: "python", Search: "t1"}, "t15", 2, 2, 1, 20},
		{"no match", ListOptions{Tag: "nope"}, "", 0, 0, 1, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.svc.List(ctx, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got.Items == nil || len(got.Items) != tt.n || got.Total != tt.total || got.Page != tt.page || got.PageSize != tt.size {
				t.Fatalf("list: %d items (nil %v), total %d, page %d, size %d; want %d, %d, %d, %d",
					len(got.Items), got.Items == nil, got.Total, got.Page, got.PageSize, tt.n, tt.total, tt.page, tt.size)
			}
			if tt.n > 0 && (got.Items[0].Name != tt.first || got.Items[0].Spec == nil) {
				t.Errorf("first item %s (spec %v), want %s with its spec", got.Items[0].Name, got.Items[0].Spec, tt.first)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.create(t, "t", "alpine")
	f.create(t, "keep", "alpine")
	if err := f.svc.Delete(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	checkErr(t, f.svc.Delete(ctx, "t"), errdefs.ErrNotFound, api.CodeTemplateNotFound)
	_, err := f.svc.Get(ctx, "t")
	checkErr(t, err, errdefs.ErrNotFound, api.CodeTemplateNotFound)
	_, err = f.svc.Versions(ctx, "t")
	checkErr(t, err, errdefs.ErrNotFound, api.CodeTemplateNotFound)
	if diff := cmp.Diff([]string{"keep"}, f.names(t)); diff != "" {
		t.Errorf("templates (-want +got):\n%s", diff)
	}
	// The name can be used again, from version 1.
	if got := f.create(t, "t", "busybox"); got.LatestVersion != 1 {
		t.Errorf("recreated template at version %d", got.LatestVersion)
	}
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.create(t, "t", "alpine:1")
	if _, err := f.svc.Update(ctx, "t", api.UpdateTemplateRequest{Spec: api.TemplateSpec{Image: "alpine:2"}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		tpl       string
		version   int
		wantImage string
		wantV     int
		class     error
		code      string
	}{
		{"latest", "t", 0, "alpine:2", 2, nil, ""},
		{"version 1", "t", 1, "alpine:1", 1, nil, ""},
		{"version 2", "t", 2, "alpine:2", 2, nil, ""},
		{"unknown template", "nope", 0, "", 0, errdefs.ErrNotFound, api.CodeTemplateNotFound},
		{"unknown template version", "nope", 1, "", 0, errdefs.ErrNotFound, api.CodeTemplateNotFound},
		{"unknown version", "t", 3, "", 0, errdefs.ErrNotFound, api.CodeTemplateNotFound},
		{"negative version", "t", -1, "", 0, errdefs.ErrInvalidArgument, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, v, err := f.svc.Resolve(ctx, tt.tpl, tt.version)
			if tt.class != nil {
				checkErr(t, err, tt.class, tt.code)
				return
			}
			want := defaulted(tt.wantImage)
			if err != nil || v != tt.wantV || !cmp.Equal(want, spec) {
				t.Errorf("Resolve = %+v, %d, %v; want %+v, %d", spec, v, err, want, tt.wantV)
			}
		})
	}
}

// The service works over any store.Templates: a failing store's errors
// come through unclassified (500s), not as not-found.
func TestStoreErrors(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("disk on fire")
	svc := New(brokenStore{boom})
	checks := map[string]error{}
	_, checks["get"] = svc.Get(ctx, "t")
	_, checks["list"] = svc.List(ctx, ListOptions{})
	_, checks["create"] = svc.Create(ctx, api.CreateTemplateRequest{Name: "t", Spec: api.TemplateSpec{Image: "alpine"}})
	_, checks["update"] = svc.Update(ctx, "t", api.UpdateTemplateRequest{Spec: api.TemplateSpec{Image: "alpine"}})
	checks["delete"] = svc.Delete(ctx, "t")
	_, _, checks["resolve"] = svc.Resolve(ctx, "t", 0)
	_, checks["export"] = svc.ExportAll(ctx, "", nil)
	_, checks["versions"] = svc.Versions(ctx, "t")
	for op, err := range checks {
		if !errors.Is(err, boom) {
			t.Errorf("%s: %v, want the store's error", op, err)
		}
	}
	res, err := svc.Import(ctx, []byte("kind: SandboxTemplate\nmetadata: {name: t}\nspec: {image: alpine}\n"), "", false)
	if err != nil || res.Failed != 1 || !strings.Contains(res.Results[0].Error, boom.Error()) {
		t.Errorf("import over a broken store = %+v, %v; want the item failed with the store's error", res, err)
	}
}

type brokenStore struct{ err error }

func (b brokenStore) CreateTemplate(context.Context, *store.Template, *store.TemplateVersion) error {
	return b.err
}
func (b brokenStore) GetTemplate(context.Context, string) (*store.Template, error) { return nil, b.err }
func (b brokenStore) ListTemplates(context.Context, store.TemplateFilter) ([]*store.Template, int, error) {
	return nil, 0, b.err
}
func (b brokenStore) AddTemplateVersion(context.Context, string, func(*store.Template) (*store.TemplateVersion, error)) (*store.Template, *store.TemplateVersion, error) {
	return nil, nil, b.err
}
func (b brokenStore) DeleteTemplate(context.Context, string) error { return b.err }
func (b brokenStore) ListTemplateVersions(context.Context, string) ([]*store.TemplateVersion, error) {
	return nil, b.err
}
func (b brokenStore) ListTemplateVersionPage(context.Context, string, store.Page) ([]*store.TemplateVersion, string, error) {
	return nil, "", b.err
}
func (b brokenStore) GetTemplateVersion(context.Context, string, int) (*store.TemplateVersion, error) {
	return nil, b.err
}

// TestChangeHook: the change hook is told of every template made, given a
// new version or deleted, once stored, and of nothing that failed.
func TestChangeHook(t *testing.T) {
	ctx := context.Background()
	spec := api.TemplateSpec{Image: "alpine"}
	doc := []byte("apiVersion: liteboxd/v1\nkind: SandboxTemplate\nmetadata:\n  name: t\nspec:\n  image: busybox\n")
	tests := []struct {
		name  string
		do    func(s *Service) error
		want  []string
		fails bool
	}{
		{"create", func(s *Service) error {
			_, err := s.Create(ctx, api.CreateTemplateRequest{Name: "new", Spec: spec})
			return err
		}, []string{"new"}, false},
		{"create an existing one", func(s *Service) error {
			_, err := s.Create(ctx, api.CreateTemplateRequest{Name: "t", Spec: spec})
			return err
		}, nil, true},
		{"update", func(s *Service) error {
			_, err := s.Update(ctx, "t", api.UpdateTemplateRequest{Spec: spec})
			return err
		}, []string{"t"}, false},
		{"update an unknown one", func(s *Service) error {
			_, err := s.Update(ctx, "nope", api.UpdateTemplateRequest{Spec: spec})
			return err
		}, nil, true},
		{"rollback", func(s *Service) error {
			_, err := s.Rollback(ctx, "t", api.RollbackRequest{TargetVersion: 1})
			return err
		}, []string{"t"}, false},
		{"import", func(s *Service) error {
			_, err := s.Import(ctx, doc, api.StrategyCreateOrUpdate, false)
			return err
		}, []string{"t"}, false},
		{"delete", func(s *Service) error { return s.Delete(ctx, "t") }, []string{"t"}, false},
		{"delete an unknown one", func(s *Service) error { return s.Delete(ctx, "nope") }, nil, true},
		{"read", func(s *Service) error {
			_, _, err := s.Resolve(ctx, "t", 0)
			return err
		}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.create(t, "t", "alpine")
			var got []string
			f.svc.changed = func(_ context.Context, name string) { got = append(got, name) }
			err := tt.do(f.svc)
			if (err != nil) != tt.fails {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("changes told (-want +got):\n%s", diff)
			}
		})
	}
}
