package run

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agents/all"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/task"
)

// batch is one submission's runs, waiting for or under the Run loop.
type batch struct {
	id       string
	parallel int
	// inputs is the host directory its runs' inputs are read from ("":
	// none).
	inputs string
	jobs   []*job
}

// taskName is a name a submission may give for a file of the tasks
// directory: no path.
var taskName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Submit checks req, records its runs as queued and queues them for the
// Run loop. A task that does not load, an unknown agent or model, or bad
// overrides are ErrInvalidArgument naming the field; nothing is recorded
// then.
func (s *Service) Submit(ctx context.Context, req api.RunSubmitRequest) (*api.RunBatch, error) {
	// The models a task may use are the LLM proxy's now (its
	// configuration is reloaded on SIGHUP).
	var models []string
	check := s.cfg.Models != nil
	if check {
		models = s.cfg.Models()
	}
	t, dir, err := s.resolveTask(req, models, check)
	if err != nil {
		return nil, err
	}
	combos, err := s.matrix(t, req, models, check)
	if err != nil {
		return nil, err
	}
	repeats := t.Repeats
	if req.Repeats != 0 {
		if req.Repeats < 1 || req.Repeats > task.MaxRepeats {
			return nil, errdefs.Invalid("repeats: %d is not between 1 and %d", req.Repeats, task.MaxRepeats)
		}
		repeats = req.Repeats
	}
	if n := len(combos) * repeats; n > task.MaxRepeats {
		return nil, errdefs.Invalid("repeats: %d runs (%d combinations × %d) is more than %d", n, len(combos), repeats, task.MaxRepeats)
	}
	if req.Parallel < 0 {
		return nil, errdefs.Invalid("parallel: %d is negative", req.Parallel)
	}
	if err := s.checkSandbox(ctx, t); err != nil {
		return nil, err
	}
	b := &batch{id: newID("b-"), parallel: req.Parallel}
	// Its files are kept from a recovery going on, and removed when the
	// submission fails.
	s.keepBatch(b.id)
	submitted := false
	defer func() {
		if !submitted {
			s.removeBatch(b.id)
		}
	}()
	if req.Inputs != "" {
		data, err := base64.StdEncoding.DecodeString(req.Inputs)
		if err != nil {
			return nil, errdefs.Invalid("inputs: not base64: %v", err)
		}
		if dir, err = s.unpackInputs(b.id, data); err != nil {
			return nil, err
		}
	}
	if len(t.Inputs) > 0 && dir == "" {
		return nil, errdefs.Invalid("inputs: the task has inputs: send them (an archive in inputs), or name a task of the daemon's tasks directory")
	}
	if req.Inputs != "" {
		if err := checkInputs(t, dir); err != nil {
			return nil, err
		}
	}
	out := &api.RunBatch{ID: b.id, Task: t.Name}
	now := s.now().UTC()
	lease := now.Add(s.cfg.Lease) // ours from the start: no other daemon claims them
	for _, c := range combos {
		for i := range repeats {
			j := &job{id: newID(runPrefix), batch: b.id, task: c, dir: dir, repeat: i}
			spec, err := c.JSON()
			if err != nil {
				return nil, fmt.Errorf("submit task %s: %w", t.Name, err)
			}
			rec := &store.Run{
				ID: j.id, BatchID: b.id, Task: c.Name, Spec: spec, Agent: c.Agent, Model: c.Model, Repeat: i,
				Status: string(api.RunQueued), Phase: api.PhaseQueued, CreatedAt: now, UpdatedAt: now,
				Tenant: auth.TenantOf(ctx), ClaimedBy: s.cfg.Owner, LeaseUntil: &lease,
			}
			// Ours before it is stored: recovery, which may be running,
			// leaves it alone.
			s.mu.Lock()
			s.jobs[j.id] = j
			s.mu.Unlock()
			if err := s.store.CreateRun(ctx, rec); err != nil {
				s.forget(ctx, b.jobs, j)
				return nil, fmt.Errorf("submit task %s: %w", t.Name, err)
			}
			b.jobs = append(b.jobs, j)
			out.Runs = append(out.Runs, *view(rec))
		}
	}
	// Once all its runs are recorded, the submission is too: the next
	// daemon queues again those it finds queued.
	b.inputs = dir
	if err := s.writeBatch(b); err != nil {
		s.log.Warn("record a submission: its queued runs will not outlive the daemon", "batch", b.id, "err", err)
	}
	submitted = true
	s.mu.Lock()
	s.queue = append(s.queue, b)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	s.log.Info("task submitted", "task", t.Name, "batch", b.id, "runs", len(b.jobs))
	return out, nil
}

