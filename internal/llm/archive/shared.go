package archive

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/store"
)

// On a shared store: how long after its records were stored an exchange
// still not indexed ended is indexed by SweepShared (its daemon has had
// that long to do it), and how long an exchange with no records stays in
// progress before SweepShared marks it interrupted (its daemon stopped
// mid-exchange; a stream may last long).
const (
	unindexedAge    = time.Minute
	interruptedAge  = time.Hour
	sharedSweepPage = 500
)

// SweepShared, on a shared store, runs on the daemon that leads: it
// indexes the ended exchanges whose daemon stopped before indexing them,
// marks those in progress with no records for an hour interrupted, and
// deletes every daemon's exchanges past the retention limits.
func (a *Archive) SweepShared(ctx context.Context) error {
	if a.cfg.Bodies == nil {
		return errors.New("sweep LLM archive: not on a shared store")
	}
	if err := a.mendShared(ctx, unindexedAge, time.Now().Add(-interruptedAge)); err != nil {
		return fmt.Errorf("sweep LLM archive: %w", err)
	}
	var before time.Time
	if a.cfg.MaxAge > 0 {
		before = time.Now().Add(-a.cfg.MaxAge)
	}
	if before.IsZero() && a.cfg.MaxSize <= 0 {
		return nil
	}
	if _, err := a.cfg.Bodies.DeleteLLMArchived(ctx, before, a.cfg.MaxSize); err != nil {
		return fmt.Errorf("sweep LLM archive: %w", err)
	}
	return nil
}

// mendShared indexes the exchanges whose records were stored more than
// age ago and whose end the index lacks, and marks those in progress
// created before stale with no records interrupted.
func (a *Archive) mendShared(ctx context.Context, age time.Duration, stale time.Time) error {
	bodies, err := a.cfg.Bodies.UnindexedLLMBodies(ctx, age, sharedSweepPage)
	if err != nil {
		return err
	}
	h := newHasher() // the indexer has its own
	var xs []*store.LLMExchange
	for id, b := range bodies {
		x, err := endOf(b, h)
		if err != nil {
			a.slog.Warn("llm archive: records of an exchange not indexed", "id", id, "err", err)
			continue
		}
		xs = append(xs, x)
	}
	open, _, err := a.store.ListLLMExchangePage(ctx, store.LLMExchangeFilter{State: store.LLMInProgress, Until: stale},
		store.Page{Limit: sharedSweepPage})
	if err != nil {
		return err
	}
	for _, x := range open {
		if _, err := a.cfg.Bodies.LLMBody(ctx, x.ID); !errors.Is(err, errdefs.ErrNotFound) {
			continue // ended meanwhile (indexed above or soon), or the store failed: next time
		}
		x.State, x.Error = store.LLMInterrupted, "the daemon stopped before the exchange ended"
		xs = append(xs, x)
	}
	if len(xs) == 0 {
		return nil
	}
	mark, err := a.store.LLMArchiveMark(ctx)
	if err != nil {
		return err
	}
	a.slog.Info("llm archive: indexed what stopped daemons left", "exchanges", len(xs))
	return a.store.PutLLMExchanges(ctx, xs, mark)
}

// endOf is the index record of the exchange whose records are b, from its
// End record, its messages hashed with h.
func endOf(b []byte, h *hasher) (*store.LLMExchange, error) {
	rs, err := splitRecords(b)
	if err != nil {
		return nil, err
	}
	var x *store.LLMExchange
	var body []byte
	for _, r := range rs {
		switch r.kind {
		case kindBegin:
			if body, err = r.body(); err != nil {
				return nil, err
			}
		case kindEnd:
			var m exMeta
			if err := json.Unmarshal(r.meta, &m); err != nil {
				return nil, err
			}
			x = m.exchange()
		}
	}
	if x == nil {
		return nil, errors.New("no end record")
	}
	x.MsgHash, x.PrefixHashes, x.MsgCount = h.hashes(llm.Format(x.Inbound), body)
	return x, nil
}

// splitRecords decodes records as the log writes them one after the
// other (appendRecord); their slices alias b.
func splitRecords(b []byte) ([]*record, error) {
	var out []*record
	for len(b) > 0 {
		if len(b) < headerSize {
			return nil, errCorrupt
		}
		n := binary.LittleEndian.Uint32(b)
		if uint64(len(b)-headerSize) < uint64(n) {
			return nil, errCorrupt
		}
		body := b[headerSize : headerSize+int(n)]
		if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
			return nil, errCorrupt
		}
		r, err := decodeRecord(body)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		b = b[headerSize+int(n):]
	}
	return out, nil
}
