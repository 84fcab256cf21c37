package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

const llmKeyColumns = `id, hash, name, sandbox, run, budget_tokens, requests_per_minute, tokens_per_minute, ` +
	`used_tokens, created_at, expires_at, revoked_at, tenant`

func scanLLMKey(row scanner) (*store.LLMKey, error) {
	var k store.LLMKey
	if err := row.Scan(&k.ID, &k.Hash, &k.Name, &k.Sandbox, &k.Run, &k.BudgetTokens, &k.RequestsPerMinute,
		&k.TokensPerMinute, &k.UsedTokens, &k.CreatedAt, &k.ExpiresAt, &k.RevokedAt, &k.Tenant); err != nil {
		return nil, err
	}
	k.CreatedAt, k.ExpiresAt, k.RevokedAt = k.CreatedAt.UTC(), k.ExpiresAt.UTC(), utcPtr(k.RevokedAt)
	return &k, nil
}

// CreateLLMKey stores a new key; an id or hash already stored is
// ErrAlreadyExists.
func (s *Store) CreateLLMKey(ctx context.Context, k *store.LLMKey) error {
	_, err := s.w.Exec(ctx, `INSERT INTO llm_keys (`+llmKeyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		k.ID, k.Hash, k.Name, k.Sandbox, k.Run, k.BudgetTokens, k.RequestsPerMinute, k.TokensPerMinute, k.UsedTokens,
		k.CreatedAt, k.ExpiresAt, k.RevokedAt, k.Tenant)
	switch {
	case isUnique(err):
		return fmt.Errorf("create llm key %s: %w", k.ID, errdefs.ErrAlreadyExists)
	case err != nil:
		return fmt.Errorf("create llm key %s: %w", k.ID, serverErr(err))
	}
	return nil
}

// LLMKeyByHash returns the key whose secret hashes to hash, ErrNotFound if
// none does.
func (s *Store) LLMKeyByHash(ctx context.Context, hash string) (*store.LLMKey, error) {
	if !validText(hash) {
		return nil, errdefs.NotFound("no such llm key")
	}
	k, err := scanLLMKey(s.r.QueryRow(ctx, `SELECT `+llmKeyColumns+` FROM llm_keys WHERE hash = $1`, hash))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, errdefs.NotFound("no such llm key")
	case err != nil:
		return nil, fmt.Errorf("get llm key: %w", err)
	}
	return k, nil
}

// ListLLMKeys returns every key, newest first.
func (s *Store) ListLLMKeys(ctx context.Context) ([]*store.LLMKey, error) {
	out, err := list(ctx, s.r, scanLLMKey, `SELECT `+llmKeyColumns+` FROM llm_keys ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list llm keys: %w", err)
	}
	return out, nil
}

// RevokeLLMKey marks key id revoked at at (once: a second revocation
// keeps the first time); an unknown id is ErrNotFound.
func (s *Store) RevokeLLMKey(ctx context.Context, id string, at time.Time) error {
	if !validText(id) {
		return fmt.Errorf("revoke llm key %q: %w", id, errdefs.NotFound("no llm key %q", id))
	}
	tag, err := s.w.Exec(ctx, `UPDATE llm_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2`, at, id)
	if err != nil {
		return fmt.Errorf("revoke llm key %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("revoke llm key %s: %w", id, errdefs.NotFound("no llm key %s", id))
	}
	return nil
}

// RevokeLLMKeysOfSandbox marks the keys naming sandbox that are not
// revoked yet revoked at at, and returns how many it marked.
func (s *Store) RevokeLLMKeysOfSandbox(ctx context.Context, sandbox string, at time.Time) (int64, error) {
	if !validText(sandbox) { // no key names it
		return 0, nil
	}
	tag, err := s.w.Exec(ctx, `UPDATE llm_keys SET revoked_at = $1 WHERE sandbox = $2 AND revoked_at IS NULL`, at, sandbox)
	if err != nil {
		return 0, fmt.Errorf("revoke the llm keys of sandbox %s: %w", sandbox, err)
	}
	return tag.RowsAffected(), nil
}

// AddLLMKeyUsage adds tokens to the used tokens of each key in used, in
// one transaction; each addition is one UPDATE, atomic against other
// daemons' additions, and the keys are taken in order, so that two
// daemons' flushes never lock each other's rows crosswise. Unknown ids are
// skipped.
func (s *Store) AddLLMKeyUsage(ctx context.Context, used map[string]int64) error {
	err := pgx.BeginFunc(ctx, s.w, func(tx pgx.Tx) error {
		for _, id := range slices.Sorted(maps.Keys(used)) {
			if _, err := tx.Exec(ctx, `UPDATE llm_keys SET used_tokens = used_tokens + $1 WHERE id = $2`, used[id], id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("add llm key usage: %w", err)
	}
	return nil
}
