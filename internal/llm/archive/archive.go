// Package archive records every exchange through the LLM proxy — the
// request as received, the request sent upstream, the upstream's answer as
// it arrived (each piece with its arrival time) and the answer sent to the
// client — and reads them back.
//
// Records go to an append-only log of segment files with plain write(2)s
// and no fsync, an exchange's records waiting to go together in one: the
// request is written before it is forwarded, the stream as it passes (in
// compressed batches of at most FlushBytes or FlushInterval), and the end
// of the exchange before the client sees the end of the answer. What is
// written is in the kernel's page cache, so a daemon killed with SIGKILL
// loses no completed exchange, and the proxy never waits on a disk. An
// indexer goroutine, on a thread of its own at nice 10 (nice_linux.go),
// puts each exchange's metadata into the store (store.LLMExchanges) in
// batches off the hot path; Open re-indexes the log's tail the store does
// not have and marks the exchanges that were cut off as interrupted. Bodies
// are zstd-compressed. Retention (age, total size) removes whole segments.
//
// The index groups exchanges into conversations by hashes of their
// requests' messages, each message hashed as its codec reads it (hash.go),
// and sums a task run's tokens and conversations (RunUsage). Credentials
// never reach the log's metadata: URLs, headers and error texts are
// redacted by pattern where the metadata is written (package redact),
// which fails closed.
//
// On a store several daemons share (Config.Bodies), each daemon still
// writes its own log, and the end of an exchange also stores all its
// records, as the log has them, in the store (one write, before the
// client sees the end): any daemon reads any ended exchange from there,
// and none is lost with the daemon or the machine that proxied it. Such
// an archive does not re-index its log at Open (the store's mark and its
// exchanges in progress are every daemon's); SweepShared, on the leader,
// indexes the exchanges whose daemon stopped before indexing their end,
// marks those in progress with no records for an hour interrupted, and
// applies the retention to every daemon's exchanges; Sweep then removes
// only this daemon's old log segments.
//
// An Archive is safe for concurrent use.
package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/redact"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/store"
)

// Config configures an Archive. Zero fields take their defaults.
type Config struct {
	// Dir holds the segment files.
	Dir string
	// MaxAge and MaxSize bound what is kept: segments older than MaxAge,
	// and the oldest segments while all of them are larger than MaxSize,
	// are removed by Sweep. Zero keeps everything.
	MaxAge  time.Duration
	MaxSize int64
	// SegmentSize and SegmentAge: when a segment is full and a new one
	// begins (default 64 MiB, 1 hour; retention removes whole segments).
	SegmentSize int64
	SegmentAge  time.Duration
	// FlushBytes and FlushInterval bound how much of a stream waits in
	// memory before it is written (default 32 KiB, 250ms): what a kill
	// can lose of an exchange in flight.
	FlushBytes    int
	FlushInterval time.Duration
	Log           *slog.Logger
	// Bodies, when set, is the store several daemons share: every ended
	// exchange's records go there too, and are read from there.
	Bodies store.LLMBodies
}

// Archive is the archive of the LLM proxy's exchanges.
type Archive struct {
	cfg   Config
	log   *segLog
	store store.LLMExchanges
	idx   *indexer
	hash  *hasher // the indexer's (recover's before it starts)
	slog  *slog.Logger

	closeOnce sync.Once
}

var _ proxy.Recorder = (*Archive)(nil)

// Open opens the archive in cfg.Dir with its index in st, re-indexing
// what the index lacks, and starts its indexer; Close stops it.
func Open(ctx context.Context, cfg Config, st store.LLMExchanges) (*Archive, error) {
	if cfg.Dir == "" {
		return nil, errors.New("open LLM archive: no directory")
	}
	if cfg.SegmentSize <= 0 {
		cfg.SegmentSize = 64 << 20
	}
	if cfg.SegmentAge <= 0 {
		cfg.SegmentAge = time.Hour
	}
	if cfg.FlushBytes <= 0 {
		cfg.FlushBytes = 32 << 10
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = 250 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	a := &Archive{cfg: cfg, store: st, slog: cfg.Log, hash: newHasher()}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("open LLM archive: %w", err)
	}
	// Recover before opening the log: the log's new segment begins after
	// everything recovery reads. A shared store's index is mended by
	// SweepShared instead.
	if cfg.Bodies == nil {
		if err := a.recover(ctx); err != nil {
			return nil, fmt.Errorf("open LLM archive: %w", err)
		}
	}
	l, err := openLog(cfg.Dir, cfg.SegmentSize, cfg.SegmentAge)
	if err != nil {
		return nil, fmt.Errorf("open LLM archive: %w", err)
	}
	a.log = l
	a.idx = newIndexer(st, a.hash, cfg.Log)
	return a, nil
}

// Close indexes what is left to index and closes the log. Exchanges still
// in flight are recorded no further. Closing again does nothing.
func (a *Archive) Close() error {
	err := a.log.close()
	a.closeOnce.Do(a.idx.close)
	return err
}

