package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// A sandbox restored from a snapshot runs the snapshot's agent and
// kernels, with the memory they had: the daemon tells the agent once it
// answers (POST /v1/restored), and the agent gives the kernels the ids of
// the new sandbox's contexts and fresh random state, so that copies of one
// snapshot do not draw the same numbers.
//
//	POST /v1/restored  RestoredRequest → RestoredResponse

// RestoredRequest tells a restored agent what it now is.
type RestoredRequest struct {
	// Kernels maps the id of each kernel the snapshot holds to the id it
	// has from now on; a kernel not named keeps its id.
	Kernels map[string]string `json:"kernels,omitempty"`
}

// RestoredResponse lists the kernels whose random state could not be
// renewed (their interpreter failed the reseed; they keep the snapshot's).
type RestoredResponse struct {
	NotReseeded []string `json:"not_reseeded,omitempty"`
}

// reseedTimeout bounds the reseed of one kernel.
const reseedTimeout = 10 * time.Second

// reseedCode renews a language's pseudo-random generators in place, binding
// no name in the user's namespace. Python: random's and, when imported,
// numpy's global generator, from os.urandom. Node: V8 cannot reseed
// Math.random, so it is replaced by one drawing on the crypto module's
// generator (which the kernel's getrandom keeps fresh). Bash: $RANDOM.
var reseedCode = map[string]string{
	LangPython: "if True:\n    __import__('random').seed()\n" +
		"    if 'numpy' in __import__('sys').modules: __import__('sys').modules['numpy'].random.seed()\n",
	LangJavaScript: "{ const c = require('crypto'); Math.random = () => c.randomInt(2 ** 47) / 2 ** 47; }\n",
	LangBash:       "RANDOM=$(( $(od -An -N2 -tu2 /dev/urandom) ))\n",
}

func (s *Server) handleRestored(w http.ResponseWriter, r *http.Request) {
	var req RestoredRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("decode restored request: %w", err))
		return
	}
	if err := s.kernels.rename(req.Kernels); err != nil {
		writeKernelError(w, err)
		return
	}
	s.procs.endWriterless()
	s.kernels.abandonDetached()
	writeJSON(w, http.StatusOK, RestoredResponse{NotReseeded: s.kernels.reseed(r.Context())})
}

// endWriterless ends, in the background, the processes that end with
// their writer and have none: in a restored sandbox, the one-shot
// terminals whose clients are the original sandbox's (a checkpoint
// suspended them, and they would wait suspendGrace for a writer that
// never comes).
func (ps *procs) endWriterless() {
	ps.mu.Lock()
	var orphans []*detachedProc
	for _, p := range ps.m {
		p.mu.Lock()
		if p.endWithWriter && p.writer == nil {
			orphans = append(orphans, p)
		}
		p.mu.Unlock()
	}
	ps.mu.Unlock()
	for _, p := range orphans {
		go ps.remove(p)
	}
}

// rename gives kernels new ids, all or none: every old id must be a
// kernel, and no new id one that stays.
func (ks *kernels) rename(ids map[string]string) error {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for from, to := range ids {
		if _, ok := ks.m[from]; !ok {
			return fmt.Errorf("kernel %s: %w", from, ErrKernelNotFound)
		}
		if _, ok := ks.m[to]; ok {
			if _, moves := ids[to]; !moves {
				return fmt.Errorf("kernel %s: %w", to, ErrKernelExists)
			}
		}
		if len(to) == 0 || len(to) > 128 {
			return fmt.Errorf("kernel id must be 1 to 128 characters")
		}
	}
	moved := make(map[string]*kernel, len(ids))
	for from, to := range ids {
		k := ks.m[from]
		delete(ks.m, from)
		k.mu.Lock()
		k.spec.ID = to
		k.mu.Unlock()
		moved[to] = k
	}
	for id, k := range moved {
		ks.m[id] = k
	}
	return nil
}

// reseed renews the random state of every kernel, one after another, and
// returns the ids of those that failed it.
func (ks *kernels) reseed(ctx context.Context) []string {
	ks.mu.Lock()
	all := make([]*kernel, 0, len(ks.m))
	for _, k := range ks.m {
		all = append(all, k)
	}
	ks.mu.Unlock()
	var failed []string
	for _, k := range all {
		if err := ks.reseedOne(ctx, k); err != nil {
			ks.srv.log.Warn("reseed a restored kernel", "kernel", k.spec.ID, "err", err)
			failed = append(failed, k.spec.ID)
		}
	}
	return failed
}

func (ks *kernels) reseedOne(ctx context.Context, k *kernel) error {
	ctx, cancel := context.WithTimeout(ctx, reseedTimeout)
	defer cancel()
	select {
	case k.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-k.sem }()
	p := k.current()
	if p == nil {
		return nil
	}
	fw := &frameWriter{w: io.Discard, flush: func() error { return nil }}
	res, undelivered := ks.run(ctx, k, p, KernelExecRequest{Code: reseedCode[k.spec.Language]}, fw)
	switch {
	case undelivered:
		return fmt.Errorf("the kernel died")
	case res.Error != nil:
		return fmt.Errorf("%s: %s", res.Error.Name, res.Error.Value)
	}
	return nil
}

// Restored tells a restored agent its kernels' new ids and has it reseed
// them.
func (c *Client) Restored(ctx context.Context, req RestoredRequest) (RestoredResponse, error) {
	var out RestoredResponse
	b, err := json.Marshal(req)
	if err != nil {
		return out, fmt.Errorf("encode restored request: %w", err)
	}
	err = c.sendJSON(ctx, http.MethodPost, "/v1/restored", nil, bytes.NewReader(b), &out)
	return out, err
}
