package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
)

// LLMService reads the archive of the daemon's LLM proxy: every exchange
// between a sandbox (or a run) and a model. Get it with Client.LLM.
type LLMService struct {
	c *Client
}

// LLM returns the LLM archive endpoints.
func (c *Client) LLM() *LLMService { return &LLMService{c: c} }

// LLMFilter selects exchanges; the zero value selects all.
type LLMFilter struct {
	// Sandbox, Run, Model and Conversation select the exchanges of that
	// sandbox, task run, model and conversation.
	Sandbox, Run, Model, Conversation string
	// Status is an HTTP status ("429"), a class ("4xx") or a state
	// (complete, client_gone, interrupted, in_progress).
	Status string
	// Since and Until, when not zero, select the exchanges begun at or
	// after Since and before Until.
	Since, Until time.Time
	// Limit is the page size (0: all); Cursor a page's NextCursor.
	Limit  int
	Cursor string
	// Order is the list's order: "" (the daemon's default) or
	// api.OrderAsc oldest first, api.OrderDesc newest first.
	Order api.Order
}

func (f LLMFilter) query() url.Values {
	q := pageQuery(f.Limit, f.Cursor, f.Order)
	for k, v := range map[string]string{
		"sandbox": f.Sandbox, "run": f.Run, "model": f.Model, "conversation": f.Conversation, "status": f.Status,
	} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.Format(time.RFC3339Nano))
	}
	return q
}

func exchangePath(id string) (string, error) {
	if id == "" {
		return "", invalidf("exchange id is empty")
	}
	return "/llm/exchanges/" + url.PathEscape(id), nil
}

// List returns a page of the exchanges f selects, oldest first unless
// f.Order says otherwise.
func (s *LLMService) List(ctx context.Context, f LLMFilter) (*api.LLMExchangeList, error) {
	var out api.LLMExchangeList
	if err := s.c.doJSONQuery(ctx, http.MethodGet, "/llm/exchanges", f.query(), nil, &out); err != nil {
		return nil, wrapf(err, "list LLM exchanges")
	}
	return &out, nil
}

// Get returns an exchange with its parts; an unknown one is ErrNotFound.
func (s *LLMService) Get(ctx context.Context, id string) (*api.LLMExchangeDetail, error) {
	p, err := exchangePath(id)
	if err != nil {
		return nil, err
	}
	var out api.LLMExchangeDetail
	if err := s.c.doJSON(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, wrapf(err, "get LLM exchange %s", id)
	}
	return &out, nil
}

// Raw returns one part of an exchange (api.LLMPartRequest…) exactly as it
// passed.
func (s *LLMService) Raw(ctx context.Context, id, part string) ([]byte, error) {
	p, err := exchangePath(id)
	if err != nil {
		return nil, err
	}
	b, err := s.c.getBytes(ctx, p, url.Values{"raw": {part}})
	if err != nil {
		return nil, wrapf(err, "get %s of LLM exchange %s", part, id)
	}
	return b, nil
}

// Export writes the exchanges f selects, with their parts, to w as JSON
// Lines as the daemon streams them, and returns how many.
func (s *LLMService) Export(ctx context.Context, f LLMFilter, w io.Writer) (int, error) {
	resp, err := s.c.send(ctx, http.MethodGet, apiPrefix+"/llm/exchanges/export", f.query(), nil, "")
	if err != nil {
		return 0, wrapf(err, "export LLM exchanges")
	}
	defer resp.Body.Close()
	n := 0
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				return n, fmt.Errorf("export LLM exchanges: the stream was cut after %d exchanges", n)
			}
			if _, werr := w.Write(line); werr != nil {
				return n, fmt.Errorf("export LLM exchanges: %w", werr)
			}
			n++
		}
		switch {
		case errors.Is(err, io.EOF):
			return n, nil
		case err != nil:
			return n, wrapf(err, "export LLM exchanges: cut after %d exchanges", n)
		}
	}
}

// ExportEach calls fn with each exchange f selects, decoded, as the
// daemon streams them.
func (s *LLMService) ExportEach(ctx context.Context, f LLMFilter, fn func(*api.LLMExchangeDetail) error) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := s.Export(ctx, f, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	dec := json.NewDecoder(pr)
	for {
		var d api.LLMExchangeDetail
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return <-done
		}
		if err == nil {
			err = fn(&d)
		}
		if err != nil {
			pr.CloseWithError(err)
			<-done
			return err
		}
	}
}

// LLMFollowFrom says where Follow begins: after After (the cursor Follow
// gave with an exchange, or a list's FollowCursor); else with the Last
// exchanges that ended before it; else with those that end after it.
type LLMFollowFrom struct {
	// After is a cursor: Follow begins with the exchange after it.
	After string
	// Last, without After, begins with the Last exchanges that ended
	// before the call.
	Last int
}

// Follow calls fn with each exchange f selects as it ends, in the order
// they end, with the cursor that resumes after it (LLMFollowFrom.After),
// until ctx ends (then it returns nil), fn fails (its error), or the
// stream does (ErrUnavailable when the daemon shuts down: follow again
// after the last cursor). f's Limit, Cursor and Order must be unset: they
// page lists.
func (s *LLMService) Follow(ctx context.Context, f LLMFilter, from LLMFollowFrom, fn func(cursor string, x api.LLMExchange) error) error {
	q := f.query()
	if from.After != "" {
		q.Set("after", from.After)
	}
	if from.Last > 0 {
		q.Set("last", strconv.Itoa(from.Last))
	}
	resp, err := s.c.send(ctx, http.MethodGet, apiPrefix+"/llm/exchanges/stream", q, nil, "")
	if err != nil && ctx.Err() != nil {
		return nil // ended before the stream began: as after
	}
	if err != nil {
		return wrapf(err, "follow LLM exchanges")
	}
	defer resp.Body.Close()
	events := sse.NewReader(resp.Body)
	for {
		ev, err := events.Next()
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case errors.Is(err, io.EOF):
			return errors.New("follow LLM exchanges: the daemon ended the stream")
		case err != nil:
			return wrapf(err, "follow LLM exchanges")
		}
		switch ev.Name {
		case api.LLMEventExchange:
			var x api.LLMExchange
			if err := json.Unmarshal(ev.Data, &x); err != nil {
				return wrapf(err, "decode LLM exchange event")
			}
			if err := fn(ev.ID, x); err != nil {
				return err
			}
		case "error":
			return wrapf(streamError(ev.Data), "follow LLM exchanges")
		}
	}
}

// Conversations returns a sandbox's exchanges grouped into conversations.
func (s *LLMService) Conversations(ctx context.Context, sandboxID string) ([]api.LLMConversation, error) {
	p, err := sandboxPath(sandboxID, "/conversations")
	if err != nil {
		return nil, wrapf(err, "list conversations")
	}
	var out api.LLMConversationList
	if err := s.c.doJSON(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, wrapf(err, "list conversations of sandbox %s", sandboxID)
	}
	return out.Items, nil
}
