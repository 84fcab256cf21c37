package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// twoStores opens two stores on one database, as two daemons would.
func twoStores(t *testing.T) [2]*Store {
	dbURL := server.URL(t)
	return [2]*Store{open(t, dbURL), open(t, dbURL)}
}

func sandbox(id string) *store.Sandbox {
	now := time.Now()
	return &store.Sandbox{ID: id, Image: "i", CPU: "1", Memory: "1Gi", Status: "pending", Runtime: "kubernetes",
		CreatedAt: now, UpdatedAt: now}
}

// The bounded create holds across stores: of 30 creates through two
// stores with a limit of 5, 5 are stored.
func TestSharedCreateLimited(t *testing.T) {
	ctx := context.Background()
	ss := twoStores(t)
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			err := ss[i%2].CreateSandboxLimited(ctx, sandbox(fmt.Sprintf("x%d", i)), 5)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, errdefs.ErrResourceExhausted):
				refused.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n, err := ss[0].CountSandboxes(ctx, store.SandboxFilter{}); ok.Load() != 5 || refused.Load() != 25 || n != 5 || err != nil {
		t.Errorf("created %d, refused %d, stored %d (%v); want 5, 25, 5", ok.Load(), refused.Load(), n, err)
	}
}

// Updates through two stores to one record take turns: none is lost.
func TestSharedUpdates(t *testing.T) {
	ctx := context.Background()
	ss := twoStores(t)
	if err := ss[0].CreateSandbox(ctx, sandbox("c")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			if _, err := ss[i%2].UpdateSandbox(ctx, "c", func(sb *store.Sandbox) error { sb.TTL++; return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, err := ss[1].GetSandbox(ctx, "c"); err != nil || got.TTL != 40 {
		t.Errorf("ttl after 40 increments through two stores: %+v, %v", got, err)
	}
}

// Exchanges indexed through two stores at once get distinct Ended
// numbers, 1 to n.
func TestSharedLLMEnded(t *testing.T) {
	ctx := context.Background()
	ss := twoStores(t)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			x := &store.LLMExchange{ID: fmt.Sprintf("x%02d", i), State: store.LLMComplete, CreatedAt: time.Now(), Segment: 1}
			if err := ss[i%2].PutLLMExchanges(ctx, []*store.LLMExchange{x}, "m"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	xs, err := ss[0].ListEndedLLMExchanges(ctx, store.LLMExchangeFilter{}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ended []int64
	for _, x := range xs {
		ended = append(ended, x.Ended)
	}
	want := make([]int64, 20)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if diff := cmp.Diff(want, ended); diff != "" {
		t.Errorf("ended numbers (-want +got):\n%s", diff)
	}
}

// Two daemons making the same session: one succeeds, the other is told
// it exists.
func TestSharedSessionOnce(t *testing.T) {
	ctx := context.Background()
	ss := twoStores(t)
	if err := ss[0].CreateSandbox(ctx, sandbox("sb")); err != nil {
		t.Fatal(err)
	}
	var created, conflicts atomic.Int32
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			now := time.Now()
			err := ss[i].CreateSession(ctx, &store.Session{Key: "/s", ID: "s", SandboxID: "sb", CreatedAt: now, LastUsedAt: now, ExpiresAt: now})
			switch {
			case err == nil:
				created.Add(1)
			case errors.Is(err, errdefs.ErrAlreadyExists):
				conflicts.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if created.Load() != 1 || conflicts.Load() != 1 {
		t.Errorf("same session through two stores: %d created, %d conflicts; want 1 and 1", created.Load(), conflicts.Load())
	}
}

// The LLM proxy's per-run keys (gate.KeyStore), which storetest does not
// cover.
func TestLLMKeys(t *testing.T) {
	ctx := context.Background()
	s := open(t, server.URL(t))
	at := time.Now().UTC().Truncate(time.Microsecond)
	k1 := &store.LLMKey{ID: "k1", Hash: "h1", Name: "one", Sandbox: "sb", Run: "r", BudgetTokens: 1000,
		RequestsPerMinute: 5, TokensPerMinute: 50, CreatedAt: at, ExpiresAt: at.Add(time.Hour), Tenant: "t"}
	k2 := &store.LLMKey{ID: "k2", Hash: "h2", CreatedAt: at.Add(time.Second), ExpiresAt: at.Add(time.Hour)}
	for _, k := range []*store.LLMKey{k1, k2} {
		if err := s.CreateLLMKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	for _, dup := range []*store.LLMKey{{ID: "k1", Hash: "other"}, {ID: "k3", Hash: "h1"}} {
		if err := s.CreateLLMKey(ctx, dup); !errors.Is(err, errdefs.ErrAlreadyExists) {
			t.Errorf("create %s with hash %s: %v, want already exists", dup.ID, dup.Hash, err)
		}
	}
	if got, err := s.LLMKeyByHash(ctx, "h1"); err != nil || !cmp.Equal(k1, got) {
		t.Errorf("key by hash (-want +got):\n%s%v", cmp.Diff(k1, got), err)
	}
	if _, err := s.LLMKeyByHash(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("unknown hash: %v, want not found", err)
	}
	if err := s.AddLLMKeyUsage(ctx, map[string]int64{"k1": 10, "k2": 3, "gone": 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddLLMKeyUsage(ctx, map[string]int64{"k1": 5}); err != nil {
		t.Fatal(err)
	}
	revoked := at.Add(time.Minute)
	for _, when := range []time.Time{revoked, revoked.Add(time.Hour)} { // the first revocation stays
		if err := s.RevokeLLMKey(ctx, "k2", when); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RevokeLLMKey(ctx, "nope", revoked); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("revoke unknown: %v, want not found", err)
	}
	keys, err := s.ListLLMKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var summary []string
	for _, k := range keys {
		summary = append(summary, fmt.Sprintf("%s used %d revoked %v", k.ID, k.UsedTokens, k.RevokedAt != nil && k.RevokedAt.Equal(revoked)))
	}
	if diff := cmp.Diff([]string{"k2 used 3 revoked true", "k1 used 15 revoked false"}, summary); diff != "" {
		t.Errorf("keys, newest first (-want +got):\n%s", diff)
	}
	// A sandbox's keys, once: k1 (k2 names none).
	for _, sb := range []struct {
		id   string
		want int64
	}{{"sb", 1}, {"sb", 0}, {"other", 0}, {"bad\x00", 0}} {
		if n, err := s.RevokeLLMKeysOfSandbox(ctx, sb.id, revoked); n != sb.want || err != nil {
			t.Errorf("revoke the keys of sandbox %q: %d, %v; want %d", sb.id, n, err, sb.want)
		}
	}
	if got, err := s.LLMKeyByHash(ctx, "h1"); err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(revoked) {
		t.Errorf("key of the sandbox: %+v, %v; want revoked at %v", got, err, revoked)
	}
}

// A URL that does not parse, or a server that is not there, fails Open
// with an error that names the store and never shows the password.
func TestOpenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tt := range []struct {
		name, url, want string
	}{
		{"bad url", "postgres://user:s3cret@host:notaport/db", "postgres store"},
		{"no server", "postgres://user:s3cret@127.0.0.1:1/db?connect_timeout=5", "postgres store postgres://user:xxxxx@127.0.0.1:1/db?connect_timeout=5: connect:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(ctx, tt.url)
			if err == nil {
				s.Close()
				t.Fatal("open succeeded")
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "s3cret") {
				t.Errorf("error %q: want it to contain %q and not the password", msg, tt.want)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h/db?sslmode=disable": "postgres://u:xxxxx@h/db?sslmode=disable",
		"postgres://u@h/db":                    "postgres://u@h/db",
		"host=h user=u password=pw dbname=db":  "host=h user=u password=xxxxx dbname=db",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// Strings PostgreSQL's text cannot hold (a NUL byte, bytes that are not
// UTF-8): as keys they name no record, in a record they are an invalid
// argument, never a server error.
func TestOddText(t *testing.T) {
	ctx := context.Background()
	s := open(t, server.URL(t))
	if err := s.CreateSandbox(ctx, sandbox("sb")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a\x00b", "\xff\xfe"} {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			lookups := map[string]error{}
			_, lookups["get sandbox"] = s.GetSandbox(ctx, key)
			_, lookups["update sandbox"] = s.UpdateSandbox(ctx, key, func(*store.Sandbox) error { return nil })
			lookups["delete sandbox"] = s.DeleteSandbox(ctx, key)
			_, lookups["get session"] = s.GetSession(ctx, key)
			_, lookups["get template"] = s.GetTemplate(ctx, key)
			_, lookups["template versions"] = s.ListTemplateVersions(ctx, key)
			_, lookups["llm key"] = s.LLMKeyByHash(ctx, key)
			for op, err := range lookups {
				if !errors.Is(err, errdefs.ErrNotFound) {
					t.Errorf("%s: %v, want not found", op, err)
				}
			}
			if evs, _, err := s.Events(ctx, key); err != nil || len(evs) != 0 {
				t.Errorf("events: %v, %v; want none", evs, err)
			}
			writes := map[string]error{}
			bad := sandbox("bad")
			bad.Reason = key
			writes["create"] = s.CreateSandbox(ctx, bad)
			_, writes["update"] = s.UpdateSandbox(ctx, "sb", func(sb *store.Sandbox) error { sb.Reason = key; return nil })
			_, _, writes["list"] = s.ListSandboxPage(ctx, store.SandboxFilter{Owner: key}, store.Page{})
			for op, err := range writes {
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Errorf("%s: %v, want invalid argument", op, err)
				}
			}
		})
	}
	md := sandbox("md")
	md.Metadata = map[string]string{"k": "a\x00b"} // \u0000 in jsonb
	if err := s.CreateSandbox(ctx, md); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("metadata with a NUL: %v, want invalid argument", err)
	}
}

// Reads inside an update's fn are answered while every write connection
// is held by updates waiting on those reads: the readers are a pool of
// their own, as the sqlite store's are. (With one pool the reads below
// waited for connections that the updates around them held: a deadlock.)
func TestReadsDuringWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const conns = 2
	s := open(t, server.URL(t)+fmt.Sprintf("&pool_max_conns=%d", conns))
	for i := range conns {
		if err := s.CreateSandbox(ctx, sandbox(fmt.Sprintf("sb%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var inside, wg sync.WaitGroup
	inside.Add(conns)
	for i := range conns {
		wg.Go(func() {
			_, err := s.UpdateSandbox(ctx, fmt.Sprintf("sb%d", i), func(sb *store.Sandbox) error {
				inside.Done()
				inside.Wait() // every write connection is held now
				_, err := s.GetSandbox(ctx, "sb0")
				sb.Reason = "read during a write"
				return err
			})
			if err != nil {
				t.Errorf("update sb%d: %v", i, err)
			}
		})
	}
	wg.Wait()
}

// The readers cannot write, whatever a bug might ask of them.
func TestReadersAreReadOnly(t *testing.T) {
	s := open(t, server.URL(t))
	if _, err := s.r.Exec(context.Background(), `DELETE FROM sandboxes`); err == nil {
		t.Error("a reader connection wrote to the database")
	}
}
