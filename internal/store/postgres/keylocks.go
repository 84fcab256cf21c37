package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agent2env/agent2env/internal/keyedlock"
)

// keyLockConns bounds the connections a daemon holds for its key locks:
// one per key locked or waited for (keyedlock.Shared waits in the daemon
// first, so a key takes one at most), beyond which a lock waits for one.
const keyLockConns = 16

// keyUnlockTimeout bounds the release of a key lock; past it the
// connection is closed, which releases it on the server.
const keyUnlockTimeout = 5 * time.Second

// KeyLocks returns the locks, among the daemons on this store, of the
// keys of space (a session, a session's kernel of one language): each a
// session-level advisory lock on a pooled connection, held while the key
// is locked. Its number is a 64-bit hash of the schema, space and key, in
// the one-key space of the store's other advisory locks (locks.go); two
// keys of one hash share their lock, which serializes them needlessly,
// never wrongly. A daemon that dies releases its keys with its
// connections.
func (s *Store) KeyLocks(space string) keyedlock.Remote { return keyLocks{s, space} }

type keyLocks struct {
	s     *Store
	space string
}

// hash is key's advisory lock number.
func (l keyLocks) hash(key string) int64 {
	h := fnv.New64a()
	for _, p := range []string{l.s.schema, l.space, key} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return int64(h.Sum64())
}

// LockKey takes a connection and waits on it for key's lock.
func (l keyLocks) LockKey(ctx context.Context, key string) (func(), error) {
	n := l.hash(key)
	conn, err := l.s.k.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock %s %q: %w", l.space, key, err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, n); err != nil {
		// The lock may have been granted as the wait was cancelled:
		// the connection's end releases it whatever happened.
		drop(conn)
		return nil, fmt.Errorf("lock %s %q: %w", l.space, key, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), keyUnlockTimeout)
		defer cancel()
		var released bool
		if err := conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, n).Scan(&released); err != nil || !released {
			drop(conn)
			return
		}
		conn.Release()
	}, nil
}

// drop closes conn and gives it back to its pool, which discards it.
func drop(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), keyUnlockTimeout)
	defer cancel()
	_ = conn.Conn().Close(ctx) // closed either way; the lock ends with it
	conn.Release()
}
