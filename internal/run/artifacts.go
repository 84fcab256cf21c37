package run

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// Bounds of a glob's walk through the sandbox.
const (
	maxWalkEntries = 20000
	maxWalkDepth   = 32
	collectTimeout = 5 * time.Minute
	// reviveWait bounds the wait for a sandbox whose agent does not
	// answer to be found dead.
	reviveWait = 10 * time.Second
)

// collect brings the task's artifacts out of the sandbox into the run's
// directory, within the artifact limit. A sandbox that died under the run
// is started again first, where it kept its files. What could not be
// brought back is left out, and the result says why (artifactsErr).
func (e *execution) collect(ctx context.Context) {
	if len(e.j.task.Artifacts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, collectTimeout)
	defer cancel()
	err := e.revive(ctx)
	n, truncated, unmatched := 0, false, []string(nil)
	if err == nil {
		n, truncated, unmatched, err = collectArtifacts(ctx, sandboxFiles{e.s.sbx, e.sandboxID}, e.j.task.Artifacts, filepath.Join(e.s.runDir(e.j.id), artifactsDir), e.s.cfg.ArtifactLimit)
	}
	if err != nil {
		e.artifactsErr = err.Error()
		e.s.log.Warn("collect artifacts", logRun, e.j.id, "err", err)
		e.log.add(api.RunEvent{Type: api.RunEventOutput, Stream: "stderr", Text: "collect artifacts: " + err.Error()})
	}
	msg := fmt.Sprintf("%d artifacts collected", n)
	if truncated {
		msg += fmt.Sprintf(" (others left out at the limit of %d bytes)", e.s.cfg.ArtifactLimit)
	}
	if len(unmatched) > 0 {
		msg += "; no file for " + strings.Join(unmatched, ", ")
	}
	e.log.add(api.RunEvent{Type: api.RunEventPhase, Phase: api.PhaseArtifacts, Text: msg})
	if truncated {
		e.truncated = true
	}
}

// revive makes sure the run's sandbox answers, for its artifacts to be
// collected: one that died under the run and kept its files (the
// manager keeps those of runs' sandboxes where the runtime can) is
// started again. It says why when the sandbox cannot answer.
func (e *execution) revive(ctx context.Context) error {
	for delay, waited := 50*time.Millisecond, time.Duration(0); ; delay = min(2*delay, time.Second) {
		if e.alive(ctx) {
			return nil
		}
		// The manager's sweep fails a dead sandbox within a second; ask
		// now. One whose agent was just killed may still look running
		// while its processes die: look again a little later.
		sb, err := e.s.sbx.CheckDead(ctx, e.sandboxID)
		if err != nil {
			return fmt.Errorf("the sandbox is gone: %w", err)
		}
		if sb.Status != api.StatusRunning {
			break
		}
		if waited >= reviveWait {
			return fmt.Errorf("the sandbox runs but its agent did not answer for %s", reviveWait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the sandbox does not answer: %w", ctx.Err())
		case <-time.After(delay):
			waited += delay
		}
	}
	sb, err := e.s.sbx.Start(ctx, e.sandboxID)
	if err != nil {
		return fmt.Errorf("the sandbox died and cannot be started again to read its files: %w", err)
	}
	e.log.add(api.RunEvent{Type: api.RunEventLiveness, Text: "the sandbox died: started again to collect the artifacts"})
	wctx, cancel := context.WithTimeout(ctx, e.s.cfg.ReadyTimeout)
	defer cancel()
	if _, err := e.s.sbx.WaitRunning(wctx, sb.ID); err != nil {
		return fmt.Errorf("the sandbox died and did not start again to read its files: %w", err)
	}
	return nil
}

// artifacts lists the artifacts the run's directory holds.
func (e *execution) artifacts() ([]api.RunArtifact, bool) {
	if e.j == nil || e.s == nil {
		return nil, false
	}
	list, _ := listArtifacts(filepath.Join(e.s.runDir(e.j.id), artifactsDir))
	return list, e.truncated
}

// listArtifacts lists the files under dir by their paths in the sandbox.
func listArtifacts(dir string) ([]api.RunArtifact, error) {
	var out []api.RunArtifact
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, api.RunArtifact{Path: "/" + filepath.ToSlash(rel), Size: fi.Size()})
		return nil
	})
	return out, err
}

