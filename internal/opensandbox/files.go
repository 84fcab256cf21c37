package opensandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// Files is what execd's files and directories routes (docs/opensandbox.md
// §9.3) need of the sandbox service beyond Execd's upload and download.
type Files interface {
	Stat(ctx context.Context, id, path string) (*service.FileStat, error)
	StatTarget(ctx context.Context, id, path string) (*service.FileStat, error)
	Walk(ctx context.Context, id, root string, depth int) ([]service.FileStat, bool, error)
	Search(ctx context.Context, id, root, pattern string) ([]service.FileStat, bool, error)
	Mkdir(ctx context.Context, id, path string) error
	Move(ctx context.Context, id, from, to string) error
	Remove(ctx context.Context, id, path string, recursive bool) error
	Chmod(ctx context.Context, id, path string, mode fs.FileMode) error
	Chown(ctx context.Context, id, path, owner, group string) error
	Replace(ctx context.Context, id, path, old, new string) (int, error)
	ReadRange(ctx context.Context, id, path string, offset, length int64) (io.ReadCloser, int64, error)
}

var _ Files = (*service.Sandboxes)(nil)

// fileInfo is execd's FileInfo. Owner and group are named as agent2env's
// images name them (service.UserName: root, sandbox, or the number).
// agent2env's agent does not report birth times: created_at is the
// modification time.
type fileInfo struct {
	Path       string    `json:"path"`
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
	CreatedAt  time.Time `json:"created_at"`
	Owner      string    `json:"owner"`
	Group      string    `json:"group"`
	Mode       int       `json:"mode"`
	Type       string    `json:"type"`
}

// formatMode writes an octal mode ("0644") as execd does: its octal digits
// read as a decimal number (644).
func formatMode(octal string) int {
	v, err := strconv.ParseUint(octal, 8, 32)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strconv.FormatUint(v, 8))
	return n
}

func infoView(fi *service.FileStat) fileInfo {
	typ := "other"
	switch {
	case fi.Link != "":
		typ = "symlink"
	case fi.IsDir:
		typ = "directory"
	case fi.Regular:
		typ = "file"
	}
	at := fi.ModTime.UTC()
	return fileInfo{Path: fi.Path, Size: fi.Size, ModifiedAt: at, CreatedAt: at, Mode: formatMode(fi.Mode), Type: typ,
		Owner: service.UserName(fi.UID), Group: service.UserName(fi.GID)}
}

func infoViews(fis []service.FileStat) []fileInfo {
	out := make([]fileInfo, len(fis))
	for i := range fis {
		out[i] = infoView(&fis[i])
	}
	return out
}

// fileHandler serves one files route of a sandbox.
type fileHandler func(h *Handler, w http.ResponseWriter, r *http.Request, id string)

// filesRoutes are execd's files and directories routes, by path and
// method.
var filesRoutes = map[string]map[string]fileHandler{
	"/files":             {http.MethodDelete: (*Handler).deleteFiles},
	"/files/info":        {http.MethodGet: (*Handler).filesInfo},
	"/files/search":      {http.MethodGet: (*Handler).searchFiles},
	"/files/mv":          {http.MethodPost: (*Handler).moveFiles},
	"/files/permissions": {http.MethodPost: (*Handler).chmodFiles},
	"/files/replace":     {http.MethodPost: (*Handler).replaceFiles},
	"/directories":       {http.MethodPost: (*Handler).makeDirs, http.MethodDelete: (*Handler).deleteDirs},
	"/directories/list":  {http.MethodGet: (*Handler).listDir},
}

// routeFiles serves op of sandbox id by fns, its handlers by method.
func (h *Handler) routeFiles(w http.ResponseWriter, r *http.Request, id string, fns map[string]fileHandler) {
	if h.cfg.Files == nil {
		writeError(w, errdefs.NotImplemented("execd's file operations are not served here"))
		return
	}
	by := make(map[string]http.HandlerFunc, len(fns))
	for m, f := range fns {
		by[m] = func(w http.ResponseWriter, r *http.Request) { f(h, w, r, id) }
	}
	methods(w, r, by)
}

