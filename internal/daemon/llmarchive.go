package daemon

import (
	"context"
	"path/filepath"
	"time"

	"github.com/agent2env/agent2env/internal/httpapi"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/service"
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

// openLLMArchive opens the archive (re-indexing what a killed daemon left
// unindexed) and returns its API routes.
func (s *System) openLLMArchive(ctx context.Context) (httpapi.Routes, error) {
	c := s.cfg.LLMArchive
	if c.Dir == "" {
		c.Dir = filepath.Join(s.cfg.DataDir, "llm-archive")
	}
	a, err := archive.Open(ctx, archive.Config{
		Dir: c.Dir, MaxAge: c.MaxAge, MaxSize: c.MaxSize, Log: s.log,
	}, s.Store)
	if err != nil {
		return nil, err
	}
	s.LLMArchive = a
	s.llmExchanges = service.NewLLMExchanges(a)
	return httpapi.NewLLMArchiveRoutes(s.llmExchanges), nil
}

// llmProxyOptions are the options every proxy the daemon serves is built
// with: it records each exchange into the archive.
func (s *System) llmProxyOptions() []proxy.Option {
	return []proxy.Option{proxy.WithRecorder(s.LLMArchive)}
}
