package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// npmPart is the part of a built-in image that comes from the npm
// registry: the packages of a manifest and its lock file, installed by the
// host's npm at build time (the sandbox has no network) with install
// scripts off, in a layer of its own on top of the Debian one. What the
// skipped install scripts would have done (put native binaries in place)
// is done by links.
type npmPart struct {
	// arch is the only GOARCH the lock file installs for.
	arch string
	// prefix is the directory of the image that holds node_modules.
	prefix string
	// manifest and lock are package.json and package-lock.json.
	manifest, lock []byte
	// remove lists paths under prefix left out of the layer.
	remove []string
	// links are symbolic links made in the layer: image path → target.
	links map[string]string
	// files are files put in the layer: image path → content.
	files map[string]string
}

// text is everything of the part that determines the layer.
func (n *npmPart) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "npm %s %s\n%s\n%s\n", n.arch, n.prefix, n.manifest, n.lock)
	for _, r := range n.remove {
		b.WriteString("remove " + r + "\n")
	}
	for _, k := range sortedKeys(n.links) {
		fmt.Fprintf(&b, "link %s -> %s\n", k, n.links[k])
	}
	for _, k := range sortedKeys(n.files) {
		fmt.Fprintf(&b, "file %s\n%s\n", k, n.files[k])
	}
	return b.String()
}

// hash names the part's layer in the cache.
func (n *npmPart) hash() string {
	sum := sha256.Sum256([]byte(n.text()))
	return hex.EncodeToString(sum[:])
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// buildNPM returns the path of the npm part's layer tar in the cache
// dir, building it first if it is not there.
func (s *Store) buildNPM(ctx context.Context, n *npmPart, p ProgressFunc) (string, error) {
	if runtime.GOARCH != n.arch {
		return "", errdefs.Invalid("this image installs npm packages for %s only, and this host is %s", n.arch, runtime.GOARCH)
	}
	out := filepath.Join(s.cacheDir, n.hash()+".npm.tar")
	err := s.cached(ctx, out, "npm layer", p, func(*os.File) error {
		work := strings.TrimSuffix(out, ".tar") + ".build"
		// A work dir left by a build that died is stale: the lock is ours.
		if err := os.RemoveAll(work); err != nil {
			return fmt.Errorf("clean stale npm build dir: %w", err)
		}
		defer os.RemoveAll(work)
		root := filepath.Join(work, "root")
		if err := s.npmInstall(ctx, n, root, p); err != nil {
			return err
		}
		partial := filepath.Join(work, "layer.tar")
		if err := writeTar(root, partial); err != nil {
			return fmt.Errorf("write npm layer: %w", err)
		}
		if err := os.Rename(partial, out); err != nil {
			return err
		}
		return syncDir(s.cacheDir)
	})
	return out, err
}

// npmInstall lays the part out under root: npm install in the prefix, then the
// removals, links and files.
func (s *Store) npmInstall(ctx context.Context, n *npmPart, root string, p ProgressFunc) error {
	dir := filepath.Join(root, n.prefix)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"package.json": n.manifest, "package-lock.json": n.lock} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	report(p, Progress{Phase: PhaseBuild, Item: "npm install in " + n.prefix})
	// npm install with the lock file installs the lock's versions, checked
	// against its integrity hashes. (npm ci would too, but refuses locks
	// in which a package lists an optional dependency without a version,
	// as one of qwen-code's does.) Install scripts stay off: what they do
	// is in links.
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-save", "--ignore-scripts", "--no-audit", "--no-fund",
		"--omit=dev", "--loglevel=http")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_ENV=production", "NPM_CONFIG_UPDATE_NOTIFIER=false")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	log := &lineWriter{line: func(line string) {
		if step, ok := npmStep(line); ok {
			report(p, Progress{Phase: PhaseBuild, Item: step})
		}
	}}
	cmd.Stdout, cmd.Stderr = log, log
	s.log.Info("running npm", "args", cmd.Args, "dir", dir)
	if err := cmd.Run(); err != nil {
		if cmd.Process != nil { // as mmdebstrap's: WaitDelay kills npm alone
			endGroup(cmd.Process.Pid)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, exec.ErrNotFound) {
			return errdefs.Precondition("build needs npm on the host: %v", err)
		}
		return fmt.Errorf("npm install: %w: %s", err, strings.Join(log.tail, "\n"))
	}
	for _, r := range n.remove {
		if err := os.RemoveAll(filepath.Join(dir, r)); err != nil {
			return err
		}
	}
	for _, path := range sortedKeys(n.links) {
		at := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
			return err
		}
		// The target must exist in the layer: a wrong path fails the
		// build, not the first run of the image.
		target := n.links[path]
		if !strings.HasPrefix(target, "/") {
			target = filepath.Join(filepath.Dir(path), target)
		}
		if _, err := os.Stat(filepath.Join(root, target)); err != nil {
			return fmt.Errorf("link %s: target %s is not in the layer: %w", path, target, err)
		}
		if err := os.Remove(at); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Symlink(n.links[path], at); err != nil {
			return err
		}
	}
	for _, path := range sortedKeys(n.files) {
		at := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(at, []byte(n.files[path]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// npmStep picks the progress out of a line of npm's output: the package
// tarballs fetched ("npm http fetch GET 200 <url>.tgz 80ms") and the
// closing "added N packages" line.
func npmStep(line string) (string, bool) {
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "added ") {
		return line, true
	}
	_, rest, ok := strings.Cut(line, "http fetch GET 200 ")
	if !ok {
		return "", false
	}
	url, _, _ := strings.Cut(rest, " ")
	if !strings.HasSuffix(url, ".tgz") {
		return "", false
	}
	return "fetched " + url[strings.LastIndex(url, "/")+1:], true
}

// layerEpoch is the modification time of every entry of a layer written by
// writeTar, so that the same tree makes the same tar.
var layerEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// writeTar writes the tree under root to a layer tar at path: entries
// sorted, owned by root, at layerEpoch. Regular files, directories and
// symbolic links only.
func writeTar(root, path string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var link string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return fmt.Errorf("%s: %s files cannot go in a layer", rel, fi.Mode().Type())
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = "./" + filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.ModTime, h.AccessTime, h.ChangeTime = layerEpoch, time.Time{}, time.Time{}
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Sync()
}
