package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent2env/agent2env/internal/store"
)

// notifier is the store's store.Notifier: NOTIFY through the pools, and
// one connection of its own that LISTENs to every topic this process has
// listened to, started at the first Listen and kept, reconnecting, until
// Close. A topic's channel is named after the store's schema too (NOTIFY
// is the database's), so stores in other schemas do not hear it.
type notifier struct {
	s      *Store
	prefix string // "a2e.<hash of the schema>."
	topics store.Topics

	mu sync.Mutex
	// listened has a channel per topic listened to, closed once the
	// listening connection's LISTEN of it is in force; topics stay.
	listened map[string]chan struct{}
	// added wakes the listening connection to LISTEN a new topic: it
	// connects again and LISTENs to all, so notifications of the topics
	// already listened to that are sent during that reconnect are lost,
	// as during one after a failure (a daemon adds its topics as it
	// starts).
	added chan struct{}
	stop  context.CancelFunc // of the listening connection; nil before
	done  chan struct{}
}

// notifyRetry is how long the listening connection waits before it
// connects again after a failure; notifications sent meanwhile are lost.
const notifyRetry = time.Second

func newNotifier(s *Store, schema string) *notifier {
	h := fnv.New32a()
	h.Write([]byte(schema))
	return &notifier{s: s, prefix: fmt.Sprintf("a2e.%08x.", h.Sum32()), listened: map[string]chan struct{}{},
		added: make(chan struct{}, 1)}
}

// Notify sends payload to topic's listeners on every daemon of the store.
func (s *Store) Notify(ctx context.Context, topic string, payload []byte) error {
	if len(payload) > store.MaxNotifyBytes {
		return fmt.Errorf("notify %s: payload of %d bytes, over %d", topic, len(payload), store.MaxNotifyBytes)
	}
	if _, err := s.w.Exec(ctx, `SELECT pg_notify($1, $2)`, s.notes.prefix+topic, string(payload)); err != nil {
		return fmt.Errorf("notify %s: %w", topic, err)
	}
	return nil
}

// Listen returns the payloads sent to topic, by any daemon of the store,
// until ctx ends; it returns once the topic's LISTEN is in force.
func (s *Store) Listen(ctx context.Context, topic string) (<-chan []byte, error) {
	n := s.notes
	ch := n.topics.Add(ctx, topic, nil)
	n.mu.Lock()
	if n.stop == nil {
		lctx, stop := context.WithCancel(context.Background())
		n.stop, n.done = stop, make(chan struct{})
		go n.run(lctx)
	}
	ready := n.listened[topic]
	if ready == nil {
		ready = make(chan struct{})
		n.listened[topic] = ready
		select {
		case n.added <- struct{}{}:
		default:
		}
	}
	n.mu.Unlock()
	select {
	case <-ready:
		return ch, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// close stops the listening connection, if it runs.
func (n *notifier) close() {
	n.mu.Lock()
	stop, done := n.stop, n.done
	n.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// errAdded ends a listening connection to LISTEN a new topic: pgx closes
// a connection whose wait is cancelled.
var errAdded = errors.New("a topic was added")

// run keeps a connection listening until ctx ends, connecting again after
// failures (at once when a topic was added).
func (n *notifier) run(ctx context.Context) {
	defer close(n.done)
	for ctx.Err() == nil {
		err := n.listen(ctx)
		if errors.Is(err, errAdded) || ctx.Err() != nil {
			continue
		}
		slog.Warn("store notifications: the listening connection failed; connecting again", "err", err, "retry_in", notifyRetry)
		select {
		case <-ctx.Done():
		case <-time.After(notifyRetry):
		}
	}
}

// listen connects, LISTENs to every topic listened to, and delivers what
// comes until ctx ends, the connection fails or a topic is added.
func (n *notifier) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, n.s.w.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	n.mu.Lock()
	topics := maps.Clone(n.listened)
	// A topic added from here on wakes the wait below.
	select {
	case <-n.added:
	default:
	}
	n.mu.Unlock()
	for topic := range topics {
		if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{n.prefix + topic}.Sanitize()); err != nil {
			return err
		}
	}
	// Only now is every topic in force again: a Listen of a new topic
	// returns after the old ones are listened to on this connection too,
	// so what its caller notifies next on any of them is heard.
	for _, ready := range topics {
		select {
		case <-ready:
		default:
			close(ready)
		}
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-n.added:
			cancel(errAdded)
		case <-wctx.Done():
		}
	}()
	for {
		note, err := conn.WaitForNotification(wctx)
		if err != nil {
			if cause := context.Cause(wctx); cause != nil {
				return cause
			}
			return err
		}
		if topic, ok := strings.CutPrefix(note.Channel, n.prefix); ok {
			n.topics.Deliver(topic, []byte(note.Payload))
		}
	}
}
