package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent2env/agent2env/internal/leader"
)

// The session locks' timings: the holder checks its connection every
// leaderPing, and gives the lock up as lost when a check takes longer than
// leaderPingTimeout or fails. The server notices a holder that vanished
// without closing its connection (its host died, the network went) by
// TCP keepalives: after leaderKeepaliveIdle without traffic, one probe
// every leaderKeepaliveInterval, leaderKeepaliveCount unanswered. With a
// follower retrying every leader.DefaultRetry, another daemon leads
// within about 15 s of the leader's host dying, and at once (the retry
// period) of the leader's process dying.
const (
	leaderPing              = 2 * time.Second
	leaderPingTimeout       = 3 * time.Second
	leaderKeepaliveIdle     = "5"
	leaderKeepaliveInterval = "2"
	leaderKeepaliveCount    = "3"
)

// Leadership returns the lock of leadership among the daemons on this
// store (lockLeader).
func (s *Store) Leadership() leader.Lock { return sessionLock{s: s, key: lockLeader} }

// Daemons returns the lock every daemon on this store holds for as long
// as it runs (lockDaemons): shared, so that any number of daemons whose
// sandboxes all of them reach (kubernetes) run together, or, with alone,
// exclusive, for a daemon whose runtime keeps its sandboxes on its own
// machine (oci): such a daemon owns every sandbox of the store, so it
// runs only with no other daemon, and no other runs with it.
func (s *Store) Daemons(alone bool) leader.Lock {
	return sessionLock{s: s, key: lockDaemons, shared: !alone}
}

// sessionLock is a session-level advisory lock, taken on a connection of
// its own, outside the pools, that lives as long as it is held. Its key
// is key and the hash of the store's schema (advisory locks are the
// database's), so that stores in other schemas of the database have their
// own. A shared one is held by any number of sessions at once, as long
// as none holds it exclusive.
type sessionLock struct {
	s      *Store
	key    int32
	shared bool
}

// TryLock connects and tries the advisory lock: the connection is kept
// while it is held, closed when another session holds it.
func (l sessionLock) TryLock(ctx context.Context) (leader.Held, error) {
	cfg := l.s.w.Config().ConnConfig.Copy()
	cfg.RuntimeParams["tcp_keepalives_idle"] = leaderKeepaliveIdle
	cfg.RuntimeParams["tcp_keepalives_interval"] = leaderKeepaliveInterval
	cfg.RuntimeParams["tcp_keepalives_count"] = leaderKeepaliveCount
	cfg.RuntimeParams["application_name"] = "agent2env lock"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("lock %#x: connect: %w", l.key, err)
	}
	// The try is not cancelled with ctx: pgx answers a cancellation by
	// closing the connection, and a lock the server granted just before
	// would stay held until the server noticed the close, past the end of
	// this daemon (a daemon started right after it found the store led).
	// It never waits for the lock; it is bounded like a ping.
	tryCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaderPingTimeout)
	defer cancel()
	try := `SELECT pg_try_advisory_lock($1, hashtext(current_schema()))`
	if l.shared {
		try = `SELECT pg_try_advisory_lock_shared($1, hashtext(current_schema()))`
	}
	var got bool
	if err := conn.QueryRow(tryCtx, try, l.key).Scan(&got); err != nil {
		conn.Close(tryCtx)
		return nil, fmt.Errorf("lock %#x: %w", l.key, err)
	}
	if !got {
		conn.Close(tryCtx)
		return nil, nil
	}
	h := &held{conn: conn, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go h.watch()
	if err := ctx.Err(); err != nil { // ended while the lock was tried: give it back now
		h.Unlock()
		return nil, fmt.Errorf("lock %#x: %w", l.key, context.Cause(ctx))
	}
	return h, nil
}

// held is a session lock held on conn, which watch checks until
// Unlock.
type held struct {
	conn       *pgx.Conn
	lost       chan struct{} // closed by watch when the connection fails
	stop, done chan struct{} // Unlock closes stop; watch closes done on return
	once       sync.Once
}

func (h *held) Lost() <-chan struct{} { return h.lost }

// watch pings the connection every leaderPing until Unlock, and reports
// the lock lost at the first ping that fails or is late.
func (h *held) watch() {
	defer close(h.done)
	t := time.NewTicker(leaderPing)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), leaderPingTimeout)
		err := h.conn.Ping(ctx)
		cancel()
		if err != nil {
			close(h.lost)
			return
		}
	}
}

// Unlock stops the watch, releases the lock and closes the connection.
// The release is a statement of its own, answered before Unlock returns:
// a closed connection releases it too, but only once the server has
// noticed, so a daemon started right after another stopped could find
// the lock still held.
func (h *held) Unlock() {
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		ctx, cancel := context.WithTimeout(context.Background(), leaderPingTimeout)
		defer cancel()
		_, _ = h.conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`) // on failure, the close releases it
		h.conn.Close(ctx)
	})
}
