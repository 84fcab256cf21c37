package archive

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/llm/internal/redact"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
	"github.com/agent2env/agent2env/internal/store"
)

// beginMeta is the meta of a Begin record: the exchange as it begins and
// the request's header.
type beginMeta struct {
	Exchange exMeta      `json:"x"`
	Header   http.Header `json:"h,omitempty"`
}

// httpMeta is the meta of a request or response record.
type httpMeta struct {
	Method string      `json:"m,omitempty"`
	URL    string      `json:"u,omitempty"`
	Status int         `json:"s,omitempty"`
	Header http.Header `json:"h,omitempty"`
}

func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// appendHTTPMeta appends what marshal(httpMeta{...}) would with url and h
// redacted, without the reflection or the copy of h: it is on the path
// of every request and response. What it writes is redacted here, where
// it goes to the log, whatever its caller did.
func appendHTTPMeta(dst []byte, method, url string, status int, h http.Header) []byte {
	dst = append(dst, '{')
	sep := func() {
		if len(dst) > 1 && dst[len(dst)-1] != '{' {
			dst = append(dst, ',')
		}
	}
	if method != "" {
		dst = wire.AppendString(append(dst, `"m":`...), method)
	}
	if url != "" {
		sep()
		dst = wire.AppendString(append(dst, `"u":`...), redact.URL(url))
	}
	if status != 0 {
		sep()
		dst = strconv.AppendInt(append(dst, `"s":`...), int64(status), 10)
	}
	if len(h) > 0 {
		sep()
		dst = append(dst, `"h":{`...)
		first := true
		for k, vs := range h {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(wire.AppendString(dst, k), ':')
			vs = redact.Values(k, vs)
			if vs == nil {
				dst = append(dst, "null"...)
				continue
			}
			dst = append(dst, '[')
			for i, v := range vs {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = wire.AppendString(dst, v)
			}
			dst = append(dst, ']')
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

func appendChunk(dst []byte, at time.Duration, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(at.Microseconds()))
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// body is the record's data, decompressed.
func (r *record) body() ([]byte, error) {
	if !r.zstd {
		return r.data, nil
	}
	return decoder.DecodeAll(r.data, nil)
}

// Chunk is a piece of a body as it was read or written: its time since
// the exchange began, and its size.
type Chunk struct {
	At   time.Duration
	Size int
}

// Message is a request or a response as recorded.
type Message struct {
	Method string // requests
	URL    string // requests: the path and query (the client's) or URL (upstream)
	Status int    // responses
	Header http.Header
	Body   []byte
	// Chunks are the pieces of a response's body with their times.
	Chunks []Chunk
}

// Attempt is one call upstream: the request sent and the response, nil
// when none came (a connection error).
type Attempt struct {
	Request  Message
	Response *Message
}

// Exchange is an exchange read back from the archive.
type Exchange struct {
	*store.LLMExchange
	Request  Message
	Attempts []Attempt
	// Response is nil when nothing was sent to the client.
	Response *Message
}

// Upstream returns the last attempt, the one whose answer the client got;
// nil when nothing went upstream.
func (x *Exchange) Upstream() *Attempt {
	if len(x.Attempts) == 0 {
		return nil
	}
	return &x.Attempts[len(x.Attempts)-1]
}

// Get returns the index record of exchange id.
func (a *Archive) Get(ctx context.Context, id string) (*store.LLMExchange, error) {
	return a.store.GetLLMExchange(ctx, id)
}

// List returns a page of the index.
func (a *Archive) List(ctx context.Context, f store.LLMExchangeFilter, p store.Page) ([]*store.LLMExchange, string, error) {
	return a.store.ListLLMExchangePage(ctx, f, p)
}

// ListEnded returns, in the order they ended, up to limit of the exchanges
// f selects that ended after the one whose Ended is after (0: from the
// first).
func (a *Archive) ListEnded(ctx context.Context, f store.LLMExchangeFilter, after int64, limit int) ([]*store.LLMExchange, error) {
	return a.store.ListEndedLLMExchanges(ctx, f, after, limit)
}

// EndedMark returns the Ended after which the last skip exchanges f
// selects ended (0 when there are no more than skip): ListEnded after it
// gives them, and those that end later.
func (a *Archive) EndedMark(ctx context.Context, f store.LLMExchangeFilter, skip int) (int64, error) {
	return a.store.LLMEndedMark(ctx, f, skip)
}

// Indexed returns a channel closed when the index next stores exchanges
// (begun or ended): a follower asks ListEnded again then. Take it before
// asking, so that nothing stored in between goes unnoticed.
func (a *Archive) Indexed() <-chan struct{} { return a.idx.stored() }

// Read reads x's records back: on a shared store from the store once x
// has ended (by whichever daemon), else from this daemon's log.
func (a *Archive) Read(ctx context.Context, x *store.LLMExchange) (*Exchange, error) {
	rs, err := a.records(ctx, x)
	if err != nil {
		return nil, err
	}
	out := &Exchange{LLMExchange: x}
	for i, r := range rs {
		if r.id != x.ID {
			return nil, fmt.Errorf("read LLM exchange %s: record %d is %s's", x.ID, i, r.id)
		}
		data, err := r.body()
		if err != nil {
			return nil, fmt.Errorf("read LLM exchange %s: record %d: %w", x.ID, i, err)
		}
		var m httpMeta
		if r.kind != kindBegin && len(r.meta) > 0 {
			if err := json.Unmarshal(r.meta, &m); err != nil {
				return nil, fmt.Errorf("read LLM exchange %s: record %d: %w", x.ID, i, err)
			}
			// Redacted again: a log written before redaction failed
			// closed may hold credentials.
			m.URL, m.Header = redact.URL(m.URL), redact.Header(m.Header)
		}
		switch r.kind {
		case kindBegin:
			var b beginMeta
			if err := json.Unmarshal(r.meta, &b); err != nil {
				return nil, fmt.Errorf("read LLM exchange %s: record %d: %w", x.ID, i, err)
			}
			out.Request = Message{Method: b.Exchange.Method, URL: redact.URL(b.Exchange.Path), Header: redact.Header(b.Header), Body: data}
		case kindUpstreamRequest:
			if r.asRequest {
				data = out.Request.Body
			}
			out.Attempts = append(out.Attempts, Attempt{Request: Message{Method: m.Method, URL: m.URL, Header: m.Header, Body: data}})
		case kindUpstreamResponse:
			if up := out.Upstream(); up != nil {
				up.Response = &Message{Status: m.Status, Header: m.Header, Body: []byte{}}
			}
		case kindUpstreamData:
			if up := out.Upstream(); up != nil && up.Response != nil {
				if err := addChunks(up.Response, data); err != nil {
					return nil, fmt.Errorf("read LLM exchange %s: record %d: %w", x.ID, i, err)
				}
			}
		case kindResponse:
			out.Response = &Message{Status: m.Status, Header: m.Header, Body: []byte{}}
		case kindResponseData:
			if out.Response != nil {
				if err := addChunks(out.Response, data); err != nil {
					return nil, fmt.Errorf("read LLM exchange %s: record %d: %w", x.ID, i, err)
				}
			}
		}
	}
	return out, nil
}

// records reads x's records: from the shared store when it has them,
// else from this daemon's log at x's locations.
func (a *Archive) records(ctx context.Context, x *store.LLMExchange) ([]*record, error) {
	if a.cfg.Bodies != nil {
		b, err := a.cfg.Bodies.LLMBody(ctx, x.ID)
		switch {
		case err == nil:
			rs, err := splitRecords(b)
			if err != nil {
				return nil, fmt.Errorf("read LLM exchange %s from the store: %w", x.ID, err)
			}
			return rs, nil
		case !errors.Is(err, errdefs.ErrNotFound):
			return nil, fmt.Errorf("read LLM exchange %s: %w", x.ID, err)
		case x.State != store.LLMInProgress:
			// Ended with no records in the store: deleted by the
			// retention, or kept in its daemon's log only (the store
			// failed then).
			return nil, errdefs.NotFound("LLM exchange %s has no records in the store: removed by the archive's retention, "+
				"or kept by the daemon that proxied it only", x.ID)
		}
		// In progress: readable so far on the daemon proxying it.
	}
	locs, err := decodeLocations(x.Locations)
	if err != nil {
		return nil, fmt.Errorf("read LLM exchange %s: locations: %w", x.ID, err)
	}
	files := &segFiles{dir: a.cfg.Dir}
	defer files.close()
	rs := make([]*record, 0, len(locs))
	for _, p := range locs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, err := files.readAt(p)
		if a.cfg.Bodies != nil && (errors.Is(err, os.ErrNotExist) || err == nil && r.id != x.ID) {
			return nil, errdefs.NotFound("LLM exchange %s is in progress on another daemon: its records are readable once it ends", x.ID)
		}
		if errors.Is(err, os.ErrNotExist) { // swept since the index was read
			return nil, errdefs.NotFound("LLM exchange %s was removed by the archive's retention", x.ID)
		}
		if err != nil {
			return nil, fmt.Errorf("read LLM exchange %s: %w", x.ID, err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func addChunks(m *Message, b []byte) error {
	for len(b) > 0 {
		at, n := binary.Uvarint(b)
		if n <= 0 {
			return errCorrupt
		}
		size, k := binary.Uvarint(b[n:])
		if k <= 0 || uint64(len(b)-n-k) < size {
			return errCorrupt
		}
		b = b[n+k:]
		m.Body = append(m.Body, b[:size]...)
		m.Chunks = append(m.Chunks, Chunk{At: time.Duration(at) * time.Microsecond, Size: int(size)})
		b = b[size:]
	}
	return nil
}

// sweep removes the empty segments and those (never the active one)
// older than maxAge, then the oldest while all are larger than maxSize,
// and returns the first segment kept.
func sweep(dir string, active int64, maxAge time.Duration, maxSize int64, now time.Time) (int64, error) {
	segs, err := segments(dir)
	if err != nil {
		return 0, err
	}
	type seg struct {
		n    int64
		size int64
		mod  time.Time
	}
	var all []seg
	var total int64
	for _, n := range segs {
		fi, err := os.Stat(filepath.Join(dir, segName(n)))
		if err != nil {
			continue
		}
		if fi.Size() == 0 && n < active { // a run of the daemon that archived nothing
			if err := os.Remove(filepath.Join(dir, segName(n))); err != nil {
				return 0, err
			}
			continue
		}
		all = append(all, seg{n, fi.Size(), fi.ModTime()})
		total += fi.Size()
	}
	keep := active
	for _, s := range all {
		if s.n >= active {
			break
		}
		old := maxAge > 0 && now.Sub(s.mod) > maxAge
		big := maxSize > 0 && total > maxSize
		if !old && !big {
			keep = s.n
			break
		}
		if err := os.Remove(filepath.Join(dir, segName(s.n))); err != nil {
			return 0, err
		}
		total -= s.size
	}
	return keep, nil
}
