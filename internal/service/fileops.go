package service

// File operations beyond upload, download, stat, list and mkdir (files.go),
// for the OpenSandbox surface's execd files API (docs/opensandbox.md §9):
// move, remove, permissions, ranged reads, search, replace and walks.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
)

// Move renames the file or directory from to to in sandbox id. A missing
// source is ErrNotFound (FILE_NOT_FOUND).
func (s *Sandboxes) Move(ctx context.Context, id, from, to string) error {
	if from == "" || to == "" {
		return errdefs.Invalid("both the source and the destination are required")
	}
	return s.m.Move(ctx, id, from, to)
}

// Remove deletes the file at p in sandbox id; a directory only when
// recursive, with its contents. A missing file is ErrNotFound
// (FILE_NOT_FOUND).
func (s *Sandboxes) Remove(ctx context.Context, id, p string, recursive bool) error {
	if p == "" {
		return errdefs.Invalid("path is required")
	}
	if !recursive {
		fi, err := s.Stat(ctx, id, p)
		if err != nil {
			return err
		}
		if fi.IsDir {
			return errdefs.Invalid("%s is a directory", p)
		}
	}
	return s.m.Remove(ctx, id, p, recursive)
}

// fileCommandTimeout bounds the commands that change a file's mode or
// owner.
const fileCommandTimeout = 30 * time.Second

// fileCommand runs argv in sandbox id as its user: the file operations the
// agent has no call for (chmod, chown), which may do what the sandbox's
// user may. A failure is ErrPermissionDenied with the command's message,
// ErrInvalidArgument when it names a user or group the sandbox does not
// have, or ErrNotFound when the file is missing.
func (s *Sandboxes) fileCommand(ctx context.Context, id, p string, argv ...string) error {
	if _, err := s.Stat(ctx, id, p); err != nil {
		return err
	}
	res, err := s.m.Exec(ctx, id, manager.ExecRequest{Command: argv, Timeout: fileCommandTimeout})
	if err != nil {
		return err
	}
	defer res.Release()
	if res.ExitCode != 0 {
		msg, class := strings.TrimSpace(res.Stderr), errdefs.ErrPermissionDenied
		// coreutils says "invalid user", busybox "unknown user".
		for _, unknown := range []string{"invalid user", "invalid group", "unknown user", "unknown group"} {
			if strings.Contains(msg, unknown) {
				class = errdefs.ErrInvalidArgument
			}
		}
		return fmt.Errorf("%s %s: %s: %w", argv[0], p, msg, class)
	}
	return nil
}

// Chmod sets the permission bits of the file at p in sandbox id (a
// symbolic link's target's), with setuid, setgid and sticky (Go's
// fs.ModeSetuid, fs.ModeSetgid, fs.ModeSticky), as the sandbox's user may.
func (s *Sandboxes) Chmod(ctx context.Context, id, p string, mode fs.FileMode) error {
	p, err := CleanPath(p)
	if err != nil {
		return err
	}
	return s.fileCommand(ctx, id, p, "chmod", OctalMode(mode), "--", p)
}

// OctalMode is mode as chmod(1) takes it: four octal digits, the
// permission bits with setuid (4000), setgid (2000) and sticky (1000).
func OctalMode(mode fs.FileMode) string {
	bits := uint32(mode.Perm())
	for flag, bit := range map[fs.FileMode]uint32{fs.ModeSetuid: 0o4000, fs.ModeSetgid: 0o2000, fs.ModeSticky: 0o1000} {
		if mode&flag != 0 {
			bits |= bit
		}
	}
	return fmt.Sprintf("%04o", bits)
}

// Chown gives the file at p in sandbox id to owner and group (names or
// numbers; "" keeps either), as the sandbox's user may: in practice only
// to itself and its own groups.
func (s *Sandboxes) Chown(ctx context.Context, id, p, owner, group string) error {
	p, err := CleanPath(p)
	if err != nil {
		return err
	}
	if owner == "" && group == "" {
		return nil
	}
	for _, v := range []string{owner, group} {
		if strings.ContainsAny(v, ":\x00") || strings.HasPrefix(v, "-") {
			return errdefs.Invalid("owner and group must be names or numbers, not %q", v)
		}
	}
	spec := owner
	if group != "" {
		spec += ":" + group
	}
	return s.fileCommand(ctx, id, p, "chown", spec, "--", p)
}