// missingQuery is execd's error for a query parameter left out.
func missingQuery(name string) error {
	return errdefs.WithCode(errdefs.Invalid("%s is required", name), "MISSING_QUERY")
}

// queryPaths is the repeated path query parameter, required.
func queryPaths(r *http.Request) ([]string, error) {
	ps := r.URL.Query()["path"]
	if len(ps) == 0 {
		return nil, missingQuery("path")
	}
	for _, p := range ps {
		if p == "" {
			return nil, errdefs.Invalid("path must not be empty")
		}
	}
	return ps, nil
}

func (h *Handler) filesInfo(w http.ResponseWriter, r *http.Request, id string) {
	ps, err := queryPaths(r)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make(map[string]fileInfo, len(ps))
	for _, p := range ps {
		fi, err := h.cfg.Files.Stat(r.Context(), id, p)
		if err != nil {
			writeError(w, err)
			return
		}
		out[p] = infoView(fi)
	}
	writeJSON(w, http.StatusOK, out)
}

// HeaderTruncated is set to "true" on a search or a directory listing
// cut at service.MaxWalkEntries entries (or at the most a walk reads):
// there are more than the answer holds.
const HeaderTruncated = "X-Truncated"

// writeWalked returns the func that answers with what a search or a walk
// found (called with its results).
func writeWalked(w http.ResponseWriter) func(fis []service.FileStat, truncated bool, err error) {
	return func(fis []service.FileStat, truncated bool, err error) {
		if err != nil {
			writeError(w, err)
			return
		}
		if truncated {
			w.Header().Set(HeaderTruncated, "true")
		}
		writeJSON(w, http.StatusOK, infoViews(fis))
	}
}

func (h *Handler) searchFiles(w http.ResponseWriter, r *http.Request, id string) {
	q := r.URL.Query()
	if q.Get("path") == "" {
		writeError(w, missingQuery("path"))
		return
	}
	writeWalked(w)(h.cfg.Files.Search(r.Context(), id, q.Get("path"), q.Get("pattern")))
}

func (h *Handler) listDir(w http.ResponseWriter, r *http.Request, id string) {
	q := r.URL.Query()
	root := q.Get("path")
	if root == "" {
		writeError(w, missingQuery("path"))
		return
	}
	depth := 1
	if d := q.Get("depth"); d != "" {
		var err error
		if depth, err = strconv.Atoi(d); err != nil || depth < 1 {
			writeError(w, errdefs.Invalid("depth %q: want a positive integer", d))
			return
		}
	}
	fi, err := h.cfg.Files.Stat(r.Context(), id, root)
	if err != nil {
		writeError(w, err)
		return
	}
	if fi.Link != "" {
		writeError(w, errdefs.Invalid("%s is a symbolic link; list its target", root))
		return
	}
	writeWalked(w)(h.cfg.Files.Walk(r.Context(), id, root, depth))
}

// linkRemovable says whether the symbolic link p may go as a file: not
// when it leads to a directory (ErrInvalidArgument); when it leads
// nowhere, loops or the sandbox's agent does not follow it (an agent
// older than the daemon), it may. Another failure to follow it is
// returned.
func (h *Handler) linkRemovable(ctx context.Context, id, p string) error {
	fi, err := h.cfg.Files.StatTarget(ctx, id, p)
	switch {
	case err == nil && fi.IsDir:
		return errdefs.Invalid("%s is a symbolic link to a directory: delete the link with DELETE /directories (delete_directories), which removes it alone", p)
	case err == nil, errors.Is(err, errdefs.ErrNotFound), errors.Is(err, errdefs.ErrInvalidArgument), errors.Is(err, errdefs.ErrFailedPrecondition):
		return nil
	}
	return err
}

