package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// UploadBatch is a batch upload in progress (POST /v1/files/batch): Add
// each file, then Commit, or Abort. None of the files is in place before
// the commit, and a batch that is not committed leaves the sandbox as it
// was. Its methods are called from one goroutine.
type UploadBatch struct {
	pw  *io.PipeWriter
	buf []byte
	// done is closed once the agent's result is read (it may come before
	// the commit: the agent's failure), with res and err.
	done chan struct{}
	res  []FileInfo
	err  error
}

// StartUpload begins a batch upload. An agent older than batch uploads (a
// sandbox paused across an upgrade) answers errors.ErrUnsupported, having
// been sent nothing.
func (c *Client) StartUpload(ctx context.Context) (*UploadBatch, error) {
	pr, pw := io.Pipe()
	// The hello waits for the agent's 100 Continue: an agent that has no
	// batch uploads answers 404 without reading the body (nor waiting for
	// its end, which comes no sooner than the commit).
	hello := make(chan error, 1)
	go func() {
		_, err := pw.Write([]byte{frameHello, 0, 0, 0, 0})
		hello <- err
	}()
	resp, err := c.doWith(ctx, http.MethodPost, "/v1/files/batch", nil, pr, http.Header{"Expect": {"100-continue"}})
	if err != nil {
		pw.CloseWithError(err)
		<-hello
		if ae := (*Error)(nil); errors.As(err, &ae) && ae.Code == "" && errors.Is(err, errdefs.ErrNotFound) {
			return nil, fmt.Errorf("batch upload: %w", errors.ErrUnsupported)
		}
		return nil, err
	}
	// The agent answers once it has read the hello.
	<-hello
	b := &UploadBatch{pw: pw, buf: make([]byte, 5+32<<10), done: make(chan struct{})}
	go b.readResult(ctx, resp.Body)
	return b, nil
}

// readResult reads the agent's answer; one that comes before the commit
// (the agent failed) stops what is being sent.
func (b *UploadBatch) readResult(ctx context.Context, body io.ReadCloser) {
	defer close(b.done)
	defer body.Close()
	var res BatchResult
	b.err = readFrames(ctx, body, "batch upload", func(kind byte, p []byte) (bool, error) {
		if kind != frameResult {
			return false, nil
		}
		if err := json.Unmarshal(p, &res); err != nil {
			return true, fmt.Errorf("decode batch upload result: %w", err)
		}
		return true, nil
	})
	b.pw.CloseWithError(errBatchAbandoned)
	switch {
	case b.err != nil:
	case res.Error != "":
		b.err = agentError(res.Status, errorBody{Error: res.Error, Code: res.Code})
	default:
		b.res = res.Files
	}
}

// Add sends the file at path (relative: from the sandbox's working
// directory) with mode's permissions, reading it from r to its end. A read
// of r that fails is the caller's error (ErrInvalidArgument); a failure of
// the agent's is what the agent answered. After an error, call Abort.
func (b *UploadBatch) Add(path string, mode os.FileMode, r io.Reader) error {
	h, err := json.Marshal(BatchFile{Path: path, Mode: uint32(mode.Perm())})
	if err != nil {
		return fmt.Errorf("encode batch file header: %w", err)
	}
	if err := b.send(frameFile, h); err != nil {
		return err
	}
	for {
		n, rerr := r.Read(b.buf[5:])
		if n > 0 {
			if err := b.send(frameData, b.buf[5:5+n]); err != nil {
				return err
			}
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return errdefs.Invalid("read %s: %v", path, rerr)
		}
	}
}

// send writes one frame; one that cannot be written means that the agent
// ended the batch, and its result says why.
func (b *UploadBatch) send(kind byte, p []byte) error {
	var frame []byte
	if len(p) > 0 && &p[0] == &b.buf[5] {
		frame = b.buf[:5+len(p)]
	} else {
		frame = append(make([]byte, 5, 5+len(p)), p...)
	}
	frame[0] = kind
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(p)))
	if _, err := b.pw.Write(frame); err != nil {
		<-b.done
		if b.err != nil {
			return b.err
		}
		return fmt.Errorf("send a batch upload: %w: %w", errdefs.ErrUnavailable, err)
	}
	return nil
}

// Commit puts the files in place and describes them, in the order added.
func (b *UploadBatch) Commit() ([]FileInfo, error) {
	if err := b.send(frameCommit, nil); err != nil {
		return nil, err
	}
	b.pw.Close()
	<-b.done
	return b.res, b.err
}

// Abort gives the batch up: what it sent is removed before Abort returns
// (unless the agent cannot be reached). After Commit it does nothing.
func (b *UploadBatch) Abort() {
	_ = b.send(frameAbort, nil)
	b.pw.Close()
	<-b.done
}
