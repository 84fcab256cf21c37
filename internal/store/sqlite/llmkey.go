package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

const llmKeyColumns = `id, hash, name, sandbox, run, budget_tokens, requests_per_minute, tokens_per_minute, ` +
	`used_tokens, created_at, expires_at, revoked_at, tenant`

func scanLLMKey(row scanner) (*store.LLMKey, error) {
	var (
		k                store.LLMKey
		created, expires int64
		revoked          sql.NullInt64
	)
	if err := row.Scan(&k.ID, &k.Hash, &k.Name, &k.Sandbox, &k.Run, &k.BudgetTokens, &k.RequestsPerMinute,
		&k.TokensPerMinute, &k.UsedTokens, &created, &expires, &revoked, &k.Tenant); err != nil {
		return nil, err
	}
	k.CreatedAt, k.ExpiresAt = fromUnix(created), fromUnix(expires)
	if revoked.Valid {
		t := fromUnix(revoked.Int64)
		k.RevokedAt = &t
	}
	return &k, nil
}

// CreateLLMKey stores a new key; an id or hash already stored is
// ErrAlreadyExists.
func (s *Store) CreateLLMKey(ctx context.Context, k *store.LLMKey) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO llm_keys (`+llmKeyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.Hash, k.Name, k.Sandbox, k.Run, k.BudgetTokens, k.RequestsPerMinute, k.TokensPerMinute, k.UsedTokens,
		toUnix(k.CreatedAt), toUnix(k.ExpiresAt), toNullUnix(k.RevokedAt), k.Tenant)
	switch {
	case isUnique(err):
		return fmt.Errorf("create llm key %s: %w", k.ID, errdefs.ErrAlreadyExists)
	case err != nil:
		return fmt.Errorf("create llm key %s: %w", k.ID, noSpace(err))
	}
	return nil
}

// LLMKeyByHash returns the key whose secret hashes to hash, ErrNotFound if
// none does.
func (s *Store) LLMKeyByHash(ctx context.Context, hash string) (*store.LLMKey, error) {
	k, err := scanLLMKey(s.r.QueryRowContext(ctx, `SELECT `+llmKeyColumns+` FROM llm_keys WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("no such llm key")
	}
	if err != nil {
		return nil, fmt.Errorf("get llm key: %w", err)
	}
	return k, nil
}

// ListLLMKeys returns every key, newest first.
func (s *Store) ListLLMKeys(ctx context.Context) ([]*store.LLMKey, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+llmKeyColumns+` FROM llm_keys ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list llm keys: %w", err)
	}
	defer rows.Close()
	var out []*store.LLMKey
	for rows.Next() {
		k, err := scanLLMKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list llm keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list llm keys: %w", err)
	}
	return out, nil
}

// RevokeLLMKey marks key id revoked at at (once: a second revocation
// keeps the first time); an unknown id is ErrNotFound.
func (s *Store) RevokeLLMKey(ctx context.Context, id string, at time.Time) error {
	res, err := s.w.ExecContext(ctx, `UPDATE llm_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, toUnix(at), id)
	if err != nil {
		return fmt.Errorf("revoke llm key %s: %w", id, noSpace(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("revoke llm key %s: %w", id, errdefs.NotFound("no llm key %s", id))
	}
	return nil
}

// RevokeLLMKeysOfSandbox marks the keys naming sandbox that are not
// revoked yet revoked at at, and returns how many it marked. A sandbox
// without such keys (almost every one) costs a read, no write.
func (s *Store) RevokeLLMKeysOfSandbox(ctx context.Context, sandbox string, at time.Time) (int64, error) {
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM llm_keys WHERE sandbox = ? AND revoked_at IS NULL LIMIT 1`, sandbox).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("revoke the llm keys of sandbox %s: %w", sandbox, err)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE llm_keys SET revoked_at = ? WHERE sandbox = ? AND revoked_at IS NULL`, toUnix(at), sandbox)
	if err != nil {
		return 0, fmt.Errorf("revoke the llm keys of sandbox %s: %w", sandbox, noSpace(err))
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// AddLLMKeyUsage adds tokens to the used tokens of each key in used, in
// one transaction. Unknown ids are skipped.
func (s *Store) AddLLMKeyUsage(ctx context.Context, used map[string]int64) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add llm key usage: %w", err)
	}
	defer tx.Rollback()
	for id, n := range used {
		if _, err := tx.ExecContext(ctx, `UPDATE llm_keys SET used_tokens = used_tokens + ? WHERE id = ?`, n, id); err != nil {
			return fmt.Errorf("add llm key usage: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("add llm key usage: %w", err)
	}
	return nil
}
