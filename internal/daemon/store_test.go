package daemon

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/store/postgres/pgtest"
)

// postgresServer is the PostgreSQL server of the tests that run the
// daemon on a PostgreSQL store, started by the first of them.
var postgresServer pgtest.Shared

func TestMain(m *testing.M) { os.Exit(postgresServer.Run(m)) }

// A daemon on a PostgreSQL store keeps its records there, not in its data
// directory: another daemon, on another data directory and the same
// store, finds them.
func TestPostgresStore(t *testing.T) {
	ctx := context.Background()
	rt := fakeruntime.New()
	t.Cleanup(func() { rt.Close() })
	cfg := testConfig(t.TempDir(), rt)
	cfg.Store = postgresServer.URL(t)

	d := start(t, cfg, nil)
	d.importTiny()
	sb := d.create(api.CreateSandboxRequest{Image: tinyRef})
	if _, err := d.api.Template.Create(ctx, api.CreateTemplateRequest{Name: "tiny", Spec: api.TemplateSpec{Image: tinyRef}}); err != nil {
		t.Fatalf("create template: %v", err)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	cfg.DataDir = t.TempDir()
	d = start(t, cfg, nil)
	if got, err := d.api.Sandbox.Get(ctx, sb.ID); err != nil || got.Status != api.StatusRunning {
		t.Errorf("sandbox on the second daemon: %+v, %v; want it running", got, err)
	}
	if tpl, err := d.api.Template.Get(ctx, "tiny"); err != nil || tpl.Spec.Image != tinyRef {
		t.Errorf("template on the second daemon: %+v, %v", tpl, err)
	}
}

// A store the daemon cannot open stops it at start, saying which store
// and never showing a password.
func TestStoreErrors(t *testing.T) {
	for _, tt := range []struct {
		name, store, want string
	}{
		{"unknown kind", "mysql://a2e:s3cret@db/a2e", `store "mysql://a2e:xxxxx@db/a2e": want sqlite or a PostgreSQL URL`},
		{"no server", "postgres://a2e:s3cret@127.0.0.1:1/a2e", "postgres store postgres://a2e:xxxxx@127.0.0.1:1/a2e: connect:"},
		{"bad url", "postgres://a2e:s3cret@db:port/a2e", "postgres store: cannot parse"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rt := fakeruntime.New()
			t.Cleanup(func() { rt.Close() })
			cfg := testConfig(t.TempDir(), rt)
			cfg.Store, cfg.Listen = tt.store, "127.0.0.1:0"
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sys, err := New(ctx, cfg)
			if err == nil {
				sys.Close()
				t.Fatal("New succeeded")
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "s3cret") {
				t.Errorf("New: %q, want it to say %q and not the password", msg, tt.want)
			}
		})
	}
}
