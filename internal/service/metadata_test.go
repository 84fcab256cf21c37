package service

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// TestMetadata runs its steps in order on one sandbox: metadata set at
// create, merge patches that build on each other, and the bounds.
func TestMetadata(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	sb, err := e.sb.Create(ctx, api.CreateSandboxRequest{Image: "alpine", Metadata: map[string]string{"team": "ml", "old": "x"}})
	if err != nil || fmt.Sprint(sb.Metadata) != "map[old:x team:ml]" {
		t.Fatalf("create: %v, %v", sb, err)
	}
	tooMany := map[string]*string{}
	for i := range 63 {
		tooMany[fmt.Sprint("k", i)] = ptr("v")
	}
	for _, tc := range []struct {
		name  string
		id    string
		patch map[string]*string
		class error
		want  string // the metadata after, as fmt.Sprint shows it
	}{
		{"set and delete", sb.ID, map[string]*string{"project": ptr("p"), "old": nil, "gone": nil}, nil, "map[project:p team:ml]"},
		{"empty patch", sb.ID, map[string]*string{}, nil, "map[project:p team:ml]"},
		{"replace", sb.ID, map[string]*string{"team": ptr("infra")}, nil, "map[project:p team:infra]"},
		{"empty key", sb.ID, map[string]*string{"": ptr("v")}, errdefs.ErrInvalidArgument, "map[project:p team:infra]"},
		{"value too long", sb.ID, map[string]*string{"k": ptr(strings.Repeat("v", 1025))}, errdefs.ErrInvalidArgument, "map[project:p team:infra]"},
		{"65 keys", sb.ID, tooMany, errdefs.ErrInvalidArgument, "map[project:p team:infra]"},
		{"delete all", sb.ID, map[string]*string{"team": nil, "project": nil}, nil, "map[]"},
		{"unknown sandbox", "nope", map[string]*string{"k": ptr("v")}, errdefs.ErrNotFound, "map[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.sb.PatchMetadata(ctx, tc.id, tc.patch)
			checkErr(t, err, tc.class, "")
			if err == nil && fmt.Sprint(got.Metadata) != tc.want {
				t.Errorf("patch answered %v, want %s", got.Metadata, tc.want)
			}
			if after, err := e.sb.Get(ctx, sb.ID); err != nil || fmt.Sprint(after.Metadata) != tc.want {
				t.Errorf("metadata after: %v, %v; want %s", after.Metadata, err, tc.want)
			}
		})
	}
	_, err = e.sb.Create(ctx, api.CreateSandboxRequest{Image: "alpine", Metadata: map[string]string{"": "v"}})
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
}

// TestListFilters: statuses and metadata select what List lists and Count
// counts.
func TestListFilters(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	mk := func(md map[string]string) string {
		sb, err := e.sb.Create(ctx, api.CreateSandboxRequest{Image: "alpine", Metadata: md})
		if err != nil {
			t.Fatal(err)
		}
		return sb.ID
	}
	a := mk(map[string]string{"team": "x", "env": "dev"})
	b := mk(map[string]string{"team": "x"})
	c := mk(nil)
	if _, err := e.sb.Stop(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts ListOptions
		want []string
	}{
		{"all", ListOptions{}, []string{a, b, c}},
		{"running", ListOptions{Statuses: []api.SandboxStatus{api.StatusRunning}}, []string{a, b}},
		{"succeeded (stopped) or pending", ListOptions{Statuses: []api.SandboxStatus{api.StatusSucceeded, api.StatusPending}}, []string{c}},
		{"metadata", ListOptions{Metadata: map[string]string{"team": "x"}}, []string{a, b}},
		{"metadata, both pairs", ListOptions{Metadata: map[string]string{"team": "x", "env": "dev"}}, []string{a}},
		{"metadata and status", ListOptions{Metadata: map[string]string{"team": "x"}, Statuses: []api.SandboxStatus{api.StatusSucceeded}}, nil},
		{"paged", ListOptions{Metadata: map[string]string{"team": "x"}, Limit: ptr(1)}, []string{a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := e.sb.List(ctx, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, sb := range page.Items {
				got = append(got, sb.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
			total := len(tc.want)
			if tc.opts.Limit != nil {
				total = 2 // the count ignores the page
			}
			if n, err := e.sb.Count(ctx, tc.opts); err != nil || n != total {
				t.Errorf("count %d, %v; want %d", n, err, total)
			}
		})
	}
}

func TestRenew(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	forever := e.running(t) // ttl 0: never expires
	if forever.TTL != 0 || !forever.ExpiresAt.Equal(api.Never) {
		t.Fatalf("a sandbox without ttl: ttl %d, expires %s", forever.TTL, forever.ExpiresAt)
	}
	soon := time.Now().Add(90 * time.Second).Truncate(time.Microsecond)
	later := time.Now().Add(3 * time.Hour).Truncate(time.Microsecond)
	for _, tc := range []struct {
		name  string
		id    string
		at    time.Time
		class error
	}{
		{"give an expiry", forever.ID, later, nil},
		{"shorten it", forever.ID, soon, nil},
		{"the past", forever.ID, time.Now().Add(-time.Second), errdefs.ErrInvalidArgument},
		{"unknown sandbox", "nope", later, errdefs.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.sb.Renew(ctx, tc.id, tc.at)
			checkErr(t, err, tc.class, "")
			if err != nil {
				return
			}
			if !got.ExpiresAt.Equal(tc.at) || got.TTL < 1 || got.CreatedAt.Add(time.Duration(got.TTL)*time.Second).Before(tc.at) {
				t.Errorf("expires %s ttl %d, want %s", got.ExpiresAt, got.TTL, tc.at)
			}
			if after, _ := e.sb.Get(ctx, tc.id); !after.ExpiresAt.Equal(tc.at) {
				t.Errorf("kept expiry %s, want %s", after.ExpiresAt, tc.at)
			}
		})
	}
}
