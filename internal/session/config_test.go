package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/sandbox"
)

func TestParseVolumes(t *testing.T) {
	tests := []struct {
		in   string
		want []Volume
		bad  bool
	}{
		{in: `["/srv/a:/data", "/srv/b:/shared"]`, want: []Volume{{Host: "/srv/a", Guest: "/data"}, {Host: "/srv/b", Guest: "/shared"}}},
		{in: "/srv/a:/data, /srv/b:/b:common+ro", want: []Volume{{Host: "/srv/a", Guest: "/data"}, {Host: "/srv/b", Guest: "/b", Common: true, ReadOnly: true}}},
		{in: "/srv/a:/data:session+rw", want: []Volume{{Host: "/srv/a", Guest: "/data"}}},
		{in: "", want: nil},
		{in: "/srv/a", bad: true},
		{in: "srv/a:/data", bad: true},
		{in: "/srv/a:data", bad: true},
		{in: "/srv/../etc:/data", bad: true},
		{in: "/srv/a:/data/../etc", bad: true},
		{in: "/:/data", bad: true},
		{in: "/srv/a:/data:shared", bad: true},
		{in: "/srv/a:/b:c:d", bad: true},
		{in: `["/srv/a:/data"`, bad: true},
		{in: `[1]`, bad: true},
	}
	for _, tt := range tests {
		got, err := ParseVolumes(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("ParseVolumes(%q) = %+v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || !cmp.Equal(tt.want, got) {
			t.Errorf("ParseVolumes(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestApplyEnv(t *testing.T) {
	env := map[string]string{EnvDefaultFlavor: "medium", EnvSessionTimeout: "600", EnvSharedVolumes: "/srv:/data"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var c Config
	if err := ApplyEnv(&c, lookup); err != nil {
		t.Fatal(err)
	}
	if c.DefaultFlavor != "medium" || c.IdleTimeout != 10*time.Minute || !cmp.Equal(c.Volumes, []Volume{{Host: "/srv", Guest: "/data"}}) {
		t.Errorf("config from env: %+v", c)
	}
	// Set fields (flags) win over the environment.
	c = Config{DefaultFlavor: "large", IdleTimeout: time.Hour}
	if err := ApplyEnv(&c, lookup); err != nil || c.DefaultFlavor != "large" || c.IdleTimeout != time.Hour {
		t.Errorf("config with fields set: %+v %v", c, err)
	}
	for _, bad := range []map[string]string{{EnvSessionTimeout: "soon"}, {EnvSessionTimeout: "-5"}, {EnvSharedVolumes: "relative:/x"}} {
		env = bad
		if err := ApplyEnv(&Config{}, lookup); err == nil {
			t.Errorf("ApplyEnv(%v) took it", bad)
		}
	}
	for in, want := range map[string]time.Duration{"1800": 30 * time.Minute, "2.5": 2500 * time.Millisecond, "45m": 45 * time.Minute} {
		if got, err := ParseTimeout(in); err != nil || got != want {
			t.Errorf("ParseTimeout(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestSubdirName(t *testing.T) {
	tests := []struct{ key, want string }{
		{"/my-session", "my-session"},
		{"abc123/s1", "abc123-s1"},
		{"/ses-0123.x_y", "ses-0123.x_y"},
	}
	for _, tt := range tests {
		if got := SubdirName(tt.key); got != tt.want {
			t.Errorf("SubdirName(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
	seen := map[string]string{}
	for _, key := range []string{"/..", "/.", "/a b", "/a_b", "/a\\b", "/.hidden", "t/..", "/" + strings.Repeat("x", 128), "/é"} {
		got := SubdirName(key)
		if got == "" || got == "." || got == ".." || strings.ContainsAny(got, "/\\ ") || strings.HasPrefix(got, ".") || len(got) > 200 {
			t.Errorf("SubdirName(%q) = %q", key, got)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("keys %q and %q share directory %q", key, other, got)
		}
		seen[got] = key
	}
}

// TestSharedVolumes: each session's sandbox mounts its own subdirectory of
// a volume (made for it, owned by the sandbox user), a common volume
// whole; a symlink where a session's directory goes is refused and
// nothing is made.
func TestSharedVolumes(t *testing.T) {
	runtimetest.RequiresRoot(t) // the directories go to the sandbox user
	perSession, common := t.TempDir(), t.TempDir()
	var specs []*sandbox.Spec
	e := newEnv(t, func(su *setup) {
		su.cfg.Volumes = []Volume{{Host: perSession, Guest: "/data"}, {Host: common, Guest: "/common", Common: true, ReadOnly: true}}
	})
	e.Rt.SetHooks(fakeruntime.Hooks{Create: func(ctx context.Context, spec *sandbox.Spec) error {
		specs = append(specs, spec)
		return nil
	}})
	e.execute(t, as("tenant"), api.SessionExecuteRequest{Code: "1", SessionID: "s1"})
	dir := filepath.Join(perSession, "tenant-s1")
	want := []sandbox.Mount{{Source: dir, Destination: "/data"}, {Source: common, Destination: "/common", ReadOnly: true}}
	if len(specs) != 1 || !cmp.Equal(want, specs[0].Mounts) {
		t.Fatalf("mounts %+v, want %+v", specs, want)
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Sys() == nil {
		t.Fatalf("session directory: %v", err)
	}
	if uid, gid := owner(fi); uid != sandbox.UserID || gid != sandbox.GroupID {
		t.Errorf("session directory owned by %d:%d", uid, gid)
	}
	// A symlink planted where a session's directory goes leads out of the
	// volume: refused, nothing made.
	if err := os.Symlink("/etc", filepath.Join(perSession, "evil")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.svc.ExecuteCode(bg, api.SessionExecuteRequest{Code: "1", SessionID: "evil"}, nil); err == nil {
		t.Error("a session mounted a symlinked directory")
	}
	if len(specs) != 1 || len(e.sessions(t)) != 1 {
		t.Errorf("made after the refusal: %d sandboxes, sessions %v", len(specs), e.sessions(t))
	}
	// An id that looks like a path's parts gets a directory inside it.
	e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "..."})
	if got := specs[len(specs)-1].Mounts[0].Source; filepath.Dir(got) != perSession || got == perSession {
		t.Errorf("session \"...\" mounts %s", got)
	}
}

func owner(fi os.FileInfo) (uid, gid int) {
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}
