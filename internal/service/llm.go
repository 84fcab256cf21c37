package service

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/store"
)

// LLMArchive is what LLMExchanges reads: the LLM proxy's archive
// (*archive.Archive).
type LLMArchive interface {
	List(ctx context.Context, f store.LLMExchangeFilter, p store.Page) ([]*store.LLMExchange, string, error)
	Get(ctx context.Context, id string) (*store.LLMExchange, error)
	Read(ctx context.Context, x *store.LLMExchange) (*archive.Exchange, error)
	ListEnded(ctx context.Context, f store.LLMExchangeFilter, after int64, limit int) ([]*store.LLMExchange, error)
	EndedMark(ctx context.Context, f store.LLMExchangeFilter, skip int) (int64, error)
	Indexed() <-chan struct{}
}

// LLMExchanges reads the LLM proxy's archive: exchanges, their parts,
// exports, conversations and a live feed of those that end. A request
// with a tenant (auth.TenantOf: the daemon has API keys) reads only the
// exchanges of its tenant and those of no tenant (the calls of a sandbox
// that is no task run's: sandboxes are every key's to reach); one without
// reads all.
type LLMExchanges struct {
	a        LLMArchive
	stop     chan struct{} // closed by EndFollows
	stopOnce sync.Once
}

// NewLLMExchanges returns the service over a.
func NewLLMExchanges(a LLMArchive) *LLMExchanges {
	return &LLMExchanges{a: a, stop: make(chan struct{})}
}

// EndFollows ends the follows running, and any begun later, with
// ErrUnavailable: the daemon is shutting down and must not wait for
// streams that never end on their own. Calling it again does nothing.
func (s *LLMExchanges) EndFollows() { s.stopOnce.Do(func() { close(s.stop) }) }

var errFollowEnded = errdefs.Unavailable("the daemon is shutting down: follow again, after the last event's id, once it is back")

// LLMFilter selects exchanges, as the API's query parameters give it.
type LLMFilter struct {
	SandboxID, RunID, Model, Conversation string
	// Status is an HTTP status (429), a class (4xx), or a state
	// (complete, client_gone, interrupted, in_progress).
	Status string
	// Since and Until are RFC 3339 times.
	Since, Until string
	ListOptions
}

var llmStates = []string{store.LLMInProgress, store.LLMComplete, store.LLMClientGone, store.LLMInterrupted}

// store is the store's filter and page of f, for the tenant of ctx.
func (f LLMFilter) store(ctx context.Context) (store.LLMExchangeFilter, store.Page, error) {
	out := store.LLMExchangeFilter{SandboxID: f.SandboxID, RunID: f.RunID, Model: f.Model, Conversation: f.Conversation}
	out.Tenant = auth.TenantOf(ctx)
	out.ByTenant = out.Tenant != ""
	p, err := Page(f.Limit, f.Cursor, f.Order)
	if err != nil {
		return out, p, err
	}
	switch s := f.Status; {
	case s == "":
	case slices.Contains(llmStates, s):
		out.State = s
	case len(s) == 3 && s[1:] == "xx" && s[0] >= '1' && s[0] <= '5':
		out.StatusMin = int(s[0]-'0') * 100
		out.StatusMax = out.StatusMin + 99
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 || n > 599 {
			return out, p, errdefs.Invalid("status %q: want an HTTP status (429), a class (4xx) or a state (%s)", s, strings.Join(llmStates, ", "))
		}
		out.StatusMin, out.StatusMax = n, n
	}
	for _, t := range []struct {
		name, v string
		dst     *time.Time
	}{{"since", f.Since, &out.Since}, {"until", f.Until, &out.Until}} {
		if t.v == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, t.v)
		if err != nil {
			return out, p, errdefs.Invalid("%s %q: want an RFC 3339 time (2006-01-02T15:04:05Z)", t.name, t.v)
		}
		*t.dst = at
	}
	if !out.Since.IsZero() && !out.Until.IsZero() && !out.Since.Before(out.Until) {
		return out, p, errdefs.Invalid("since %s is not before until %s", f.Since, f.Until)
	}
	return out, p, nil
}

// List returns a page of the exchanges f selects, oldest first unless
// f.Order says otherwise.
func (s *LLMExchanges) List(ctx context.Context, f LLMFilter) (*api.LLMExchangeList, error) {
	sf, p, err := f.store(ctx)
	if err != nil {
		return nil, err
	}
	xs, next, err := s.a.List(ctx, sf, p)
	if err != nil {
		return nil, err
	}
	out := &api.LLMExchangeList{Items: make([]api.LLMExchange, len(xs)), NextCursor: next}
	for i, x := range xs {
		out.Items[i] = llmExchange(x)
	}
	return out, nil
}