// forget drops the jobs of a submission that failed midway, jobs
// recorded and last not, and deletes the records of jobs: the submission
// failed, so none of its runs is left queued. A record that cannot be
// deleted stays queued for the next daemon's recovery to end.
func (s *Service) forget(ctx context.Context, jobs []*job, last *job) {
	s.mu.Lock()
	for _, j := range append(jobs, last) {
		delete(s.jobs, j.id)
	}
	s.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	for _, j := range jobs {
		if err := s.store.DeleteRun(ctx, j.id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Warn("remove a run of a failed submission", logRun, j.id, "err", err)
		}
	}
}

// resolveTask loads the task req gives and returns it with the directory
// its inputs are read from ("" when it has none yet). The task's own
// model is checked against models, when check, unless req overrides it.
func (s *Service) resolveTask(req api.RunSubmitRequest, models []string, check bool) (*task.Task, string, error) {
	var opts []task.Option
	if check && len(req.Models) == 0 {
		opts = append(opts, task.WithModels(models...))
	}
	switch {
	case req.Task != "" && req.TaskName != "":
		return nil, "", errdefs.Invalid("give task (a task file's content) or task_name, not both")
	case req.Task != "":
		t, err := task.Load("", []byte(req.Task), opts...)
		return t, "", err
	case req.TaskName != "":
		if req.Inputs != "" {
			return nil, "", errdefs.Invalid("inputs: a named task reads its inputs beside its file")
		}
		if s.cfg.TasksDir == "" {
			return nil, "", errdefs.Invalid("this daemon has no tasks directory to run a task by name from: its operator gives it one with agent2env serve --tasks-dir DIR")
		}
		if !taskName.MatchString(req.TaskName) {
			return nil, "", errdefs.Invalid("task_name: %q is not the name of a file in the tasks directory", req.TaskName)
		}
		// The task's file and its inputs are looked up in the tasks
		// directory as an os.Root: a symbolic link or ".." leading out of
		// it does not bring a file of the host into a sandbox.
		root, err := os.OpenRoot(s.cfg.TasksDir)
		if err != nil {
			return nil, "", fmt.Errorf("open the tasks directory: %w", err)
		}
		defer root.Close()
		for _, name := range []string{req.TaskName, req.TaskName + ".yaml", req.TaskName + ".yml", req.TaskName + ".json"} {
			// A directory is a task's files, beside its file.
			if fi, err := root.Stat(name); errors.Is(err, os.ErrNotExist) || err == nil && fi.IsDir() {
				continue
			}
			t, err := task.LoadIn(root, name, opts...)
			if err != nil {
				return nil, "", fmt.Errorf("task_name: %w", err)
			}
			if err := t.CheckInputs(root); err != nil {
				return nil, "", err
			}
			return t, t.Dir, nil
		}
		return nil, "", errdefs.NotFound("task_name: no task %q in the tasks directory", req.TaskName)
	}
	return nil, "", errdefs.Invalid("task is required: a task file's content, or task_name")
}

// matrix returns the task once per agent × model combination the request
// asks for (the task's own when it names none), each validated, each
// model one of known when check.
func (s *Service) matrix(t *task.Task, req api.RunSubmitRequest, known []string, check bool) ([]*task.Task, error) {
	agentNames, models := req.Agents, req.Models
	if len(agentNames) == 0 {
		agentNames = []string{t.Agent}
	}
	if len(models) == 0 {
		models = []string{t.Model}
	}
	for _, list := range []struct {
		field string
		names []string
	}{{"agents", agentNames}, {"models", models}} {
		for i, n := range list.names {
			if slices.Contains(list.names[:i], n) {
				return nil, errdefs.Invalid("%s: %q is listed twice (repeats makes more runs of one combination)", list.field, n)
			}
		}
	}
	var out []*task.Task
	for _, a := range agentNames {
		if _, ok := all.Get(a); !ok {
			return nil, errdefs.Invalid("agents: unknown agent %q (one of %s)", a, strings.Join(all.Names(), ", "))
		}
		for _, m := range models {
			if p := task.ModelProblem(a, m, known); check && p != "" {
				return nil, errdefs.Invalid("models: %s", p)
			}
			c := *t
			c.Agent, c.Model = a, m
			if err := c.Validate(); err != nil {
				return nil, err
			}
			out = append(out, &c)
		}
	}
	return out, nil
}