// collectArtifacts copies the files of the sandbox that match patterns
// into dir, by their paths, until limit bytes; it returns how many it
// copied, whether it left any out at the limit, and the patterns no file
// matched.
func collectArtifacts(ctx context.Context, sf sandboxFiles, patterns []string, dir string, limit int64) (int, bool, []string, error) {
	files, unmatched, err := expand(ctx, sf, patterns)
	n, left := 0, limit
	truncated := false
	for _, f := range files {
		if f.Size > left {
			truncated = true
			continue
		}
		written, cerr := download(ctx, sf, f.Path, filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(f.Path, "/"))), left)
		left -= written
		switch {
		case errors.Is(cerr, errTooLarge):
			truncated = true
		case cerr != nil:
			err = errors.Join(err, cerr)
		default:
			n++
		}
	}
	return n, truncated, unmatched, err
}

var errTooLarge = errors.New("over the artifact limit")

// download copies file p of the sandbox to local, at most limit bytes; a
// larger file is removed and errTooLarge.
func download(ctx context.Context, sf sandboxFiles, p, local string, limit int64) (int64, error) {
	rc, _, err := sf.sbx.Download(ctx, sf.id, p)
	if err != nil {
		return 0, fmt.Errorf("download %s: %w", p, err)
	}
	defer rc.Close()
	if err := os.MkdirAll(filepath.Dir(local), 0o700); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, io.LimitReader(rc, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > limit {
		err = errTooLarge
	}
	if err != nil {
		os.Remove(local)
		return 0, err
	}
	return n, nil
}

// expand returns the regular files of the sandbox that match patterns
// (absolute globs where "**" matches any number of directories; a path
// naming a directory takes all the files under it, as dir/** does), each
// once, sorted, and the patterns that matched no file. Symbolic links are
// not followed.
func expand(ctx context.Context, sf sandboxFiles, patterns []string) ([]service.FileStat, []string, error) {
	w := &walker{sf: sf, budget: maxWalkEntries, seen: map[string]service.FileStat{}}
	var errs error
	var unmatched []string
	for _, pat := range patterns {
		before := w.found
		if err := w.expand(ctx, pat); err != nil {
			errs = errors.Join(errs, fmt.Errorf("artifacts %s: %w", pat, err))
		} else if w.found == before {
			unmatched = append(unmatched, pat)
		}
	}
	out := make([]service.FileStat, 0, len(w.seen))
	for _, fi := range w.seen {
		out = append(out, fi)
	}
	slices.SortFunc(out, func(a, b service.FileStat) int { return strings.Compare(a.Path, b.Path) })
	return out, unmatched, errs
}

// expand adds the files that pattern pat matches.
func (w *walker) expand(ctx context.Context, pat string) error {
	segs := strings.Split(strings.Trim(path.Clean(pat), "/"), "/")
	// Walk from the longest directory without a wildcard.
	i := 0
	for i < len(segs) && !hasMeta(segs[i]) {
		i++
	}
	root := "/" + strings.Join(segs[:i], "/")
	if i < len(segs) {
		return w.walk(ctx, root, segs[i:], 0)
	}
	// A plain path.
	fi, err := w.sf.sbx.Stat(ctx, w.sf.id, root)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return nil
	case err != nil:
		return err
	case fi.Regular:
		fi.Path = root
		w.add(*fi)
	case fi.IsDir && fi.Link == "":
		return w.walk(ctx, root, []string{"**"}, 0)
	}
	return nil
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// sandboxFiles are the files of sandbox id, read through sbx.
type sandboxFiles struct {
	sbx Sandboxes
	id  string
}

// walker walks the sandbox's directories for globs, within a budget of
// entries.
type walker struct {
	sf     sandboxFiles
	budget int
	seen   map[string]service.FileStat
	// found counts the files added, each time one is (a file two
	// patterns match counts for both).
	found int
}

// add adds file fi.
func (w *walker) add(fi service.FileStat) {
	w.seen[fi.Path] = fi
	w.found++
}

// list lists dir, counting its entries against the budget.
func (w *walker) list(ctx context.Context, dir string) ([]service.FileStat, error) {
	entries, err := w.sf.sbx.ReadDir(ctx, w.sf.id, dir)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if w.budget -= len(entries); w.budget < 0 {
		return nil, fmt.Errorf("more than %d entries to look through", maxWalkEntries)
	}
	for i := range entries {
		entries[i].Path = path.Join(dir, entries[i].Name)
	}
	return entries, nil
}

// walk adds the files under dir that match the pattern segments segs.
// "**" matches no directory, or any number of them.
func (w *walker) walk(ctx context.Context, dir string, segs []string, depth int) error {
	if depth > maxWalkDepth {
		return nil
	}
	seg, rest := segs[0], segs[1:]
	if seg == "**" && len(rest) > 0 {
		if err := w.walk(ctx, dir, rest, depth); err != nil {
			return err
		}
	}
	entries, err := w.list(ctx, dir)
	if err != nil {
		return err
	}
	for _, fi := range entries {
		isDir := fi.IsDir && fi.Link == ""
		switch {
		case seg == "**":
			if len(rest) == 0 && fi.Regular && fi.Link == "" {
				w.add(fi)
			}
			if isDir {
				if err := w.walk(ctx, fi.Path, segs, depth+1); err != nil {
					return err
				}
			}
		case !matchName(seg, fi.Name):
		case len(rest) == 0:
			if fi.Regular && fi.Link == "" {
				w.add(fi)
			}
		case isDir:
			if err := w.walk(ctx, fi.Path, rest, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func matchName(pattern, name string) bool {
	ok, _ := path.Match(pattern, name)
	return ok
}

// artifactRoot returns run id's artifact directory, after checking the
// run exists and is the tenant of ctx's.
func (s *Service) artifactRoot(ctx context.Context, id string) (string, error) {
	if _, err := s.get(ctx, id); err != nil {
		return "", err
	}
	return filepath.Join(s.runDir(id), artifactsDir), nil
}

// ArtifactsTar writes run id's artifacts to w as a tar archive, each by
// its path in the sandbox (without the leading "/").
func (s *Service) ArtifactsTar(ctx context.Context, id string, w io.Writer) error {
	root, err := s.artifactRoot(ctx, id)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	list, err := listArtifacts(root)
	if err != nil {
		return fmt.Errorf("list the artifacts of run %s: %w", id, err)
	}
	for _, a := range list {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(a.Path)))
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(a.Path, "/"), Mode: 0o644, Size: fi.Size(),
				ModTime: fi.ModTime(), Typeflag: tar.TypeReg})
		}
		if err == nil {
			_, err = io.CopyN(tw, f, fi.Size())
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("write artifact %s: %w", a.Path, err)
		}
	}
	return tw.Close()
}

// Artifact opens run id's artifact at p (its absolute path in the
// sandbox); the caller closes it. ErrNotFound when there is none.
func (s *Service) Artifact(ctx context.Context, id, p string) (io.ReadCloser, int64, error) {
	root, err := s.artifactRoot(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	clean := path.Clean("/" + p)
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(clean)))
	if err != nil {
		return nil, 0, errdefs.WithCode(errdefs.NotFound("run %s has no artifact %s", id, clean), api.CodeFileNotFound)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, errdefs.WithCode(errdefs.NotFound("run %s has no artifact %s", id, clean), api.CodeFileNotFound)
	}
	return f, fi.Size(), nil
}
