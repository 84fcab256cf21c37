package gate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// KeyPrefix starts every per-run LLM key's secret; API keys start with
// "a2e_" and never with this.
const KeyPrefix = "a2e_llm_"

// Key lifetimes.
const (
	DefaultKeyTTL = time.Hour
	MaxKeyTTL     = 30 * 24 * time.Hour
)

// KeyStore keeps the keys; the store backends (*sqlite.Store,
// *postgres.Store) implement it.
type KeyStore interface {
	CreateLLMKey(ctx context.Context, k *store.LLMKey) error
	LLMKeyByHash(ctx context.Context, hash string) (*store.LLMKey, error)
	ListLLMKeys(ctx context.Context) ([]*store.LLMKey, error)
	RevokeLLMKey(ctx context.Context, id string, at time.Time) error
	// RevokeLLMKeysOfSandbox revokes the valid keys naming sandbox and
	// returns how many it revoked.
	RevokeLLMKeysOfSandbox(ctx context.Context, sandbox string, at time.Time) (int64, error)
	AddLLMKeyUsage(ctx context.Context, used map[string]int64) error
}

// Runs finds a task run as the caller of ctx may see it (auth.TenantOf):
// ErrNotFound for a run that does not exist or is another tenant's.
// *run.Service implements it.
type Runs interface {
	Get(ctx context.Context, id string) (*api.Run, error)
}

// Sandboxes finds a sandbox: ErrNotFound for one that does not exist.
// *manager.Manager implements it.
type Sandboxes interface {
	Get(ctx context.Context, id string) (*store.Sandbox, error)
}

// KeysOption configures Keys.
type KeysOption func(*Keys)

// WithRuns makes Create refuse a key naming a run that runs does not show
// its maker. Without it the run a key names is not checked.
func WithRuns(runs Runs) KeysOption { return func(k *Keys) { k.runs = runs } }

// WithSandboxes makes Create refuse a key naming a sandbox that does not
// exist, and Authenticate refuse one whose sandbox is gone. The keys of a
// sandbox being deleted are revoked by SandboxGone. Without it the
// sandbox a key names is not checked.
func WithSandboxes(sbs Sandboxes) KeysOption { return func(k *Keys) { k.sandboxes = sbs } }

// WithSharedStore says other daemons use the store's keys too: Sync
// then reads back the keys this one has used, so that their usage counts
// against their budgets here and a key another daemon revoked is refused.
func WithSharedStore() KeysOption { return func(k *Keys) { k.shared = true } }

// Keys are the per-run LLM keys: made, listed and revoked through the API,
// checked on every call with one (from memory after the first), their
// usage counted in memory and written to the store by Flush (and read
// back by Sync, on a store other daemons share). It is safe
// for concurrent use.
type Keys struct {
	st   KeyStore
	runs Runs // nil: a key's run is not checked
	// sandboxes, nil: a key's sandbox is not checked.
	sandboxes Sandboxes
	now       func() time.Time
	// shared: other daemons use the keys too (WithSharedStore).
	shared bool

	mu      sync.Mutex
	byHash  map[string]*store.LLMKey // keys seen, as loaded; UsedTokens kept current
	byID    map[string]*store.LLMKey // the same, by id
	pending map[string]int64         // tokens used since the last Flush, by id
	// flushing holds the tokens a Flush is writing, until it has.
	flushing map[string]int64
	// revocations counts the revocations made here, so that a record
	// read before one is not cached after it (Authenticate).
	revocations uint64
}

