package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/store"
)

// item is an index record to store, and the log position after the
// record it comes from.
type item struct {
	x    *store.LLMExchange
	mark pos
	// body and format: the request, whose messages place the exchange in
	// its conversation (at its end).
	body   []byte
	format llm.Format
}

// indexer stores index records in batches, in log order, on its own
// goroutine at a lower priority: the hot path only appends to its queue.
type indexer struct {
	st    store.LLMExchanges
	hash  *hasher
	convs convCache // the indexer goroutine's
	// fullSaid is when the indexer goroutine last said the store is full.
	fullSaid time.Time
	started  time.Time
	log      *slog.Logger
	mu       sync.Mutex
	q        []*item
	bytes    int           // of the request bodies in q
	last     pos           // the mark of the last item added
	done     pos           // the mark of the last item stored
	changed  chan struct{} // closed, and replaced, when a batch is stored
	wake     chan struct{}
	hurry    chan struct{} // Sync wants the batch now
	stop     chan struct{}
	exit     chan struct{}
}

// maxQueuedBodies bounds the request bodies the indexer's queue holds.
const maxQueuedBodies = 256 << 20

// batchWait is how long the indexer lets a batch gather.
const batchWait = 50 * time.Millisecond

func newIndexer(st store.LLMExchanges, hash *hasher, log *slog.Logger) *indexer {
	ix := &indexer{st: st, hash: hash, log: log, started: time.Now(), wake: make(chan struct{}, 1), hurry: make(chan struct{}, 1),
		stop: make(chan struct{}), exit: make(chan struct{}), changed: make(chan struct{})}
	go ix.run()
	return ix
}

// add queues it; called in log order.
func (ix *indexer) add(it *item) {
	ix.mu.Lock()
	// While the store lags, requests wait here with their bodies; past a
	// bound they wait without (their conversation is then unknown).
	if ix.bytes+len(it.body) > maxQueuedBodies {
		it.body = nil
	}
	ix.bytes += len(it.body)
	ix.q = append(ix.q, it)
	ix.last = it.mark
	ix.mu.Unlock()
	select {
	case ix.wake <- struct{}{}:
	default:
	}
}

func (ix *indexer) run() {
	defer close(ix.exit)
	lowerPriority()
	for {
		select {
		case <-ix.stop:
			ix.flush()
			return
		case <-ix.wake:
		}
		// Let a batch gather: one transaction for many exchanges costs
		// the store about what one for one does.
		select {
		case <-ix.stop:
		case <-ix.hurry:
		case <-time.After(batchWait):
		}
		if err := ix.flush(); err != nil {
			wait := time.Second
			if errdefs.IsNoSpace(err) { // nothing but freed space helps
				wait = fullRetry
			}
			select { // the store failed: try again in a while
			case <-ix.stop:
				ix.flush()
				return
			case <-time.After(wait):
			}
			ix.poke()
		}
	}
}

func (ix *indexer) poke() {
	select {
	case ix.wake <- struct{}{}:
	default:
	}
}

// fullRetry is how long the indexer waits to try again after the store
// refused a batch for want of room (SQLITE_FULL, ENOSPC, 53100), and
// fullWarnEvery how often it says so.
const (
	fullRetry     = 10 * time.Second
	fullWarnEvery = time.Minute
)

// flush stores what is queued; it returns the store's error when the
// store refused it (it stays queued).
func (ix *indexer) flush() error {
	ix.mu.Lock()
	batch := ix.q
	ix.q = nil
	for _, it := range batch {
		ix.bytes -= len(it.body)
	}
	ix.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	xs := make([]*store.LLMExchange, 0, len(batch))
	at := map[string]int{}
	for _, it := range batch {
		if it.body != nil || it.x.State != store.LLMInProgress {
			it.x.MsgHash, it.x.PrefixHashes, it.x.MsgCount = ix.hash.hashes(it.format, it.body)
			it.x.Conversation = ix.convs.find(it.x)
			if it.x.Conversation == "" && it.x.MsgHash != "" && (len(it.x.PrefixHashes) == 0 || !ix.older(ctx, it.x)) {
				it.x.Conversation = it.x.ID // nothing it could continue: spare the store the lookup
			}
			ix.convs.add(it.x) // for a follow-up in this very batch
		}
		if i, ok := at[it.x.ID]; ok { // begun and ended in one batch
			xs[i] = it.x
			continue
		}
		at[it.x.ID] = len(xs)
		xs = append(xs, it.x)
	}
	mark := batch[len(batch)-1].mark
	if err := ix.st.PutLLMExchanges(ctx, xs, mark.String()); err != nil {
		switch {
		case !errdefs.IsNoSpace(err):
			ix.log.Warn("llm archive: index exchanges", "count", len(xs), "err", err)
		case time.Since(ix.fullSaid) >= fullWarnEvery:
			ix.fullSaid = time.Now()
			ix.log.Warn("llm archive: the store is full: exchanges wait to be indexed (they are in the archive's log), tried again every "+fullRetry.String()+" until space is freed",
				"count", len(xs), "err", err)
		}
		ix.mu.Lock()
		ix.q = append(batch, ix.q...)
		for _, it := range batch {
			ix.bytes += len(it.body)
		}
		ix.mu.Unlock()
		return err
	}
	for _, x := range xs {
		ix.convs.add(x)
	}
	ix.mu.Lock()
	ix.done = mark
	close(ix.changed)
	ix.changed = make(chan struct{})
	ix.mu.Unlock()
	return nil
}

// stored returns a channel closed when the next batch is stored.
func (ix *indexer) stored() <-chan struct{} {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.changed
}