// Get returns exchange id with its parts.
func (s *LLMExchanges) Get(ctx context.Context, id string) (*api.LLMExchangeDetail, error) {
	x, err := s.read(ctx, id)
	if err != nil {
		return nil, err
	}
	return llmDetail(x), nil
}

func (s *LLMExchanges) read(ctx context.Context, id string) (*archive.Exchange, error) {
	x, err := s.a.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if t := auth.TenantOf(ctx); t != "" && x.Tenant != "" && x.Tenant != t {
		// Another key's: as if there were none (store's message).
		return nil, errdefs.NotFound("LLM exchange %s not found", id)
	}
	return s.a.Read(ctx, x)
}

// CheckPart refuses a part name that is not one.
func CheckPart(part string) error {
	switch part {
	case api.LLMPartRequest, api.LLMPartUpstreamRequest, api.LLMPartUpstreamResponse, api.LLMPartResponse:
		return nil
	}
	return errdefs.Invalid("raw %q: want request, upstream_request, upstream_response or response", part)
}

// Raw returns one part of exchange id as it passed: its body's bytes and
// its Content-Type. A part that never happened is ErrNotFound.
func (s *LLMExchanges) Raw(ctx context.Context, id, part string) (contentType string, body []byte, err error) {
	if err := CheckPart(part); err != nil {
		return "", nil, err
	}
	x, err := s.read(ctx, id)
	if err != nil {
		return "", nil, err
	}
	var m *archive.Message
	switch up := x.Upstream(); part {
	case api.LLMPartRequest:
		m = &x.Request
	case api.LLMPartUpstreamRequest:
		if up != nil {
			m = &up.Request
		}
	case api.LLMPartUpstreamResponse:
		if up != nil {
			m = up.Response
		}
	case api.LLMPartResponse:
		m = x.Response
	}
	if m == nil {
		return "", nil, errdefs.NotFound("LLM exchange %s has no %s", id, part)
	}
	ct := http.Header(m.Header).Get("Content-Type")
	if ct == "" {
		ct = "application/octet-stream"
	}
	return ct, m.Body, nil
}

