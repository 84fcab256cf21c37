package service

import (
	"context"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// A daemon service's sandbox is made with what clients cannot ask, waited
// for, checked and pinged; its files are walked with their types.
func TestManaged(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	sb, err := e.sb.CreateManaged(ctx, ManagedRequest{CreateSandboxRequest: api.CreateSandboxRequest{Image: "alpine"},
		Disk: "1Gi", ManagedBy: "runs"})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := e.st.GetSandbox(ctx, sb.ID); err != nil || rec.ManagedBy != "runs" {
		t.Errorf("record = %+v, %v; want managed by runs", rec, err)
	}
	for _, step := range []struct {
		name string
		do   func() (*api.Sandbox, error)
	}{
		{"wait running", func() (*api.Sandbox, error) { return e.sb.WaitRunning(ctx, sb.ID) }},
		{"check dead", func() (*api.Sandbox, error) { return e.sb.CheckDead(ctx, sb.ID) }},
	} {
		if got, err := step.do(); err != nil || got.Status != api.StatusRunning {
			t.Errorf("%s = %+v, %v; want running", step.name, got, err)
		}
	}
	if err := e.sb.Ping(ctx, sb.ID); err != nil {
		t.Errorf("ping: %v", err)
	}
	_, err = e.sb.WaitRunning(ctx, "nosuch")
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
	if _, ok := e.sb.CPUTime(ctx, sb.ID); ok {
		t.Error("CPUTime known without a usage reader")
	}

	if err := e.sb.Mkdir(ctx, sb.ID, "/workspace/a/b"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sb.Upload(ctx, sb.ID, "/workspace/a/f.txt", 0o644, strings.NewReader("f")); err != nil {
		t.Fatal(err)
	}
	entries, err := e.sb.ReadDir(ctx, sb.ID, "/workspace/a")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, fi := range entries {
		got[fi.Name] = fi.Regular
	}
	if len(got) != 2 || got["b"] || !got["f.txt"] {
		t.Errorf("entries = %+v; want directory b and regular f.txt", entries)
	}
	if fi, err := e.sb.Stat(ctx, sb.ID, "/workspace/a/f.txt"); err != nil || !fi.Regular || fi.Size != 1 {
		t.Errorf("stat = %+v, %v", fi, err)
	}
	_, err = e.sb.Stat(ctx, sb.ID, "/workspace/nosuch")
	checkErr(t, err, errdefs.ErrNotFound, api.CodeFileNotFound)
	_, err = e.sb.ReadDir(ctx, sb.ID, "/workspace/nosuch")
	checkErr(t, err, errdefs.ErrNotFound, api.CodeFileNotFound)
}