func (h *Handler) deleteFiles(w http.ResponseWriter, r *http.Request, id string) {
	h.remove(w, r, id, false)
}

func (h *Handler) deleteDirs(w http.ResponseWriter, r *http.Request, id string) {
	h.remove(w, r, id, true)
}

// remove deletes the paths of r: files, or, dirs set, each path with all
// it holds, whatever it is (execd's os.RemoveAll: a file or a symbolic
// link goes too). Of files, a directory or a symbolic link to one is
// refused, as execd's os.Stat, which follows links, refuses it (with a
// 500; a 400 here); a link leading nowhere goes, which execd leaves. A
// path that does not exist is done already, as execd has it (rm -f,
// rm -rf): cleaning up twice is no failure.
func (h *Handler) remove(w http.ResponseWriter, r *http.Request, id string, dirs bool) {
	ps, err := queryPaths(r)
	if err != nil {
		writeError(w, err)
		return
	}
	// Every path is checked before any is removed: a request refused
	// changes nothing.
	clean := make([]string, len(ps))
	for i, p := range ps {
		fi, err := h.cfg.Files.Stat(r.Context(), id, p)
		switch {
		case errors.Is(err, errdefs.ErrNotFound):
			err = nil // clean[i] "": nothing to remove
		case err != nil:
		case !dirs && fi.IsDir:
			err = errdefs.Invalid("%s is a directory", p)
		case !dirs && fi.Link != "":
			if err = h.linkRemovable(r.Context(), id, p); err == nil {
				clean[i], err = service.CleanPath(p)
			}
		default:
			clean[i], err = service.CleanPath(p)
		}
		if err != nil {
			writeError(w, err)
			return
		}
	}
	var removed []string
	for i, p := range ps {
		// A path given twice, or inside a directory removed before it,
		// is gone already: done, not a failure after the removals.
		if clean[i] == "" || slices.ContainsFunc(removed, func(d string) bool { return within(clean[i], d) }) {
			continue
		}
		removed = append(removed, clean[i])
		if err := h.cfg.Files.Remove(r.Context(), id, p, dirs); err != nil {
			writeError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// within reports whether clean path p is dir or a path under it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// moveFiles moves files in the order given, as one change: every item is
// checked before anything is moved, and a move that fails has the moves
// before it undone, last first (best effort: a file a move replaced is
// not brought back).
func (h *Handler) moveFiles(w http.ResponseWriter, r *http.Request, id string) {
	var items []struct {
		Src  string `json:"src"`
		Dest string `json:"dest"`
	}
	if err := decodeJSON(w, r, &items); err != nil {
		writeError(w, err)
		return
	}
	for i, it := range items {
		for _, p := range []string{it.Src, it.Dest} {
			if _, err := service.CleanPath(p); err != nil {
				writeError(w, fmt.Errorf("item %d: src and dest: %w", i, err))
				return
			}
		}
	}
	ctx := r.Context()
	for i, it := range items {
		if err := h.cfg.Files.Move(ctx, id, it.Src, it.Dest); err != nil {
			for j := i - 1; j >= 0; j-- {
				// Best effort: the request's error is what the client needs.
				_ = h.cfg.Files.Move(context.WithoutCancel(ctx), id, items[j].Dest, items[j].Src)
			}
			writeError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// permission is execd's Permission: a mode in octal digits, and names.
type permission struct {
	Mode  *int    `json:"mode"`
	Owner *string `json:"owner"`
	Group *string `json:"group"`
}

// applyPermission sets path's mode (when it has one: mode) and p's owner.
// Each step done adds to *undo the step that sets back what was (before:
// the file as it was; nil for a file the request made, whose removal
// undoes it all).
func (h *Handler) applyPermission(ctx context.Context, id, path string, mode *fs.FileMode, p permission, before *service.FileStat, undo *[]func(context.Context)) error {
	if mode != nil {
		if err := h.cfg.Files.Chmod(ctx, id, path, *mode); err != nil {
			return err
		}
		if before != nil {
			*undo = append(*undo, func(ctx context.Context) { _ = h.cfg.Files.Chmod(ctx, id, path, before.FullMode.Perm()) })
		}
	}
	var owner, group string
	if p.Owner != nil {
		owner = *p.Owner
	}
	if p.Group != nil {
		group = *p.Group
	}
	if owner == "" && group == "" {
		return nil
	}
	if err := h.cfg.Files.Chown(ctx, id, path, owner, group); err != nil {
		return err
	}
	if before != nil {
		*undo = append(*undo, func(ctx context.Context) {
			_ = h.cfg.Files.Chown(ctx, id, path, strconv.Itoa(before.UID), strconv.Itoa(before.GID))
		})
	}
	return nil
}

func (h *Handler) chmodFiles(w http.ResponseWriter, r *http.Request, id string) {
	h.permissions(w, r, id, false)
}

func (h *Handler) makeDirs(w http.ResponseWriter, r *http.Request, id string) {
	h.permissions(w, r, id, true)
}

// permissions applies a body of path → permission, in path order,
// making each path a directory first (with its parents) when mkdir is
// set. Every mode is checked, and every path of a chmod looked up, before
// anything is done; when a later step fails, what the request did is
// undone, last first: the directories it made are removed, and the modes
// and owners it set on existing files set back as far as the sandbox's
// user may.
func (h *Handler) permissions(w http.ResponseWriter, r *http.Request, id string, mkdir bool) {
	var body map[string]permission
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	ps := slices.Sorted(maps.Keys(body)) // parents before their children
	modes := make(map[string]*fs.FileMode, len(body))
	for _, p := range ps {
		if body[p].Mode == nil {
			continue
		}
		mode, err := parseMode(*body[p].Mode)
		if err != nil {
			writeError(w, fmt.Errorf("%s: %w", p, err))
			return
		}
		modes[p] = &mode
	}
	ctx := r.Context()
	// before holds the files as they were: chmod and chown follow links,
	// so a link is described by its target.
	before := make(map[string]*service.FileStat, len(body))
	if !mkdir {
		for _, p := range ps {
			fi, err := h.statBefore(ctx, id, p)
			if err != nil {
				writeError(w, err)
				return
			}
			before[p] = fi
		}
	}
	var undo []func(context.Context)
	err := func() error {
		for _, p := range ps {
			if mkdir {
				top, err := h.missingTop(ctx, id, p)
				if err != nil {
					return err
				}
				if top == "" {
					if before[p], err = h.statBefore(ctx, id, p); err != nil {
						return err
					}
				}
				if err := h.cfg.Files.Mkdir(ctx, id, p); err != nil {
					return err
				}
				if top != "" {
					undo = append(undo, func(ctx context.Context) { _ = h.cfg.Files.Remove(ctx, id, top, true) })
				}
			}
			if err := h.applyPermission(ctx, id, p, modes[p], body[p], before[p], &undo); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		// Best effort: the request's error is what the client needs.
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i](context.WithoutCancel(ctx))
		}
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// statBefore describes file p of sandbox id before a chmod or chown, which
// follow links: a link by its target. A sandbox's agent too old to follow
// links has p looked up all the same, but nil returned for a link: what
// its target was is not known, and is not set back.
func (h *Handler) statBefore(ctx context.Context, id, p string) (*service.FileStat, error) {
	fi, err := h.cfg.Files.StatTarget(ctx, id, p)
	if errors.Is(err, errdefs.ErrFailedPrecondition) {
		_, err = h.cfg.Files.Stat(ctx, id, p)
		return nil, err
	}
	return fi, err
}

// missingTop returns the topmost directory of p (p included) that does
// not exist in sandbox id, which a mkdir -p of p would make; "" when p
// exists.
func (h *Handler) missingTop(ctx context.Context, id, p string) (string, error) {
	p, err := service.CleanPath(p)
	if err != nil {
		return "", err
	}
	top := ""
	for q := p; q != "/"; q = path.Dir(q) {
		_, err := h.cfg.Files.Stat(ctx, id, q)
		if errors.Is(err, errdefs.ErrNotFound) {
			top = q
			continue
		}
		if err != nil {
			return "", err
		}
		break
	}
	return top, nil
}

func (h *Handler) replaceFiles(w http.ResponseWriter, r *http.Request, id string) {
	var body map[string]struct {
		Old *string `json:"old"`
		New *string `json:"new"`
	}
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	type count struct {
		ReplacedCount int `json:"replacedCount"`
	}
	// Every file is checked before any is changed: a request refused for
	// one of them changes none.
	ps := slices.Sorted(maps.Keys(body))
	for _, p := range ps {
		if err := h.replaceable(r.Context(), id, p, body[p].Old, body[p].New); err != nil {
			writeError(w, err)
			return
		}
	}
	out := make(map[string]count, len(body))
	for _, p := range ps {
		n, err := h.cfg.Files.Replace(r.Context(), id, p, *body[p].Old, *body[p].New)
		if err != nil {
			writeError(w, err)
			return
		}
		out[p] = count{ReplacedCount: n}
	}
	if v, _ := strconv.ParseBool(r.URL.Query().Get("verbose")); v {
		writeJSON(w, http.StatusOK, out)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// replaceable checks a replace of old by new in file p of sandbox id as
// service.Sandboxes.Replace would, before anything is replaced.
func (h *Handler) replaceable(ctx context.Context, id, p string, old, new *string) error {
	if old == nil || new == nil {
		return errdefs.Invalid("%s: give old and new", p)
	}
	if *old == "" {
		return errdefs.Invalid("%s: the text to replace is empty", p)
	}
	fi, err := h.cfg.Files.Stat(ctx, id, p)
	switch {
	case err != nil:
		return err
	case !fi.Regular:
		return errdefs.Invalid("%s is not a regular file", p)
	case fi.Size > service.MaxReplaceBytes:
		return errdefs.Invalid("%s is %d bytes, above the %d-byte limit of a replace", p, fi.Size, service.MaxReplaceBytes)
	}
	return nil
}

// byteRange is one range of a Range header, resolved against a size.
type byteRange struct{ start, length int64 }

// parseRange reads "bytes=a-b", "bytes=a-" or "bytes=-n" against size; a
// range past the end is errUnsatisfiable, several ranges are refused.
func parseRange(h string, size int64) (byteRange, error) {
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return byteRange{}, errdefs.Invalid("Range %q: want one range, bytes=start-end", h)
	}
	a, b, ok := strings.Cut(spec, "-")
	if !ok {
		return byteRange{}, errdefs.Invalid("Range %q: want bytes=start-end", h)
	}
	num := func(s string) (int64, error) {
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || v < 0 {
			return 0, errdefs.Invalid("Range %q: %q is not a byte position", h, s)
		}
		return v, nil
	}
	if a == "" { // the last b bytes
		n, err := num(b)
		if err != nil {
			return byteRange{}, err
		}
		// RFC 9110 §14.1.3: a suffix of 0 bytes, or any suffix of an
		// empty file, selects nothing.
		if n = min(n, size); n == 0 {
			return byteRange{}, errUnsatisfiable(h, size)
		}
		return byteRange{start: size - n, length: n}, nil
	}
	start, err := num(a)
	if err != nil {
		return byteRange{}, err
	}
	if start >= size {
		return byteRange{}, errUnsatisfiable(h, size)
	}
	end := size - 1
	if b != "" {
		if end, err = num(b); err != nil {
			return byteRange{}, err
		}
		if end < start {
			return byteRange{}, errdefs.Invalid("Range %q ends before it starts", h)
		}
		end = min(end, size-1)
	}
	return byteRange{start: start, length: end - start + 1}, nil
}

// rangeError is a range that does not overlap the file: 416.
type rangeError struct{ msg string }

func (e *rangeError) Error() string { return e.msg }

func errUnsatisfiable(h string, size int64) error {
	return &rangeError{msg: fmt.Sprintf("Range %q is not satisfiable for a file of %d bytes", h, size)}
}

// download serves GET /files/download: the whole file, one byte range
// (Range: 206, or 416 past the end), or lines (offset: the first, from 1;
// limit: how many).
func (h *Handler) download(w http.ResponseWriter, r *http.Request, id string) {
	q := r.URL.Query()
	p := q.Get("path")
	if p == "" {
		writeError(w, missingQuery("path"))
		return
	}
	rng := r.Header.Get("Range")
	lines := q.Has("offset") || q.Has("limit")
	if rng != "" && lines {
		writeError(w, errdefs.Invalid("give Range or offset and limit, not both"))
		return
	}
	if (rng != "" || lines) && h.cfg.Files == nil {
		writeError(w, errdefs.NotImplemented("ranged and line-based downloads are not served here"))
		return
	}
	ctx := r.Context()
	status := http.StatusOK
	var rc io.ReadCloser
	var size int64
	var err error
	switch {
	case rng != "":
		// A range is of what a plain download sends: a link's target.
		var fi *service.FileStat
		if fi, err = h.cfg.Files.StatTarget(ctx, id, p); err != nil {
			break
		}
		var br byteRange
		if br, err = parseRange(rng, fi.Size); err != nil {
			var re *rangeError
			if errors.As(err, &re) {
				w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(fi.Size, 10))
				writeErrorStatus(w, http.StatusRequestedRangeNotSatisfiable, service.CodeRangeNotSatisfiable, re.msg)
				return
			}
			break
		}
		if rc, size, err = h.cfg.Files.ReadRange(ctx, id, p, br.start, br.length); err != nil {
			break
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", br.start, br.start+br.length-1, size))
		size, status = br.length, http.StatusPartialContent
	case lines:
		rc, err = h.lines(ctx, id, p, q.Get("offset"), q.Get("limit"))
		size = -1
	default:
		rc, size, err = h.cfg.Execd.Download(ctx, id, p)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	if size >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	}
	w.WriteHeader(status)
	if _, err := io.Copy(w, rc); err != nil {
		// Headers are sent: break the connection so that the client sees
		// a short body, not a complete one.
		panic(http.ErrAbortHandler)
	}
}

// lines opens the lines of file p from line offset (1-based; default 1),
// at most limit of them (default: all), each with its line ending. Lines
// stream through in pieces, skipped ones too: the daemon holds no more of
// the file than its buffer, however long a line is.
func (h *Handler) lines(ctx context.Context, id, p, offset, limit string) (io.ReadCloser, error) {
	first, n := int64(1), int64(-1)
	var err error
	if offset != "" {
		if first, err = strconv.ParseInt(offset, 10, 64); err != nil || first < 1 {
			return nil, errdefs.Invalid("offset %q: want a line number from 1", offset)
		}
	}
	if limit != "" {
		if n, err = strconv.ParseInt(limit, 10, 64); err != nil || n < 0 {
			return nil, errdefs.Invalid("limit %q: want a number of lines", limit)
		}
	}
	rc, _, err := h.cfg.Execd.Download(ctx, id, p)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		defer rc.Close()
		pw.CloseWithError(copyLines(pw, bufio.NewReader(rc), first, n))
	}()
	return pr, nil
}

// copyLines copies lines first (from 1) to first+n-1 of r to w (n < 0:
// to the end), reading r in slices of its buffer.
func copyLines(w io.Writer, r *bufio.Reader, first, n int64) error {
	// line-first < n, not line < first+n, which overflows for a huge n.
	for line := int64(1); n < 0 || line-first < n; {
		b, err := r.ReadSlice('\n')
		if line >= first && len(b) > 0 {
			if _, werr := w.Write(b); werr != nil {
				return werr
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull): // the same line goes on
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		default:
			line++
		}
	}
	return nil
}