// ReadRange opens length bytes of the file at p in sandbox id from offset
// (length < 0: to its end), which the agent reads from there without
// sending what is before it; it returns the file's size (a symbolic
// link's target's, as StatTarget). An offset at or past the end of a file
// is ErrInvalidArgument (RANGE_NOT_SATISFIABLE), unless the file is empty
// and offset 0.
func (s *Sandboxes) ReadRange(ctx context.Context, id, p string, offset, length int64) (io.ReadCloser, int64, error) {
	if offset < 0 {
		return nil, 0, errdefs.Invalid("offset %d is negative", offset)
	}
	fi, err := s.StatTarget(ctx, id, p)
	if err != nil {
		return nil, 0, err
	}
	size := fi.Size
	if offset > 0 && offset >= size {
		return nil, size, errdefs.WithCode(errdefs.Invalid("offset %d is past the end of %s (%d bytes)", offset, p, size), CodeRangeNotSatisfiable)
	}
	rc, _, err := s.m.DownloadFrom(ctx, id, p, offset)
	if err != nil {
		return nil, 0, err
	}
	var r io.Reader = rc
	if length >= 0 {
		r = io.LimitReader(rc, length)
	}
	return readCloser{Reader: r, Closer: rc}, size, nil
}

// CodeRangeNotSatisfiable is the code of a range past a file's end.
const CodeRangeNotSatisfiable = "RANGE_NOT_SATISFIABLE"

type readCloser struct {
	io.Reader
	io.Closer
}

// MaxReplaceBytes bounds the files Replace rewrites.
const MaxReplaceBytes = 64 << 20

// Replace replaces every occurrence of old with new in the file at p in
// sandbox id, keeping its mode, and returns how many it replaced (the file
// is not written when none).
func (s *Sandboxes) Replace(ctx context.Context, id, p, old, new string) (int, error) {
	if old == "" {
		return 0, errdefs.Invalid("the text to replace is empty")
	}
	fi, err := s.Stat(ctx, id, p)
	if err != nil {
		return 0, err
	}
	if !fi.Regular {
		return 0, errdefs.Invalid("%s is not a regular file", p)
	}
	if fi.Size > MaxReplaceBytes {
		return 0, errdefs.Invalid("%s is %d bytes, above the %d-byte limit of a replace", p, fi.Size, MaxReplaceBytes)
	}
	rc, _, err := s.m.Download(ctx, id, p)
	if err != nil {
		return 0, err
	}
	b, err := io.ReadAll(io.LimitReader(rc, MaxReplaceBytes+1))
	rc.Close()
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", p, err)
	}
	n := bytes.Count(b, []byte(old))
	if n == 0 {
		return 0, nil
	}
	var mode uint32
	if _, err := fmt.Sscanf(fi.Mode, "%o", &mode); err != nil {
		return 0, fmt.Errorf("mode %q of %s: %w", fi.Mode, p, err)
	}
	out := bytes.ReplaceAll(b, []byte(old), []byte(new))
	if _, err := s.m.Upload(ctx, id, p, fs.FileMode(mode), bytes.NewReader(out)); err != nil {
		return 0, err
	}
	return n, nil
}

// MaxWalkEntries bounds the entries a walk or a search returns: past it
// the result is cut, and says so.
const MaxWalkEntries = 10000

// maxWalkReads bounds the entries a walk or a search reads, whether it
// returns them or not: a search of a large tree for a few names is cut
// there, and says so.
const maxWalkReads = 100 * MaxWalkEntries

// Walk describes the entries under directory root of sandbox id down to
// depth levels (1: its entries; 0 or less: all), in lexical order of their
// paths, root excluded; symbolic links are not followed. A directory
// below root that cannot be read (the sandbox's user may not, or it went
// away) is listed but not descended into. truncated says the walk
// stopped at MaxWalkEntries entries, or at maxWalkReads read: there are
// more.
func (s *Sandboxes) Walk(ctx context.Context, id, root string, depth int) (fis []FileStat, truncated bool, err error) {
	return s.walk(ctx, id, root, depth, func(FileStat) bool { return true })
}

