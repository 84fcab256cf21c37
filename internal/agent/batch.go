package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// A batch upload (POST /v1/files/batch) writes several files as one
// change. The request body is a stream of frames: frameHello, then per
// file a frameFile header (BatchFile, JSON) and its bytes in frameData
// frames; then frameCommit, or frameAbort to give up. Each file is written beside its
// place under a hidden name as it arrives; the commit renames them all
// into place, in order. A batch that fails, is given up, or whose body
// ends without a commit removes what it wrote, the directories it made
// included: what was at the files' paths is left as it was. The answer is
// 200 once the hello is read (so the client knows that this agent takes
// batches before it sends a file: the request asks for 100 Continue, and
// an agent without them answers 404 without reading), then one
// frameResult frame (BatchResult).
const (
	frameHello  byte = 'h'
	frameFile   byte = 'f'
	frameData   byte = 'd'
	frameCommit byte = 'c'
	frameAbort  byte = 'a'
)

// maxBatchFiles bounds the files of one batch.
const maxBatchFiles = 100_000

// BatchFile is the header of one file of a batch upload.
type BatchFile struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode"` // permission bits
}

// BatchResult ends a batch upload's answer: the files written, or why
// none was (Status and Code as an error response's).
type BatchResult struct {
	Files  []FileInfo `json:"files,omitempty"`
	Status int        `json:"status,omitempty"`
	Code   string     `json:"code,omitempty"`
	Error  string     `json:"error,omitempty"`
}

// errBatchAbandoned ends a batch whose client gave it up.
var errBatchAbandoned = errors.New("the upload was abandoned")

func (s *Server) handleUploadBatch(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if err := rc.EnableFullDuplex(); err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL", err)
		return
	}
	// See handleExec: a body left unread must be closed before returning.
	defer r.Body.Close()
	body := bufio.NewReaderSize(r.Body, 4<<10)
	if kind, _, err := readFrame(body, nil); err != nil || kind != frameHello {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", errors.New("a batch upload starts with its hello"))
		return
	}
	w.Header().Set("Content-Type", "application/x-agent2env-frames")
	w.WriteHeader(http.StatusOK)
	if r.Header.Get("Expect") != "" {
		// A client that asked whether batches are taken waits for this.
		_ = rc.Flush()
	}
	b := &batch{s: s}
	var res BatchResult
	err := b.read(body)
	if err == nil {
		res.Files, err = b.commit()
	}
	if err != nil {
		b.abort()
		res.Status, res.Code = fsErrorStatus(err)
		var bad *badBatch
		switch {
		case errors.As(err, &bad):
			res.Status, res.Code = http.StatusBadRequest, "INVALID_REQUEST"
		case errors.Is(err, errBatchAbandoned):
			res.Status, res.Code = http.StatusBadRequest, "ABANDONED"
		}
		res.Error = err.Error()
	}
	out, _ := json.Marshal(res)
	if writeFrame(w, frameResult, out) != nil || rc.Flush() != nil {
		return
	}
	// A client still sending (the batch failed midway) stops once it has
	// read the result: until then what it sends is read and dropped, so
	// that no reset of the connection loses the result on its way.
	_ = rc.SetReadDeadline(time.Now().Add(batchDrain))
	_, _ = io.Copy(io.Discard, r.Body)
}

// batchDrain bounds the wait for a client that goes on sending after its
// batch ended.
const batchDrain = 5 * time.Second

// badBatch is a batch's stream that does not follow the protocol.
type badBatch struct{ err error }

func (e *badBatch) Error() string { return "upload batch: " + e.err.Error() }
func (e *badBatch) Unwrap() error { return e.err }

// batch is the state of one batch upload: the files staged so far and
// the directories made for them.
type batch struct {
	s      *Server
	staged []staged
	cur    *os.File // the file being written, the last staged
	dirs   []string // made for the batch, parents first
}

