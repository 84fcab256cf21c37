package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/store"
)

// LLMArchiveConfig bounds the archive of the LLM proxy's exchanges.
type LLMArchiveConfig struct {
	// Dir holds its segment files; default <DataDir>/llm-archive.
	Dir string
	// MaxAge and MaxSize: older exchanges, and the oldest while the
	// archive is larger, are removed (whole segments, once a minute).
	// Zero keeps everything.
	MaxAge  time.Duration
	MaxSize int64
}

// llmProxyOptions are the options every proxy the daemon serves is built
// with: it records each exchange into the archive a.
func llmProxyOptions(a *archive.Archive) []proxy.Option {
	return []proxy.Option{proxy.WithRecorder(a)}
}

// llmIndexedTopic is the store notification a daemon sends when its LLM
// archive has indexed exchanges.
const llmIndexedTopic = "llm-indexed"

// sharedIndex is the LLM archive as the service layer reads it, whose
// Indexed wakes the follows of the exchange stream when this daemon's
// archive, or another's of the store, has indexed exchanges (relay): the
// index is the store's, so a follow on one daemon sends what the others'
// proxies did.
type sharedIndex struct {
	*archive.Archive

	mu      sync.Mutex
	changed chan struct{} // closed, and replaced, at each index
}

func newSharedIndex(a *archive.Archive) *sharedIndex {
	return &sharedIndex{Archive: a, changed: make(chan struct{})}
}

// Indexed returns a channel closed when exchanges are next indexed, by
// any daemon of the store.
func (x *sharedIndex) Indexed() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.changed
}

func (x *sharedIndex) wake() {
	x.mu.Lock()
	defer x.mu.Unlock()
	close(x.changed)
	x.changed = make(chan struct{})
}

// relay, until ctx ends, wakes the follows at each index of this
// daemon's archive and tells the store's other daemons, and wakes them
// when another daemon tells of its own.
func (x *sharedIndex) relay(ctx context.Context, notes store.Notifier, log *slog.Logger) error {
	others, err := notes.Listen(ctx, llmIndexedTopic)
	if err != nil {
		return err
	}
	for {
		ours := x.Archive.Indexed()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ours:
			x.wake()
			if err := notes.Notify(ctx, llmIndexedTopic, nil); err != nil && ctx.Err() == nil {
				log.Warn("tell the other daemons of the LLM exchanges indexed", "err", err)
			}
		case _, ok := <-others:
			if !ok {
				return ctx.Err()
			}
			x.wake()
		}
	}
}