// checkSandbox refuses a task whose sandbox can never be made, naming the
// field: an unknown template, an image that is not a reference, or
// resources beyond the host's whole capacity. Its runs would otherwise
// fail, or wait for room, once queued. The sandbox service decides, as it
// would for the create; the task's template or image is checked first
// with their own resources, so that an error is put on the right field.
// The combinations of a submission share the task's sandbox.
func (s *Service) checkSandbox(ctx context.Context, t *task.Task) error {
	req := sandboxRequest(t)
	own := req
	own.CPU, own.Memory, own.Disk = "", "", ""
	field := "image"
	if t.Template != "" {
		field = "template"
	}
	if err := s.sbx.CheckManaged(ctx, own); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if t.Resources == nil {
		return nil
	}
	if err := s.sbx.CheckManaged(ctx, req); err != nil {
		return fmt.Errorf("resources: %w", err)
	}
	return nil
}

// unpackInputs extracts a submission's input archive (a gzipped tar of
// regular files and directories, by relative paths) into the batch's
// directory and returns it. An entry that conflicts with an earlier one
// (a file under a file, a file where a directory is, a file twice, a
// file named ".") is ErrInvalidArgument naming it, and nothing is left.
// The files are written through an os.Root of the directory, so that an
// error names the entry, never the host's path.
func (s *Service) unpackInputs(batchID string, data []byte) (string, error) {
	if len(data) > MaxInputsBytes {
		return "", errdefs.Invalid("inputs: the archive is larger than %d MiB", MaxInputsBytes>>20)
	}
	dir := filepath.Join(s.batchesDir(), batchID, "inputs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("unpack inputs: %w", err)
	}
	fail := func(err error) (string, error) {
		os.RemoveAll(filepath.Dir(dir))
		return "", err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fail(fmt.Errorf("unpack inputs: %w", err))
	}
	defer root.Close()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return fail(errdefs.Invalid("inputs: not a gzipped tar: %v", err))
	}
	tr := tar.NewReader(zr)
	var total int64
	seen := entries{".": true}
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail(errdefs.Invalid("inputs: not a gzipped tar: %v", err))
		}
		if n == maxInputsEntries {
			return fail(errdefs.Invalid("inputs: the archive has more than %d entries", maxInputsEntries))
		}
		name := path.Clean(h.Name)
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fail(errdefs.Invalid("inputs: %q leaves the task's directory", h.Name))
		}
		if h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeReg {
			return fail(errdefs.Invalid("inputs: %q is not a regular file or directory", h.Name))
		}
		if err := seen.add(name, h.Typeflag == tar.TypeDir); err != nil {
			return fail(errdefs.Invalid("inputs: %q %v", h.Name, err))
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o700); err != nil {
				return fail(fmt.Errorf("unpack inputs: %w", err))
			}
		case tar.TypeReg:
			// Decompressed, the archive may be much larger than sent.
			if total += h.Size; total > 4*MaxInputsBytes {
				return fail(errdefs.Invalid("inputs: more than %d MiB unpacked", 4*MaxInputsBytes>>20))
			}
			if err := writeFile(root, name, tr, os.FileMode(h.Mode).Perm()|0o600); err != nil {
				return fail(fmt.Errorf("unpack inputs: %w", err))
			}
		}
	}
	return dir, nil
}

// entries are the paths an input archive made so far, each true for a
// directory (those its entries' paths imply included).
type entries map[string]bool

// add records entry name (a directory when dir), or says how it conflicts
// with the entries before it.
func (e entries) add(name string, dir bool) error {
	if name == "." && !dir {
		return errors.New("is the task's directory itself, not a file")
	}
	for p := path.Dir(name); p != "."; p = path.Dir(p) {
		if isDir, ok := e[p]; ok && !isDir {
			return fmt.Errorf("is under %q, a file earlier in the archive", p)
		}
	}
	if isDir, ok := e[name]; ok && !(isDir && dir) {
		kind := "a file"
		if isDir {
			kind = "a directory"
		}
		return fmt.Errorf("conflicts with %s of that name earlier in the archive", kind)
	}
	e[name] = dir
	for p := path.Dir(name); p != "."; p = path.Dir(p) {
		e[p] = true
	}
	return nil
}

// checkInputs checks t's inputs against the files a submission carried,
// unpacked in dir.
func checkInputs(t *task.Task, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("check inputs: %w", err)
	}
	defer root.Close()
	return t.CheckInputs(root)
}

// writeFile writes r to the new file name of root, making its directory.
func writeFile(root *os.Root, name string, r io.Reader, mode os.FileMode) error {
	if err := root.MkdirAll(path.Dir(name), 0o700); err != nil {
		return err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