// Search returns the entries under directory root of sandbox id whose
// path matches the glob pattern ("" or "**": all), symbolic links not
// followed, in lexical order, skipping what cannot be read and cut as
// Walk's. A pattern without "/" is matched against a file's name, one
// with "/" against its path relative to root; "*" and "?" do not cross
// "/", "**" does.
func (s *Sandboxes) Search(ctx context.Context, id, root, pattern string) (fis []FileStat, truncated bool, err error) {
	root, err = CleanPath(root)
	if err != nil {
		return nil, false, err
	}
	re, err := globRegexp(pattern)
	if err != nil {
		return nil, false, err
	}
	byName := !strings.Contains(pattern, "/")
	return s.walk(ctx, id, root, 0, func(fi FileStat) bool {
		rel := strings.TrimPrefix(strings.TrimPrefix(fi.Path, root), "/")
		if byName {
			return re.MatchString(path.Base(fi.Path))
		}
		return re.MatchString(rel)
	})
}

func (s *Sandboxes) walk(ctx context.Context, id, root string, depth int, keep func(FileStat) bool) ([]FileStat, bool, error) {
	fi, err := s.Stat(ctx, id, root)
	if err != nil {
		return nil, false, err
	}
	if !fi.IsDir {
		return nil, false, errdefs.Invalid("%s is not a directory", root)
	}
	w := walker{readDir: func(dir string) ([]FileStat, error) { return s.ReadDir(ctx, id, dir) }, depth: depth, keep: keep}
	if err := w.visit(fi.Path, 1, true); err != nil && !errors.Is(err, errWalkCut) {
		return nil, false, err
	}
	return w.out, w.truncated, nil
}

// walker is one walk of a directory tree.
type walker struct {
	readDir   func(dir string) ([]FileStat, error)
	depth     int
	keep      func(FileStat) bool
	out       []FileStat
	read      int
	truncated bool
}

// errWalkCut ends a walk that has reached a bound.
var errWalkCut = errors.New("walk cut")

// visit walks dir, at level (its entries'); a directory that cannot be
// read is skipped, unless it is the root.
func (w *walker) visit(dir string, level int, root bool) error {
	entries, err := w.readDir(dir)
	switch {
	case err == nil:
	case !root && (errors.Is(err, errdefs.ErrPermissionDenied) || errdefs.Code(err) == api.CodeFileNotFound):
		return nil
	default:
		return err
	}
	for _, e := range entries {
		if w.read++; w.read > maxWalkReads {
			w.truncated = true
			return errWalkCut
		}
		if w.keep(e) {
			if len(w.out) == MaxWalkEntries {
				w.truncated = true
				return errWalkCut
			}
			w.out = append(w.out, e)
		}
		if e.IsDir && e.Link == "" && (w.depth <= 0 || level < w.depth) {
			if err := w.visit(e.Path, level+1, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// globClass writes the regexp of the glob class that starts at
// pattern[i] ("[", which path.Match has found well formed) to b, and
// returns the index of its "]". As in path.Match, "\" escapes the
// character after it (so "[\]]" is the class of "]"), and "^" or "!"
// first negates the class, which then matches no "/" either, as "?"
// does not.
func globClass(b *strings.Builder, pattern string, i int) int {
	i++
	b.WriteByte('[')
	if i < len(pattern) && (pattern[i] == '^' || pattern[i] == '!') {
		b.WriteString("^/")
		i++
	}
	for ; i < len(pattern) && pattern[i] != ']'; i++ {
		c := pattern[i]
		switch {
		case c == '\\' && i+1 < len(pattern):
			i++
			c = pattern[i]
		case c == '-': // unescaped: a range's, between its ends
			b.WriteByte('-')
			continue
		}
		if strings.IndexByte(`\[]^-`, c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte(']')
	return i
}

// globRegexp compiles a glob: "**" any run of characters, "*" any run
// without "/", "?" one character but "/", "[…]" a class (globClass); ""
// is "**".
func globRegexp(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		pattern = "**"
	}
	if _, err := path.Match(strings.ReplaceAll(pattern, "**", "*"), ""); err != nil {
		return nil, errdefs.Invalid("pattern %q: %v", pattern, err)
	}
	var b strings.Builder
	b.WriteString("(?s)^") // a name may hold a newline, which "**" matches too
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*':
			if i+1 < len(pattern) && pattern[i+1] == '*' {
				i++
				if i+1 < len(pattern) && pattern[i+1] == '/' { // "**/": any directories, or none
					i++
					b.WriteString("(?:.*/)?")
				} else {
					b.WriteString(".*")
				}
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '[':
			i = globClass(&b, pattern, i)
		case '\\':
			if i+1 < len(pattern) {
				i++
				b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, errdefs.Invalid("pattern %q: %v", pattern, err)
	}
	return re, nil
}
