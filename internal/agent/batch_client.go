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
	c  *Client
	pw *io.PipeWriter
	// buf is what is read of a file; out the frames not yet sent, sent
	// with the next data or the batch's end, in one write.
	buf, out []byte
	// done is closed once the agent's result is read (it may come before
	// the commit: the agent's failure), with res and err.
	done chan struct{}
	res  []FileInfo
	err  error
}

// What a Client knows of its agent's batch uploads.
const (
	batchesUnknown = iota
	batchesTaken
	batchesRefused
)

// StartUpload begins a batch upload. An agent older than batch uploads (a
// sandbox paused across an upgrade) answers errors.ErrUnsupported, having
// been sent nothing.
func (c *Client) StartUpload(ctx context.Context) (*UploadBatch, error) {
	known := c.batches.Load()
	if known == batchesRefused {
		return nil, fmt.Errorf("batch upload: %w", errors.ErrUnsupported)
	}
	b := &UploadBatch{c: c, buf: make([]byte, 32<<10), done: make(chan struct{})}
	pr, pw := io.Pipe()
	b.pw = pw
	// The transport waits for the body's writer before it gives up on a
	// cancelled request, and that writer waits for the next file.
	stop := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	// The first batch asks whether the agent takes them: its body waits
	// for the agent's 100 Continue, which an agent without them never
	// sends (it answers 404 without reading the body, nor waiting for its
	// end, which comes no sooner than the commit). The hello is what it
	// reads to send it; its answer comes after the hello.
	var h http.Header
	if known == batchesUnknown {
		h = http.Header{"Expect": {"100-continue"}}
	}
	answered := make(chan error, 1)
	go func() {
		defer stop()
		resp, err := c.doWith(ctx, http.MethodPost, "/v1/files/batch", nil, pr, h)
		answered <- err
		if err != nil {
			b.err = err
			pw.CloseWithError(err)
			close(b.done)
			return
		}
		b.readResult(ctx, resp.Body)
	}()
	hello := []byte{frameHello, 0, 0, 0, 0}
	if known == batchesTaken {
		// Nothing to wait for: the hello goes with the first file, and a
		// failure to start is the first send's.
		b.out = append(b.out, hello...)
		return b, nil
	}
	sent := make(chan error, 1)
	go func() {
		_, err := pw.Write(hello)
		sent <- err
	}()
	if err := <-answered; err != nil {
		<-sent
		if errors.Is(err, ErrOlderAgent) {
			c.batches.Store(batchesRefused)
			return nil, fmt.Errorf("batch upload: %w", errors.ErrUnsupported)
		}
		return nil, err
	}
	c.batches.Store(batchesTaken)
	<-sent // read by the agent before it answered
	return b, nil
}

// readResult reads the agent's answer; one that comes before the commit
// (the agent failed) stops what is being sent.
func (b *UploadBatch) readResult(ctx context.Context, body io.ReadCloser) {
	defer close(b.done)
	defer body.Close()
	var res BatchResult
	b.err = b.c.readFrames(ctx, body, "batch upload", func(kind byte, p []byte) (bool, error) {
		if kind != frameResult {
			return false, nil
		}
		if err := json.Unmarshal(p, &res); err != nil {
			return true, fmt.Errorf("decode batch upload result: %w", err)
		}
		return true, nil
	})
	b.pw.CloseWithError(errBatchAbandoned)
	// The answer's end comes once the agent has read the request's: read
	// to it, so that the connection goes back to the pool.
	_, _ = io.Copy(io.Discard, body)
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
	b.queue(frameFile, h)
	for {
		n, rerr := r.Read(b.buf)
		if n > 0 {
			b.queue(frameData, b.buf[:n])
			if err := b.flush(); err != nil {
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

// queue adds a frame to what is to be sent.
func (b *UploadBatch) queue(kind byte, p []byte) {
	var hdr [5]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(p)))
	b.out = append(append(b.out, hdr[:]...), p...)
}

// flush sends the queued frames; a write that fails means that the agent
// ended the batch, and its result says why.
func (b *UploadBatch) flush() error {
	_, err := b.pw.Write(b.out)
	b.out = b.out[:0]
	if err != nil {
		<-b.done
		if b.err != nil {
			return b.err
		}
		return b.c.lost("send a batch upload", err)
	}
	return nil
}

// Commit puts the files in place and describes them, in the order added.
func (b *UploadBatch) Commit() ([]FileInfo, error) {
	b.queue(frameCommit, nil)
	if err := b.flush(); err != nil {
		return nil, err
	}
	b.pw.Close()
	<-b.done
	return b.res, b.err
}

// Abort gives the batch up: what it sent is removed before Abort returns
// (unless the agent cannot be reached). After Commit it does nothing.
func (b *UploadBatch) Abort() {
	b.queue(frameAbort, nil)
	_ = b.flush()
	b.pw.Close()
	<-b.done
}
