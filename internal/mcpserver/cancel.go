package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Cancellation over stateless HTTP. Before protocol 2026-07-28 a client
// cancels a call with a notifications/cancelled of its own POST, which a
// stateless server sees in a session of its own, where the call is
// unknown; and the SDK does not end a call whose client went away. So the
// handler keeps the tools/call requests in flight by caller and request
// id, and ends one when its caller cancels it or drops its request.
//
// A caller is the API key, address and user agent of the request; ids are
// the client's, so a cancellation that matches more than one call in
// flight is ignored rather than guessed at.

// callKey names a call in flight.
type callKey struct {
	caller string
	id     string // the JSON-RPC id, as JSON
}

// inflight is the calls in flight, each with the channel that cancels it.
// The zero value is ready.
type inflight struct {
	mu    sync.Mutex
	calls map[callKey][]chan struct{}
}

func (f *inflight) add(k callKey, ch chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[callKey][]chan struct{}{}
	}
	f.calls[k] = append(f.calls[k], ch)
}

func (f *inflight) remove(k callKey, ch chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	chs := f.calls[k]
	for i, c := range chs {
		if c == ch {
			chs = append(chs[:i], chs[i+1:]...)
			break
		}
	}
	if len(chs) == 0 {
		delete(f.calls, k)
	} else {
		f.calls[k] = chs
	}
}

// cancel ends the call k names, if exactly one does.
func (f *inflight) cancel(k callKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls[k]) != 1 {
		return false
	}
	closeOnce(f.calls[k][0])
	return true
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// message is what the handler reads of a JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
}

type cancelSignalKey struct{}

// trackCalls wraps the SDK's handler: it registers each tools/call POST
// for cancellation and carries its cancel channel in the request context
// to the tool (withCancelSignal), and applies notifications/cancelled.
func (s *Server) trackCalls(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			writeRPCError(w, http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("the request is larger than the MCP server's limit of %d bytes", tooLarge.Limit))
			return
		case err != nil:
			writeRPCError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, fmt.Sprintf("read the request: %v", err))
			return
		}
		if !json.Valid(body) {
			// The SDK's answer would be text: JSON-RPC's is a parse error.
			writeRPCError(w, http.StatusBadRequest, jsonrpc.CodeParseError, fmt.Sprintf("the request is not JSON: %v", json.Unmarshal(body, new(any))))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m message
		if json.Unmarshal(body, &m) != nil { // a batch: the SDK answers it
			next.ServeHTTP(w, r)
			return
		}
		caller := callerOf(r)
		switch {
		case m.Method == "notifications/cancelled" && len(m.Params.RequestID) > 0:
			if s.calls.cancel(callKey{caller, string(m.Params.RequestID)}) {
				s.cfg.Log.Debug("mcp call cancelled", "request", string(m.Params.RequestID))
			}
		case m.Method == "tools/call" && len(m.ID) > 0:
			k, ch := callKey{caller, string(m.ID)}, make(chan struct{})
			s.calls.add(k, ch)
			defer s.calls.remove(k, ch)
			stop := context.AfterFunc(r.Context(), func() { closeOnce(ch) }) // the client went away
			defer stop()
			r = r.WithContext(context.WithValue(r.Context(), cancelSignalKey{}, (<-chan struct{})(ch)))
			h := &held{}
			defer h.release() // the response is written: its result's copies are gone
			r = r.WithContext(context.WithValue(r.Context(), heldKey{}, h))
		}
		next.ServeHTTP(w, r)
	})
}

// writeRPCError answers a request the server could not read with a
// JSON-RPC error of code and message (its id unknown: null), as MCP
// clients parse every answer.
func writeRPCError(w http.ResponseWriter, status int, code int64, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": message}})
}

// callerOf names who sent a request, as far as an HTTP request can say.
func callerOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return r.Header.Get("Authorization") + "\x00" + host + "\x00" + r.UserAgent()
}

// withCancelSignal returns ctx cancelled when the call's cancel channel
// closes, if the request has one, and its release.
func withCancelSignal(ctx context.Context) (context.Context, context.CancelFunc) {
	ch, ok := ctx.Value(cancelSignalKey{}).(<-chan struct{})
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