// staged is a file written under a hidden name beside its place.
type staged struct {
	tmp, path string
	mode      os.FileMode
}

// read takes the batch's frames until its commit.
func (b *batch) read(r io.Reader) error {
	var buf []byte
	for {
		kind, p, err := readFrame(r, buf)
		if err != nil {
			return &badBatch{fmt.Errorf("the stream ended before its commit: %w", err)}
		}
		buf = p[:0]
		switch kind {
		case frameFile:
			if err := b.closeCurrent(); err != nil {
				return err
			}
			var h BatchFile
			if err := json.Unmarshal(p, &h); err != nil {
				return &badBatch{fmt.Errorf("file header: %w", err)}
			}
			if err := b.open(h); err != nil {
				return err
			}
		case frameData:
			if b.cur == nil {
				return &badBatch{errors.New("data before a file header")}
			}
			if _, err := b.cur.Write(p); err != nil {
				return fmt.Errorf("write %s: %w", b.staged[len(b.staged)-1].path, err)
			}
		case frameCommit:
			return b.closeCurrent()
		case frameAbort:
			return errBatchAbandoned
		default:
			return &badBatch{fmt.Errorf("unknown frame %q", kind)}
		}
	}
}

// open stages the file h names: its directory made if missing, refused
// if a directory is in its place.
func (b *batch) open(h BatchFile) error {
	if len(b.staged) == maxBatchFiles {
		return &badBatch{fmt.Errorf("more than %d files", maxBatchFiles)}
	}
	p, err := b.s.cleanPath(h.Path)
	if err != nil {
		return &badBatch{err}
	}
	if h.Mode > 0o777 {
		return &badBatch{fmt.Errorf("mode %o of %s is not a permission", h.Mode, p)}
	}
	err = b.s.asUser(func() error {
		if err := b.mkdirs(filepath.Dir(p)); err != nil {
			return err
		}
		f, err := createUploadTemp(p)
		if err != nil {
			return err
		}
		b.cur = f
		b.staged = append(b.staged, staged{tmp: f.Name(), path: p, mode: os.FileMode(h.Mode)})
		return nil
	})
	return err // naming p, or the directory it could not make
}

// mkdirs makes dir and its missing parents, noting each it made.
func (b *batch) mkdirs(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == "/" {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		b.dirs = append(b.dirs, missing[i])
	}
	return nil
}

// closeCurrent closes the file being written.
func (b *batch) closeCurrent() error {
	if b.cur == nil {
		return nil
	}
	err := b.cur.Close()
	b.cur = nil
	if err != nil {
		return fmt.Errorf("write %s: %w", b.staged[len(b.staged)-1].path, err)
	}
	return nil
}

// commit puts the staged files in place, in order, and describes them.
// A rename that fails (something made a directory in a file's place
// meanwhile) leaves the files before it in place and removes the rest.
func (b *batch) commit() ([]FileInfo, error) {
	out := make([]FileInfo, 0, len(b.staged))
	for len(b.staged) > 0 {
		f := b.staged[0]
		var fi FileInfo
		err := b.s.asUser(func() error {
			if err := os.Chmod(f.tmp, f.mode); err != nil {
				return err
			}
			if err := os.Rename(f.tmp, f.path); err != nil {
				return err
			}
			var err error
			fi, err = stat(f.path, false)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", f.path, err)
		}
		b.staged = b.staged[1:]
		out = append(out, fi)
	}
	return out, nil
}

// abort removes what the batch has not put in place and the directories
// it made that are left empty.
func (b *batch) abort() {
	_ = b.closeCurrent()
	_ = b.s.asUser(func() error {
		for _, f := range b.staged {
			_ = os.Remove(f.tmp)
		}
		for i := len(b.dirs) - 1; i >= 0; i-- {
			_ = os.Remove(b.dirs[i])
		}
		return nil
	})
	b.staged, b.dirs = nil, nil
}