// Sync waits until every exchange ended so far is in the index.
func (a *Archive) Sync(ctx context.Context) error { return a.idx.sync(ctx) }

var (
	encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true))
	decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
)

// Begin implements proxy.Recorder: it writes the request before the proxy
// forwards it.
func (a *Archive) Begin(r *http.Request, body []byte, ex *proxy.Exchange) proxy.Recording {
	ex.ID = llm.NewID("llx_")
	who := ex.Caller // set by the proxy from the request's context
	rec := &recording{a: a, id: ex.ID, start: ex.Start, body: body}
	rec.x = store.LLMExchange{
		ID: ex.ID, SandboxID: who.Sandbox, RunID: who.Run, KeyID: who.Key, Tenant: who.Tenant, Inbound: string(ex.Inbound),
		Method: r.Method, Path: redact.URL(r.URL.RequestURI()), Model: redact.URL(ex.Model), Stream: ex.Stream,
		State: store.LLMInProgress, CreatedAt: ex.Start, RequestBytes: int64(len(body)),
	}
	meta := appendBeginMeta(nil, &rec.x, r.Header)
	rec.put(kindBegin, meta, body, true) // written with the request sent upstream, or at the end
	return rec
}

// recording is one exchange being written. Its methods run on the
// request's goroutine, one at a time. Records wait in pend and go to the
// log together, with one write(2), where the archive's promise needs
// them there: before the request goes upstream, as a stream's batches
// fill, and at the end of the exchange.
type recording struct {
	a     *Archive
	id    string
	start time.Time
	body  []byte
	x     store.LLMExchange
	locs  []pos
	up    batch
	down  batch
	pend  []byte // records waiting to be written (a pooled buffer while any do)
	all   []byte // on a shared store, every record written, for the store at the end
	parts []part // where each begins and ends in pend
	dead  bool   // a write failed: the rest is not recorded
}

// part is one record in pend; index, when set, is that the indexer is to
// store the exchange once it is written.
type part struct {
	kind       byte
	start, end int
	index      bool
}

// batch is chunks of a body waiting to be written: each is its time since
// the exchange's start (µs, uvarint), its length (uvarint) and its bytes.
type batch struct {
	kind  byte
	buf   []byte
	first time.Time
}

// put adds one record of the exchange to those waiting to be written.
func (rec *recording) put(kind byte, meta, data []byte, index bool) {
	if rec.dead {
		return
	}
	r := record{kind: kind, id: rec.id, at: time.Now(), meta: meta, data: data}
	if rec.pend == nil {
		rec.pend = getBuf()
	}
	var zbuf []byte
	switch {
	case kind == kindUpstreamRequest && len(data) > 0 && bytes.Equal(data, rec.body):
		r.asRequest, r.data = true, nil // passed through as it came: stored once
	case len(data) > compressAbove:
		zbuf = encoder.EncodeAll(data, getBuf())
		r.zstd, r.data = true, zbuf
	}
	start := len(rec.pend)
	rec.pend = appendRecord(rec.pend, &r)
	putBuf(zbuf)
	rec.parts = append(rec.parts, part{kind: kind, start: start, end: len(rec.pend), index: index})
	rec.x.StoredBytes += int64(len(rec.pend) - start)
}

// commit writes the records waiting, with one write(2), and hands the
// indexer what it is to store.
func (rec *recording) commit() {
	if rec.dead || len(rec.parts) == 0 {
		return
	}
	err := rec.a.log.append(rec.pend, func(at, _ pos) {
		if len(rec.locs) == 0 {
			rec.x.Segment = at.seg
		}
		for _, p := range rec.parts {
			rec.locs = append(rec.locs, pos{at.seg, at.off + int64(p.start)})
			if !p.index {
				continue
			}
			x := rec.x
			x.Locations = encodeLocations(rec.locs)
			item := &item{x: &x, mark: pos{at.seg, at.off + int64(p.end)}}
			if p.kind == kindEnd {
				item.body, item.format = rec.body, llm.Format(rec.x.Inbound)
			}
			rec.a.idx.add(item)
		}
	})
	if rec.a.cfg.Bodies != nil && err == nil {
		rec.all = append(rec.all, rec.pend...)
	}
	putBuf(rec.pend) // a stream held open holds no buffer it does not need
	rec.pend, rec.parts = nil, rec.parts[:0]
	if err != nil {
		rec.dead = true
		rec.a.slog.Warn("llm archive: exchange not recorded further", "id", rec.id, "err", err)
	}
}

func (rec *recording) UpstreamRequest(r *http.Request, body []byte) {
	rec.flush(&rec.up)
	rec.put(kindUpstreamRequest, appendHTTPMeta(nil, r.Method, r.URL.String(), 0, r.Header), body, false)
	rec.commit() // in the log before it is sent
}

func (rec *recording) UpstreamResponse(status int, h http.Header) {
	rec.flush(&rec.up)
	rec.put(kindUpstreamResponse, appendHTTPMeta(nil, "", "", status, h), nil, false)
}

