package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lineTransport is MCP over newline-delimited JSON-RPC on in and out (the
// stdio transport), whose input lines that are no JSON-RPC message are
// answered, with the JSON-RPC error for each (parse error, invalid
// request, a line too long), and skipped. The SDK ends the session at the
// first such line, leaving every request after it unanswered: one stray
// line from a client ended `agent2env mcp`.
func lineTransport(in io.ReadCloser, out io.WriteCloser, maxLine int, log *slog.Logger) mcp.Transport {
	w := &lockedWriter{w: out}
	return &mcp.IOTransport{Reader: &frameFilter{in: bufio.NewReader(in), closer: in, out: w, max: maxLine, log: log},
		Writer: w, MaxLineLength: maxLine}
}

// lockedWriter writes each message whole: the SDK's and the filter's
// answers go to one output. The SDK writes a message in one Write.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return l.w.Close() }

// frameFilter passes the lines of in that are JSON-RPC messages (or
// batches of them) on, and answers the others on out.
type frameFilter struct {
	in     *bufio.Reader
	closer io.Closer
	out    *lockedWriter
	max    int // the longest line passed, in bytes
	log    *slog.Logger
	rest   []byte // of the line being passed
	err    error  // in's, once it has failed
}

func (f *frameFilter) Read(p []byte) (int, error) {
	for len(f.rest) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		var line []byte
		var long bool
		line, long, f.err = f.readLine()
		line = bytes.TrimSpace(line)
		switch {
		case long:
			f.refuse(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: a message is longer than the limit of %d bytes", f.max))
		case len(line) == 0:
		default:
			if id, code, msg := check(line); msg != "" {
				f.refuse(id, code, msg)
			} else {
				f.rest = append(line, '\n')
			}
		}
	}
	n := copy(p, f.rest)
	f.rest = f.rest[n:]
	return n, nil
}

func (f *frameFilter) Close() error { return f.closer.Close() }

// readLine reads the next line, newline and all; long says it was longer
// than f.max, and is dropped whole.
func (f *frameFilter) readLine() (line []byte, long bool, _ error) {
	for {
		part, err := f.in.ReadSlice('\n')
		if !long {
			line = append(line, part...)
			if len(line) > f.max {
				line, long = nil, true
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, long, err
		}
	}
}

// check says what is wrong with line as a JSON-RPC message or batch: the
// id to answer (nil when it has none), the error's code and message;
// message "" when nothing is.
func check(line []byte) (id any, code int64, message string) {
	if !json.Valid(line) {
		return nil, jsonrpc.CodeParseError, "parse error: a line that is not JSON"
	}
	if line[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(line, &batch) != nil || len(batch) == 0 {
			return nil, jsonrpc.CodeInvalidRequest, "invalid request: an empty batch, or one that is no list"
		}
		for i, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: message %d of the batch: %v", i, err)
			}
		}
		return nil, 0, ""
	}
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		var m struct {
			ID any `json:"id"`
		}
		_ = json.Unmarshal(line, &m)
		if _, bad := jsonrpc.MakeID(m.ID); bad != nil {
			m.ID = nil
		}
		return m.ID, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: %v", err)
	}
	return nil, 0, ""
}

// refuse answers a line with a JSON-RPC error.
func (f *frameFilter) refuse(id any, code int64, message string) {
	f.log.Debug("mcp input line refused", "code", code, "err", message)
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
	if err == nil {
		_, err = f.out.Write(append(b, '\n'))
	}
	if err != nil {
		f.log.Debug("answer a refused mcp input line", "err", err)
	}
}