// NewKeys returns the keys kept in st.
func NewKeys(st KeyStore, opts ...KeysOption) *Keys {
	k := &Keys{st: st, now: time.Now, byHash: map[string]*store.LLMKey{}, byID: map[string]*store.LLMKey{}, pending: map[string]int64{}}
	for _, o := range opts {
		o(k)
	}
	return k
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// Create makes a key and returns it with its secret, the only time the
// secret is seen. The run it names must be one its maker sees (WithRuns):
// a key for another tenant's run would spend that run's budget and add to
// its tokens; such a run is ErrNotFound, as one that does not exist.
func (k *Keys) Create(ctx context.Context, req api.LLMKeyRequest) (*api.LLMKey, error) {
	switch {
	case req.BudgetTokens < 0, req.RequestsPerMinute < 0, req.TokensPerMinute < 0:
		return nil, errdefs.Invalid("budget_tokens, requests_per_minute and tokens_per_minute must not be negative")
	case req.ExpiresIn < 0 || req.ExpiresIn > int(MaxKeyTTL/time.Second): // in seconds: nanoseconds overflow
		return nil, errdefs.Invalid("expires_in must be between 1 and %d seconds", int(MaxKeyTTL.Seconds()))
	case len(req.Name) > 256 || len(req.Sandbox) > 256 || len(req.Run) > 256:
		return nil, errdefs.Invalid("name, sandbox and run are at most 256 bytes")
	}
	if req.Run != "" && k.runs != nil {
		// The error goes out as the API's message, to which a client adds
		// what it asked ("create llm key: ...").
		if _, err := k.runs.Get(ctx, req.Run); err != nil {
			return nil, err
		}
	}
	if err := k.sandboxExists(ctx, req.Sandbox); err != nil {
		return nil, err
	}
	ttl := DefaultKeyTTL
	if req.ExpiresIn > 0 {
		ttl = time.Duration(req.ExpiresIn) * time.Second
	}
	now := k.now().UTC().Truncate(time.Microsecond)
	secret := KeyPrefix + randomHex(32)
	rec := &store.LLMKey{
		ID: "llmk_" + randomHex(8), Hash: hashSecret(secret), Name: req.Name, Sandbox: req.Sandbox, Run: req.Run,
		BudgetTokens: req.BudgetTokens, RequestsPerMinute: req.RequestsPerMinute, TokensPerMinute: req.TokensPerMinute,
		CreatedAt: now, ExpiresAt: now.Add(ttl), Tenant: auth.TenantOf(ctx),
	}
	if err := k.st.CreateLLMKey(ctx, rec); err != nil {
		return nil, err
	}
	// A sandbox deleted since it was checked had its keys revoked
	// before this one was stored: this one is revoked, and refused.
	if err := k.sandboxExists(ctx, req.Sandbox); err != nil {
		return nil, errors.Join(err, k.st.RevokeLLMKey(context.WithoutCancel(ctx), rec.ID, k.now()))
	}
	out := wireKey(rec)
	out.Key = secret
	return &out, nil
}

func wireKey(r *store.LLMKey) api.LLMKey {
	return api.LLMKey{ID: r.ID, Name: r.Name, Sandbox: r.Sandbox, Run: r.Run, BudgetTokens: r.BudgetTokens,
		RequestsPerMinute: r.RequestsPerMinute, TokensPerMinute: r.TokensPerMinute, UsedTokens: r.UsedTokens,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt}
}

// List returns the keys of the tenant of ctx (auth.TenantOf; every key
// without one), newest first, without secrets, with the tokens used so far
// (flushed or not).
func (k *Keys) List(ctx context.Context) (*api.LLMKeyList, error) {
	recs, err := k.st.ListLLMKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := &api.LLMKeyList{Items: make([]api.LLMKey, 0, len(recs))}
	tenant := auth.TenantOf(ctx)
	k.mu.Lock()
	for _, r := range recs {
		if tenant != "" && r.Tenant != tenant {
			continue
		}
		r.UsedTokens += k.pending[r.ID]
		out.Items = append(out.Items, wireKey(r))
	}
	k.mu.Unlock()
	return out, nil
}

// Revoke revokes key id: from now on it is refused. Another tenant's key
// is ErrNotFound, as one that does not exist.
func (k *Keys) Revoke(ctx context.Context, id string) error {
	if tenant := auth.TenantOf(ctx); tenant != "" {
		mine, err := k.owns(ctx, tenant, id)
		if err != nil {
			return err
		}
		if !mine {
			return fmt.Errorf("revoke llm key %s: %w", id, errdefs.NotFound("no llm key %s", id))
		}
	}
	if err := k.st.RevokeLLMKey(ctx, id, k.now()); err != nil {
		return err
	}
	k.forget(func(r *store.LLMKey) bool { return r.ID == id })
	return nil
}

// SandboxGone revokes the keys of sandbox id, which is deleted: a key's
// calls are its sandbox's, and a sandbox that is no more makes none (nor
// does a later one with its id). The manager calls it for every sandbox it
// deletes (manager.WithRemoved).
func (k *Keys) SandboxGone(ctx context.Context, id string) error {
	n, err := k.st.RevokeLLMKeysOfSandbox(ctx, id, k.now())
	if err != nil {
		return err
	}
	if n > 0 {
		k.forget(func(r *store.LLMKey) bool { return r.Sandbox == id })
	}
	return nil
}

// forget drops the loaded keys gone says are revoked, and counts a
// revocation: a record Authenticate read before it is not cached.
func (k *Keys) forget(gone func(*store.LLMKey) bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.revocations++
	for id, r := range k.byID {
		if gone(r) {
			delete(k.byHash, r.Hash)
			delete(k.byID, id)
		}
	}
}

// sandboxExists checks that sandbox id, when a key names one, exists
// (WithSandboxes): its error is the sandboxes' ErrNotFound, which goes
// out as the API's message.
func (k *Keys) sandboxExists(ctx context.Context, id string) error {
	if id == "" || k.sandboxes == nil {
		return nil
	}
	_, err := k.sandboxes.Get(ctx, id)
	return err
}

// owns says whether key id is tenant's. (Keys are few, and revoked
// rarely: the list serves.)
func (k *Keys) owns(ctx context.Context, tenant, id string) (bool, error) {
	recs, err := k.st.ListLLMKeys(ctx)
	if err != nil {
		return false, err
	}
	for _, r := range recs {
		if r.ID == id {
			return r.Tenant == tenant, nil
		}
	}
	return false, nil
}

// errBadKey is the answer to a key that is not (or no longer) valid; it
// does not say which, so that keys cannot be probed.
var errBadKey = fmt.Errorf("invalid, expired or revoked LLM key: %w", errdefs.ErrUnauthenticated)

// Authenticate returns the key whose secret is secret, if it is valid
// now. The record is shared: read it, do not change it.
func (k *Keys) Authenticate(ctx context.Context, secret string) (*store.LLMKey, error) {
	if !strings.HasPrefix(secret, KeyPrefix) {
		return nil, errBadKey
	}
	h := hashSecret(secret)
	k.mu.Lock()
	rec := k.byHash[h]
	k.mu.Unlock()
	if rec == nil {
		var err error
		if rec, err = k.load(ctx, h); err != nil {
			return nil, err
		}
	}
	if rec.RevokedAt != nil || !k.now().Before(rec.ExpiresAt) {
		return nil, errBadKey
	}
	return rec, nil
}

// load reads the key whose secret hashes to h from the store and caches
// it. A record read while a revocation was made here is read again: it
// may be the one revoked, as it was before. A valid key whose sandbox is
// gone (deleted while no daemon could revoke its keys) is revoked now.
func (k *Keys) load(ctx context.Context, h string) (*store.LLMKey, error) {
	for {
		k.mu.Lock()
		before := k.revocations
		k.mu.Unlock()
		rec, err := k.st.LLMKeyByHash(ctx, h)
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, errBadKey
		} else if err != nil {
			return nil, fmt.Errorf("check llm key: %w", err)
		}
		if rec.RevokedAt == nil && k.now().Before(rec.ExpiresAt) {
			if err := k.sandboxExists(ctx, rec.Sandbox); errors.Is(err, errdefs.ErrNotFound) {
				if err := k.SandboxGone(ctx, rec.Sandbox); err != nil {
					return nil, fmt.Errorf("revoke the llm keys of deleted sandbox %s: %w", rec.Sandbox, err)
				}
				return nil, errBadKey
			} else if err != nil {
				return nil, fmt.Errorf("check llm key: %w", err)
			}
		}
		k.mu.Lock()
		if k.revocations != before {
			k.mu.Unlock()
			continue
		}
		if cached := k.byHash[h]; cached != nil {
			rec = cached
		} else {
			rec.UsedTokens += k.pending[rec.ID]
			k.byHash[h], k.byID[rec.ID] = rec, rec
		}
		k.mu.Unlock()
		return rec, nil
	}
}