func (rec *recording) UpstreamData(b []byte) { rec.add(&rec.up, kindUpstreamData, b) }

func (rec *recording) Response(status int, h http.Header) {
	rec.put(kindResponse, appendHTTPMeta(nil, "", "", status, h), nil, false)
}

func (rec *recording) ResponseData(b []byte) {
	rec.x.ResponseBytes += int64(len(b))
	rec.add(&rec.down, kindResponseData, b)
}

func (rec *recording) add(bt *batch, kind byte, b []byte) {
	now := time.Now()
	if len(bt.buf) == 0 {
		bt.kind, bt.first = kind, now
		if bt.buf == nil {
			bt.buf = getBuf()
		}
	}
	bt.buf = appendChunk(bt.buf, now.Sub(rec.start), b)
	if len(bt.buf) >= rec.a.cfg.FlushBytes || now.Sub(bt.first) >= rec.a.cfg.FlushInterval {
		rec.flush(bt)
		rec.commit()
	}
}

func (rec *recording) flush(bt *batch) {
	if len(bt.buf) == 0 {
		return
	}
	rec.put(bt.kind, nil, bt.buf, false)
	putBuf(bt.buf)
	bt.buf = nil
}

func (rec *recording) End(ex *proxy.Exchange) {
	rec.flush(&rec.up)
	rec.flush(&rec.down)
	x := &rec.x
	// A Gemini client's model is a part of its path: redacted as the path is.
	x.Model, x.Provider, x.UpstreamModel = redact.URL(ex.Model), ex.Provider, ex.Upstream
	x.Stream, x.Passthrough, x.Status, x.Attempts = ex.Stream, ex.Passthrough, ex.Status, ex.Attempts
	x.InputTokens, x.OutputTokens = ex.Usage.InputTokens, ex.Usage.OutputTokens
	x.CachedTokens, x.ReasoningTokens = ex.Usage.CachedTokens, ex.Usage.ReasoningTokens
	x.FirstByte, x.Duration = ex.FirstByte, ex.Duration
	x.State = store.LLMComplete
	if ex.ClientGone {
		x.State = store.LLMClientGone
	}
	if ex.Err != nil {
		x.Error = redact.Text(ex.Err.Error()) // a failed call's error quotes its URL
	}
	rec.put(kindEnd, appendExMeta(nil, x), nil, true)
	if b := rec.a.cfg.Bodies; b != nil && !rec.dead {
		// In the shared store too, off this machine before the client
		// has the end, and before the index (which commit feeds) says
		// the exchange ended.
		ctx, cancel := context.WithTimeout(context.Background(), storeBodyTimeout)
		if err := b.PutLLMBody(ctx, rec.id, rec.start, append(rec.all, rec.pend...)); err != nil {
			rec.a.slog.Warn("llm archive: exchange kept in this daemon's log only", "id", rec.id, "err", err)
		}
		cancel()
	}
	rec.commit() // in the log before the client has the end of the answer
	rec.all = nil
	for _, b := range [][]byte{rec.pend, rec.up.buf, rec.down.buf} {
		putBuf(b)
	}
	rec.pend, rec.up.buf, rec.down.buf = nil, nil, nil
	rec.dead = true // nothing after End
}

// bufs are the buffers recordings write with: batches and encoded
// records, which grow to about FlushBytes each.
var bufs sync.Pool

func getBuf() []byte {
	if b, ok := bufs.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 4<<10)
}

func putBuf(b []byte) {
	if b != nil && cap(b) <= 1<<20 {
		bufs.Put(&b)
	}
}

// storeBodyTimeout bounds how long the end of an exchange waits for the
// shared store to take its records.
const storeBodyTimeout = 10 * time.Second

// Sweep removes the segments past the retention limits and the index
// records of the exchanges that began in them. On a shared store it
// removes this daemon's segments older than SegmentAge but the one taking
// appends, and nothing else: the exchanges in them ended long ago and
// are in the store (SweepShared applies the limits).
func (a *Archive) Sweep(ctx context.Context) error {
	active := a.log.active()
	if a.cfg.Bodies != nil {
		if _, err := sweep(a.cfg.Dir, active, a.cfg.SegmentAge, 0, time.Now()); err != nil {
			return fmt.Errorf("sweep LLM archive: %w", err)
		}
		return nil
	}
	keep, err := sweep(a.cfg.Dir, active, a.cfg.MaxAge, a.cfg.MaxSize, time.Now())
	if err != nil {
		return fmt.Errorf("sweep LLM archive: %w", err)
	}
	if _, err := a.store.DeleteLLMExchanges(ctx, keep); err != nil {
		return fmt.Errorf("sweep LLM archive: %w", err)
	}
	return nil
}

// RunRetention sweeps every interval until ctx ends, with sweep (Sweep
// or SweepShared).
func (a *Archive) RunRetention(ctx context.Context, interval time.Duration, sweep func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := sweep(ctx); err != nil {
			a.slog.Warn("llm archive retention", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