// older says whether x's conversation may be one the cache does not know:
// the cache forgot some, or x's sandbox had exchanges before the indexer
// started (asked of the store once per sandbox).
func (ix *indexer) older(ctx context.Context, x *store.LLMExchange) bool {
	if ix.convs.forgot {
		return true
	}
	old, ok := ix.convs.before[x.SandboxID]
	if !ok {
		xs, _, err := ix.st.ListLLMExchangePage(ctx, store.LLMExchangeFilter{SandboxID: x.SandboxID, Until: ix.started}, store.Page{Limit: 1})
		if err != nil {
			return true
		}
		old = len(xs) > 0
		if ix.convs.before == nil {
			ix.convs.before = map[string]bool{}
		}
		ix.convs.before[x.SandboxID] = old
	}
	return old
}

// convCache remembers the conversation of the exchanges indexed lately by
// their sandbox, run and messages, so that a follow-up finds its
// conversation without asking the store (which it still asks on a miss:
// the conversation may be older than the process).
type convCache struct {
	m map[string]string
	// forgot: m was cleared once full. before: whether a sandbox has
	// exchanges from before the indexer started.
	forgot bool
	before map[string]bool
}

const maxConvs = 100_000

func convKey(x *store.LLMExchange, hash string) string {
	return x.SandboxID + "\x00" + x.RunID + "\x00" + hash
}

// find is the conversation of the longest prefix of x's messages that
// the cache knows, or "".
func (c *convCache) find(x *store.LLMExchange) string {
	for _, h := range x.PrefixHashes {
		if conv, ok := c.m[convKey(x, h)]; ok {
			return conv
		}
	}
	return ""
}

func (c *convCache) add(x *store.LLMExchange) {
	if x.MsgHash == "" || x.Conversation == "" {
		return
	}
	if len(c.m) >= maxConvs {
		c.m, c.forgot = nil, true
	}
	if c.m == nil {
		c.m = map[string]string{}
	}
	c.m[convKey(x, x.MsgHash)] = x.Conversation
}

// sync waits until what was added before the call is stored.
func (ix *indexer) sync(ctx context.Context) error {
	ix.mu.Lock()
	want := ix.last
	ix.mu.Unlock()
	ix.poke()
	select {
	case ix.hurry <- struct{}{}:
	default:
	}
	for {
		ix.mu.Lock()
		ok := !ix.done.less(want)
		ix.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ix.exit:
			return errors.New("llm archive is closed")
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (ix *indexer) close() {
	close(ix.stop)
	<-ix.exit
}

// recover brings the index up to the log: it reads the log from the
// index's mark (or from the first record of an exchange the index has in
// progress, if earlier), indexes the exchanges begun or ended there, and
// marks those that never ended as interrupted.
func (a *Archive) recover(ctx context.Context) error {
	markStr, err := a.store.LLMArchiveMark(ctx)
	if err != nil {
		return err
	}
	var mark pos
	if markStr != "" {
		if mark, err = parsePos(markStr); err != nil {
			return err
		}
	}
	open := map[string]*store.LLMExchange{}
	from := mark
	for p := (store.Page{Limit: 1000}); ; {
		xs, next, err := a.store.ListLLMExchangePage(ctx, store.LLMExchangeFilter{State: store.LLMInProgress}, p)
		if err != nil {
			return err
		}
		for _, x := range xs {
			open[x.ID] = x
			if locs, err := decodeLocations(x.Locations); err == nil && len(locs) > 0 && locs[0].less(from) {
				from = locs[0]
			}
		}
		if next == "" {
			break
		}
		p.After = next
	}
	type seen struct {
		x     *store.LLMExchange
		locs  []pos
		ended bool
		body  []byte
	}
	found := map[string]*seen{}
	var order []string
	err = scan(a.cfg.Dir, from, func(at pos, r *record) error {
		s := found[r.id]
		switch {
		case r.kind == kindBegin && (open[r.id] != nil || !at.less(mark)):
			var m beginMeta
			if err := json.Unmarshal(r.meta, &m); err != nil {
				return nil
			}
			body, err := r.body()
			if err != nil {
				return nil
			}
			s = &seen{x: m.Exchange.exchange(), body: body}
			s.x.Segment = at.seg
			found[r.id] = s
			order = append(order, r.id)
		case s == nil:
			return nil
		}
		s.locs = append(s.locs, at)
		if r.kind == kindEnd {
			var m exMeta
			if err := json.Unmarshal(r.meta, &m); err == nil {
				x := m.exchange()
				x.Segment = s.x.Segment
				s.x, s.ended = x, true
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read archive log: %w", err)
	}
	var xs []*store.LLMExchange
	for _, id := range order {
		s := found[id]
		if !s.ended && open[id] == nil && s.locs[0].less(mark) {
			continue
		}
		if !s.ended {
			s.x.State = store.LLMInterrupted
			s.x.Error = "the daemon stopped before the exchange ended"
		}
		s.x.Locations = encodeLocations(s.locs)
		s.x.MsgHash, s.x.PrefixHashes, s.x.MsgCount = a.hash.hashes(llm.Format(s.x.Inbound), s.body)
		xs = append(xs, s.x)
		delete(open, id)
	}
	for _, x := range open { // their records are gone (swept)
		x.State, x.Error = store.LLMInterrupted, "the daemon stopped before the exchange ended"
		xs = append(xs, x)
	}
	if len(xs) == 0 {
		return nil
	}
	// The log goes on in a new segment after the last.
	if segs, err := segments(a.cfg.Dir); err == nil && len(segs) > 0 {
		mark = pos{segs[len(segs)-1] + 1, 0}
	}
	a.slog.Info("llm archive: re-indexed the log's tail", "exchanges", len(xs))
	return a.store.PutLLMExchanges(ctx, xs, mark.String())
}
