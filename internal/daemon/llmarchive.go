package daemon

import (
	"time"

	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/proxy"
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