// Export calls emit with each exchange f selects, with its parts, oldest
// first unless f.Order says otherwise, reading a page at a time; f's limit
// is the page size.
func (s *LLMExchanges) Export(ctx context.Context, f LLMFilter, emit func(*api.LLMExchangeDetail) error) error {
	sf, p, err := f.store(ctx)
	if err != nil {
		return err
	}
	if p.Limit == 0 {
		p.Limit = 100
	}
	for {
		xs, next, err := s.a.List(ctx, sf, p)
		if err != nil {
			return err
		}
		for _, x := range xs {
			rx, err := s.a.Read(ctx, x)
			if err != nil {
				return err
			}
			if err := emit(llmDetail(rx)); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		p.After = next
	}
}

// CheckExport refuses a bad filter before an export commits to a
// response.
func (s *LLMExchanges) CheckExport(ctx context.Context, f LLMFilter) error {
	_, _, err := f.store(ctx)
	return err
}

// LLMFollowFrom says where a follow of the archive begins: after Cursor,
// the id of an event a follow sent (or a list's followCursor); else with
// the Last exchanges that ended before it began; else with those that end
// after it began.
type LLMFollowFrom struct {
	Cursor string
	Last   int
}

// MaxLLMFollowLast bounds LLMFollowFrom.Last.
const MaxLLMFollowLast = 10_000

// followPage is how many exchanges a follow reads at a time.
const followPage = 100

// Follow checks f and from, then returns the follow itself: it calls emit
// with each exchange f selects as it ends (is stored no longer in
// progress), in the order they end, with the cursor that resumes after
// it, until ctx ends (then nil) or emit fails. It learns of new exchanges
// from the archive's index as it stores them: no polling.
func (s *LLMExchanges) Follow(ctx context.Context, f LLMFilter, from LLMFollowFrom) (func(ctx context.Context, emit func(cursor string, x *api.LLMExchange) error) error, error) {
	if f.Cursor != "" || f.Limit != nil || f.Order != "" {
		return nil, errdefs.Invalid("cursor, limit and order page a list; a follow sends exchanges in the order they end and resumes after an event's id (Last-Event-ID or after)")
	}
	sf, _, err := f.store(ctx)
	if err != nil {
		return nil, err
	}
	if sf.State == store.LLMInProgress {
		return nil, errdefs.Invalid("status %q: a follow sends exchanges as they end", f.Status)
	}
	var after int64
	switch {
	case from.Cursor != "":
		if after, err = strconv.ParseInt(from.Cursor, 10, 64); err != nil || after < 0 {
			return nil, errdefs.Invalid("cursor %q: want the id of an event of a follow, or a list's followCursor", from.Cursor)
		}
	case from.Last < 0 || from.Last > MaxLLMFollowLast:
		return nil, errdefs.Invalid("last %d: want a number from 0 to %d", from.Last, MaxLLMFollowLast)
	default:
		if after, err = s.a.EndedMark(ctx, sf, from.Last); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context, emit func(string, *api.LLMExchange) error) error {
		for {
			indexed := s.a.Indexed() // before the read: a batch stored during it wakes the wait
			xs, err := s.a.ListEnded(ctx, sf, after, followPage)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			for _, x := range xs {
				e := llmExchange(x)
				if err := emit(strconv.FormatInt(x.Ended, 10), &e); err != nil {
					return err
				}
				after = x.Ended
			}
			if len(xs) == followPage {
				continue
			}
			select {
			case <-ctx.Done():
				return nil
			case <-s.stop:
				return errFollowEnded
			case <-indexed:
			}
		}
	}, nil
}

// FollowCursor is the cursor a follow resumes at to send what ends after
// now (api.LLMExchangeList.FollowCursor).
func (s *LLMExchanges) FollowCursor(ctx context.Context) (string, error) {
	mark, err := s.a.EndedMark(ctx, store.LLMExchangeFilter{}, 0)
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(mark, 10), nil
}

// Conversations returns the exchanges of sandbox id grouped into
// conversations, oldest first. A sandbox with none (or gone) has none.
func (s *LLMExchanges) Conversations(ctx context.Context, sandboxID string) (*api.LLMConversationList, error) {
	out := &api.LLMConversationList{Items: []api.LLMConversation{}}
	at := map[string]int{}
	for p := (store.Page{Limit: api.MaxPageSize}); ; {
		t := auth.TenantOf(ctx)
		xs, next, err := s.a.List(ctx, store.LLMExchangeFilter{SandboxID: sandboxID, ByTenant: t != "", Tenant: t}, p)
		if err != nil {
			return nil, err
		}
		for _, x := range xs {
			id := x.Conversation
			if id == "" {
				id = x.ID
			}
			i, ok := at[id]
			if !ok {
				i = len(out.Items)
				at[id] = i
				out.Items = append(out.Items, api.LLMConversation{ID: id, SandboxID: x.SandboxID, RunID: x.RunID, StartedAt: x.CreatedAt})
			}
			c := &out.Items[i]
			e := llmExchange(x)
			c.Exchanges = append(c.Exchanges, e)
			c.LastAt = x.CreatedAt
			c.Usage.InputTokens += e.Usage.InputTokens
			c.Usage.OutputTokens += e.Usage.OutputTokens
			c.Usage.CachedTokens += e.Usage.CachedTokens
			c.Usage.ReasoningTokens += e.Usage.ReasoningTokens
		}
		if next == "" {
			return out, nil
		}
		p.After = next
	}
}

func llmExchange(x *store.LLMExchange) api.LLMExchange {
	return api.LLMExchange{
		ID: x.ID, SandboxID: x.SandboxID, RunID: x.RunID, KeyID: x.KeyID, ConversationID: x.Conversation,
		Format: x.Inbound, Method: x.Method, Path: x.Path, Model: x.Model, Provider: x.Provider, UpstreamModel: x.UpstreamModel,
		Stream: x.Stream, Passthrough: x.Passthrough, Status: x.Status, State: x.State, Error: x.Error,
		Usage: api.LLMUsage{InputTokens: x.InputTokens, OutputTokens: x.OutputTokens, CachedTokens: x.CachedTokens,
			ReasoningTokens: x.ReasoningTokens},
		Attempts: x.Attempts, TimeToFirstByteMs: ms(x.FirstByte), DurationMs: ms(x.Duration), CreatedAt: x.CreatedAt,
		RequestBytes: x.RequestBytes, ResponseBytes: x.ResponseBytes, StoredBytes: x.StoredBytes,
	}
}

func llmDetail(x *archive.Exchange) *api.LLMExchangeDetail {
	d := &api.LLMExchangeDetail{LLMExchange: llmExchange(x.LLMExchange), Request: llmMessage(&x.Request)}
	if up := x.Upstream(); up != nil {
		d.UpstreamRequest, d.UpstreamResponse = llmMessage(&up.Request), llmMessage(up.Response)
	}
	d.Response = llmMessage(x.Response)
	return d
}

func llmMessage(m *archive.Message) *api.LLMMessage {
	if m == nil {
		return nil
	}
	out := &api.LLMMessage{Method: m.Method, URL: m.URL, Status: m.Status, Headers: m.Header, Body: string(m.Body)}
	if !utf8.Valid(m.Body) {
		out.Body, out.BodyEncoding = base64.StdEncoding.EncodeToString(m.Body), "base64"
	}
	for _, c := range m.Chunks {
		out.Chunks = append(out.Chunks, api.LLMChunk{AtMs: ms(c.At), Size: c.Size})
	}
	return out
}
