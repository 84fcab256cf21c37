package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The keys of the store's advisory locks (pg_advisory_xact_lock, and the
// session-level pg_try_advisory_lock of Leadership and Daemons), one per
// thing serialized, all in the database's own key space: other databases
// on the server have their own. They are arbitrary numbers, far from the
// small ones hand-written SQL tends to use.
const (
	// lockMigrate: one migration step at a time (migrate).
	lockMigrate int64 = 0x61326501
	// lockSandboxCount: the bounded create's count and insert
	// (exclusive), against every other create (shared).
	lockSandboxCount int64 = 0x61326502
	// lockLLMEnded: the numbering of ended LLM exchanges
	// (PutLLMExchanges).
	lockLLMEnded int64 = 0x61326503
	// lockLeader: leadership among the daemons on the store, a
	// session-level lock whose key is this and the schema's hash, in
	// the two-key space (Leadership).
	lockLeader = 0x61326504
	// lockDaemons: the daemons on the store, each holding it while it
	// runs, shared, or exclusive for one whose runtime is its machine's; a
	// session-level lock keyed as lockLeader (Daemons).
	lockDaemons = 0x61326505
)

// lock takes the advisory lock key for the rest of tx, waiting for it.
func lock(ctx context.Context, tx pgx.Tx, key int64) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, key); err != nil {
		return fmt.Errorf("take advisory lock %#x: %w", key, err)
	}
	return nil
}

// lockShared takes the advisory lock key in shared mode for the rest of
// tx: holders of the shared mode go together, the exclusive one alone.
func lockShared(ctx context.Context, tx pgx.Tx, key int64) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, key); err != nil {
		return fmt.Errorf("take advisory lock %#x: %w", key, err)
	}
	return nil
}