// used is the tokens key id has used, flushed or not.
func (k *Keys) used(id string) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if r := k.byID[id]; r != nil {
		return r.UsedTokens
	}
	return k.pending[id]
}

// charge adds tokens to key id's usage.
func (k *Keys) charge(id string, tokens int64) {
	if tokens <= 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pending[id] += tokens
	if r := k.byID[id]; r != nil {
		r.UsedTokens += tokens
	}
}

// Flush writes the usage counted since the last Flush to the store; what
// it could not write is kept for the next.
func (k *Keys) Flush(ctx context.Context) error {
	k.mu.Lock()
	pending := k.pending
	k.pending, k.flushing = map[string]int64{}, pending
	k.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	err := k.st.AddLLMKeyUsage(ctx, pending)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.flushing = nil
	if err != nil {
		for id, n := range pending {
			k.pending[id] += n
		}
	}
	return err
}

// Sync flushes, then, on a shared store (WithSharedStore), reads back
// the valid keys this daemon has used: each one's usage becomes the
// stored one (every daemon's, as flushed) and what this daemon has not
// written yet; a key revoked or expired meanwhile is forgotten, and
// refused from then on.
func (k *Keys) Sync(ctx context.Context) error {
	ferr := k.Flush(ctx)
	if !k.shared {
		return ferr
	}
	k.mu.Lock()
	seen := make([]*store.LLMKey, 0, len(k.byID))
	for _, r := range k.byID {
		seen = append(seen, r)
	}
	k.mu.Unlock()
	for _, r := range seen {
		stored, err := k.st.LLMKeyByHash(ctx, r.Hash)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return errors.Join(ferr, fmt.Errorf("read back llm key %s: %w", r.ID, err))
		}
		k.mu.Lock()
		if k.byID[r.ID] == r { // not revoked here meanwhile
			if err != nil || stored.RevokedAt != nil || !k.now().Before(stored.ExpiresAt) {
				delete(k.byHash, r.Hash)
				delete(k.byID, r.ID)
			} else {
				fresh := *r // readers hold r: a copy takes its place
				fresh.RevokedAt = stored.RevokedAt
				fresh.UsedTokens = stored.UsedTokens + k.flushing[r.ID] + k.pending[r.ID]
				k.byHash[r.Hash], k.byID[r.ID] = &fresh, &fresh
			}
		}
		k.mu.Unlock()
	}
	return ferr
}

// record is the loaded record of key id, nil if it was not loaded.
func (k *Keys) record(id string) *store.LLMKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.byID[id]
}
