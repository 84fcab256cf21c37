package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/internal/buildcache"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// recipe is a built-in image: a Debian root filesystem that mmdebstrap
// makes from packages alone, so it builds with no registry in reach.
type recipe struct {
	packages []string
	env      []string // added to baseEnv
	npm      *npmPart // a second layer from the npm registry, or nil
}

// pythonPackages are the Debian packages of the python image, which the
// code-interpreter image has as well.
var pythonPackages = []string{"python3", "python3-pip", "python3-venv", "python-is-python3",
	"python3-numpy", "python3-pandas", "python3-matplotlib"}

// recipes are the built-in images, by normalized reference.
var recipes = map[string]recipe{
	"agent2env/python:latest": {
		packages: append(slices.Clone(pythonPackages), "ca-certificates", "passwd"),
		env:      []string{"PYTHONUNBUFFERED=1"},
	},
	"agent2env/node:latest": {
		packages: []string{"nodejs", "npm", "ca-certificates", "passwd"},
	},
	"agent2env/agent:latest": agentRecipe,
	// The default image of contexts and sessions of every language: one
	// sandbox runs python, javascript and bash kernels side by side. Its
	// agent answers OpenSandbox's code-interpreter readiness probe
	// (agent.EnvJupyterProbe), as OpenSandbox's code-interpreter image
	// does with its Jupyter server, so that the sandboxes of its warm pools
	// serve the OpenSandbox SDKs too.
	// Its python kernels run IPython syntax (magics, !cmd, obj?) with
	// Debian's IPython, which they import on a cell's first need.
	"agent2env/code-interpreter:latest": {
		packages: append(slices.Clone(pythonPackages), "python3-ipython", "nodejs", "ca-certificates", "passwd"),
		env:      []string{"PYTHONUNBUFFERED=1", jupyterProbe},
	},
}

// jupyterProbe is agent.EnvJupyterProbe set to agent.JupyterProbeAddr
// (TestJupyterProbeEnv keeps them the same; the agent package is not
// imported for a string).
const jupyterProbe = "AGENT2ENV_JUPYTER_PROBE=127.0.0.1:44771"

const buildSuite = "bookworm"

var baseEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/home/sandbox",
	"LANG=C.UTF-8",
}

// customizeHook runs with the root filesystem as $1 once the packages are
// installed. The user matches sandbox.UserID/GroupID/HomeDir/WorkDir.
const customizeHook = `set -e
chroot "$1" groupadd --gid 1000 sandbox
chroot "$1" useradd --uid 1000 --gid 1000 --home-dir /home/sandbox --create-home --shell /bin/bash sandbox
install -d -o 1000 -g 1000 -m 0755 "$1/workspace"
find "$1/var/lib/apt/lists" "$1/var/cache/apt" -type f -delete`

// profileHook runs after customizeHook in every image. Debian's
// /etc/profile asks id(1) for the user's id, twice for an interactive
// shell: a fork and an exec in every login shell, which the E2B SDKs start
// for every command they run (bash -l -c). bash has the id as $EUID; sh
// (dash), which has not, still asks id.
const profileHook = `set -e
sed -i 's/"$(id -u)"/"${EUID:-$(id -u)}"/' "$1/etc/profile"`

// e2bHomeHook runs after customizeHook in every image: /home/user, the
// home of E2B's sandbox user, which code written for E2B names by its
// absolute path (its files API, commands, open() in run_code), is a link
// to the sandbox user's home. A link in the image holds on every runtime
// and a read-only root filesystem, through snapshots, and for every
// program in the sandbox.
const e2bHomeHook = `set -e
ln -s /home/sandbox "$1/home/user"`

// matplotlibHook runs after customizeHook in images with Debian's
// matplotlib, whose matplotlib-*-nspkg.pth (a setuptools namespace shim for
// mpl_toolkits) makes every Python process import importlib.util,
// contextlib, functools, collections and warnings as it starts: some
// 0.7 MiB of each idle Python kernel, one in each of thousands of
// sandboxes. Without the shim and mpl_toolkits/__init__.py (which would
// import pkg_resources instead), mpl_toolkits is a namespace package
// (PEP 420), as in matplotlib 3.7 on; mpl_toolkits.mplot3d and pyplot's 3d
// projection import as before.
const matplotlibHook = `set -e
d="$1/usr/lib/python3/dist-packages"
rm -f "$d"/matplotlib-*-nspkg.pth "$d/mpl_toolkits/__init__.py" "$d"/mpl_toolkits/__pycache__/__init__.*.pyc`

// pipHook runs after customizeHook in images with Debian's Python, which
// refuses pip installs outside a virtual environment (PEP 668: its
// EXTERNALLY-MANAGED file). A sandbox is the environment: its user's pip
// installs into ~/.local, as on a Python without the marker, which the
// sandbox's programs and its kernels (from their next cell) import.
const pipHook = `set -e
rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED`

// options are the mmdebstrap options that shape the result; with the
// suite and the image config they make the recipe text.
func (rc recipe) options() []string {
	opts := []string{
		"--variant=apt",
		"--format=tar",
		"--include=" + strings.Join(rc.packages, ","),
		// Recommends would pull in compilers and X libraries.
		`--aptopt=APT::Install-Recommends "false"`,
		"--dpkgopt=path-exclude=/usr/share/doc/*",
		"--dpkgopt=path-include=/usr/share/doc/*/copyright",
		"--dpkgopt=path-exclude=/usr/share/man/*",
		"--dpkgopt=path-exclude=/usr/share/info/*",
		"--dpkgopt=path-exclude=/usr/share/locale/*",
		"--customize-hook=" + customizeHook,
		"--customize-hook=" + profileHook,
		"--customize-hook=" + e2bHomeHook,
	}
	if slices.Contains(rc.packages, "python3-pip") {
		opts = append(opts, "--customize-hook="+pipHook)
	}
	if slices.Contains(rc.packages, "python3-matplotlib") {
		opts = append(opts, "--customize-hook="+matplotlibHook)
	}
	return opts
}

// args is the mmdebstrap command line that writes the root filesystem
// tar to target. mode, mirror and verbosity do not change what is built,
// so they are not part of the recipe text. --verbose passes dpkg's output
// on: its "Setting up" lines are the build's progress while packages
// install.
func (rc recipe) args(mode, target, mirror string) []string {
	a := append([]string{"--mode=" + mode, "--verbose"}, rc.options()...)
	a = append(a, buildSuite, target)
	if mirror != "" {
		a = append(a, mirror)
	}
	return a
}

func (rc recipe) config() v1.Config {
	return v1.Config{
		Env:        append(append([]string(nil), baseEnv...), rc.env...),
		Cmd:        []string{"/bin/bash"},
		WorkingDir: "/workspace",
	}
}

// text is everything that determines the built Debian layer (the npm
// layer, if any, has its own).
func (rc recipe) text() string {
	cfg, err := json.Marshal(rc.config())
	if err != nil {
		panic(err) // a v1.Config always marshals
	}
	return strings.Join(rc.options(), "\n") + "\n" + buildSuite + "\n" + string(cfg) + "\n"
}

// hash names the recipe's build in the cache: a changed recipe misses.
func (rc recipe) hash() string {
	sum := sha256.Sum256([]byte(rc.text()))
	return hex.EncodeToString(sum[:])
}

// Build builds a built-in image, such as "agent2env/python" or
// "agent2env/code-interpreter" (tag "latest" implied; the namespace too:
// "agent" is "agent2env/agent"), and stores it. A build cached in the cache dir
// under the recipe's hash is imported instead of built again. Concurrent
// Pull, Ensure and Build calls for the same ref share one operation, and
// builds of one recipe by several processes wait for each other.
func (s *Store) Build(ctx context.Context, name string, p ProgressFunc) (*Image, error) {
	r, rc, err := builtinRecipe(name)
	if err != nil {
		return nil, fmt.Errorf("build image %s: %w", name, err)
	}
	return s.do(ctx, r.key, p, func(ctx context.Context, p ProgressFunc) (*Image, error) {
		return s.build(ctx, r, rc, p)
	})
}

// builtinRecipe returns the reference and recipe of the built-in image
// name ("agent2env/python", or "python" for short).
func builtinRecipe(name string) (reference, recipe, error) {
	r, err := parseRef(name)
	if err != nil {
		return r, recipe{}, err
	}
	rc, ok := recipes[r.key]
	if !ok && !strings.ContainsAny(name, "/:@") {
		if short, err := parseRef(builtinNamespace + name); err == nil {
			if rc, ok = recipes[short.key]; ok {
				r = short
			}
		}
	}
	if !ok {
		return r, recipe{}, errdefs.Invalid("no built-in recipe for %s (have %s)", r.key, strings.Join(builtinNames(), ", "))
	}
	return r, rc, nil
}

func builtinNames() []string {
	names := make([]string, 0, len(recipes))
	for n := range recipes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (s *Store) build(ctx context.Context, r reference, rc recipe, p ProgressFunc) (*Image, error) {
	tars, err := s.buildLayers(ctx, rc, p)
	if err != nil {
		return nil, fmt.Errorf("build image %s: %w", r.key, err)
	}
	var diffIDs []v1.Hash
	var layers []layerSource
	for _, tarPath := range tars {
		diffID, size, err := fileDigest(ctx, tarPath, "hashing "+filepath.Base(tarPath), p)
		if err != nil {
			return nil, fmt.Errorf("build image %s: %w", r.key, err)
		}
		diffIDs = append(diffIDs, diffID)
		layers = append(layers, layerSource{size: size, open: func() (io.ReadCloser, error) { return os.Open(tarPath) }})
	}
	cfg := v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config:       rc.config(),
		RootFS:       v1.RootFS{Type: "layers", DiffIDs: diffIDs},
	}
	config, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("build image %s: %w", r.key, err)
	}
	src := source{
		refs:   []reference{r},
		config: config,
		layers: layers,
	}
	imgs, err := s.commit(ctx, src, p)
	if err != nil {
		return nil, fmt.Errorf("build image %s: %w", r.key, err)
	}
	return imgs[0], nil
}

// buildLayers returns the recipe's layer tars, bottom first: the Debian
// root filesystem and, when the recipe has one, the npm layer, built side
// by side (one waits on the Debian mirror and dpkg, the other on the npm
// registry). Then it prunes other versions' builds from the cache dir.
func (s *Store) buildLayers(ctx context.Context, rc recipe, p ProgressFunc) ([]string, error) {
	tars, err := s.buildLayerTars(ctx, rc, p)
	if err == nil {
		s.pruneCache()
	}
	return tars, err
}

// buildLayerTars is buildLayers without the pruning.
func (s *Store) buildLayerTars(ctx context.Context, rc recipe, p ProgressFunc) ([]string, error) {
	if rc.npm == nil {
		tarPath, err := s.buildTar(ctx, rc, p)
		if err != nil {
			return nil, err
		}
		return []string{tarPath}, nil
	}
	var mu sync.Mutex
	locked := func(ev Progress) {
		mu.Lock()
		defer mu.Unlock()
		report(p, ev)
	}
	tars := make([]string, 2)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		tars[0], err = s.buildTar(gctx, rc, locked)
		return err
	})
	g.Go(func() (err error) {
		tars[1], err = s.buildNPM(gctx, rc.npm, locked)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return tars, nil
}

// buildTar returns the path of the recipe's root filesystem tar in the
// cache dir, running mmdebstrap first if it is not there.
func (s *Store) buildTar(ctx context.Context, rc recipe, p ProgressFunc) (string, error) {
	out := filepath.Join(s.cacheDir, rc.hash()+".tar")
	err := s.cached(ctx, out, "root filesystem", p, func(lock *os.File) error {
		return s.mmdebstrap(ctx, rc, out, lock, p)
	})
	return out, err
}

// cached runs build to make out, a file in the cache dir, unless out is
// there already, which it then marks used (its time), so that pruning by
// other versions keeps it. It holds out's build lock meanwhile, which
// build is given, so that builds of the same file by several processes
// wait for each other.
func (s *Store) cached(ctx context.Context, out, what string, p ProgressFunc, build func(lock *os.File) error) error {
	if err := os.MkdirAll(s.cacheDir, 0o755); err != nil {
		return fmt.Errorf("create cache dir: %w", err)
	}
	lock, err := lockFile(ctx, out+".lock", func() {
		report(p, Progress{Phase: PhaseBuild, Item: "waiting for another build of the same " + what})
	})
	if err != nil {
		return fmt.Errorf("lock build cache: %w", err)
	}
	defer lock.Close()
	if _, err := os.Stat(out); err == nil {
		report(p, Progress{Phase: PhaseBuild, Item: "using cached " + out})
		if err := buildcache.MarkUsed(out); err != nil {
			s.log.Debug("cannot mark the cached build used", logPath, out, "err", err)
		}
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	start := time.Now()
	if err := build(lock); err != nil {
		return err
	}
	s.log.Info("built "+what, logPath, out, "took", time.Since(start).Round(time.Second))
	return nil
}

// mmdebstrap runs the build in a work dir next to out and renames the
// finished tar to out. The caller holds lock, the recipe's build lock;
// mmdebstrap inherits it, so that should this process die mid-build, the
// next build of the recipe waits for the orphaned one to end. Cancelling
// ctx stops mmdebstrap (it unmounts what it mounted on SIGTERM) and
// removes the work dir.
func (s *Store) mmdebstrap(ctx context.Context, rc recipe, out string, lock *os.File, p ProgressFunc) (err error) {
	work := strings.TrimSuffix(out, ".tar") + ".build"
	// A work dir left by a build that died is stale: the lock is ours.
	if err := removeBuildDir(work); err != nil {
		return fmt.Errorf("clean stale build dir: %w", err)
	}
	if err := os.Mkdir(work, 0o755); err != nil {
		return err
	}
	defer func() {
		if rmErr := removeBuildDir(work); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("clean build dir: %w", rmErr))
		}
	}()
	mode := "unshare"
	if os.Geteuid() == 0 {
		mode = "root"
	}
	partial := filepath.Join(work, "rootfs.tar")
	cmd := exec.CommandContext(ctx, "mmdebstrap", rc.args(mode, partial, s.mirror)...)
	// mmdebstrap makes its chroot under TMPDIR: keep it in the work dir
	// so a killed build leaves nothing elsewhere.
	cmd.Env = append(os.Environ(), "TMPDIR="+work)
	cmd.ExtraFiles = []*os.File{lock}
	// Its own process group, so that cancelling reaches apt and dpkg too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	log := &lineWriter{line: func(line string) {
		if step, ok := buildStep(line); ok {
			report(p, Progress{Phase: PhaseBuild, Item: step})
		}
	}}
	cmd.Stdout = log
	cmd.Stderr = log
	s.log.Info("running mmdebstrap", "args", cmd.Args)
	if err := cmd.Run(); err != nil {
		// WaitDelay kills mmdebstrap alone: what of its group outlives
		// it (apt, dpkg) would write on in the work dir while the
		// deferred removal runs, and leave it behind. (No process: it
		// never started, a context cancelled first.)
		if cmd.Process != nil {
			endGroup(cmd.Process.Pid)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("mmdebstrap: %w: %s", err, strings.Join(log.tail, "\n"))
	}
	f, err := os.Open(partial)
	if err != nil {
		return fmt.Errorf("mmdebstrap output: %w", err)
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return err
	}
	if err := os.Rename(partial, out); err != nil {
		return err
	}
	return syncDir(filepath.Dir(out))
}

// endGroup kills what is left of process group pgid and waits, a few
// seconds at most, for it to be gone.
func endGroup(pgid int) {
	if syscall.Kill(-pgid, syscall.SIGKILL) != nil {
		return // nothing left
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
	}
}

// buildStep picks the progress out of a line of mmdebstrap output: its
// own "I: " lines and dpkg's "Setting up <package> (<version>) ...".
func buildStep(line string) (string, bool) {
	if step, ok := strings.CutPrefix(line, "I: "); ok {
		return step, true
	}
	if strings.HasPrefix(line, "Setting up ") {
		return strings.TrimSuffix(line, " ..."), true
	}
	return "", false
}

// lineWriter calls line for every complete line written to it and keeps
// the last lines for error messages.
type lineWriter struct {
	buf  []byte
	tail []string
	line func(string)
}

const tailLines = 20

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		l := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.line(l)
		if w.tail = append(w.tail, l); len(w.tail) > tailLines {
			w.tail = w.tail[1:]
		}
	}
}

// lockFile takes an exclusive flock on path and returns the locked file;
// closing it (in every process that has it) releases the lock. It polls,
// so that ctx can end the wait, and calls waiting once if it must wait.
func lockFile(ctx context.Context, path string, waiting func()) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for first := true; ; first = false {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		if first {
			waiting()
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// fileDigest returns the sha256 digest and the size of a file, reporting
// the bytes read as build progress of item.
func fileDigest(ctx context.Context, path, item string, p ProgressFunc) (v1.Hash, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return v1.Hash{}, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return v1.Hash{}, 0, err
	}
	h := sha256.New()
	n, err := io.Copy(h, newProgressReader(ctx, f, PhaseBuild, item, st.Size(), p))
	if err != nil {
		return v1.Hash{}, 0, err
	}
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}, n, nil
}

// removeBuildDir deletes a build work dir. A killed mmdebstrap may leave
// /proc, /sys or /dev mounted in its chroot, and deleting through those
// would touch the host, so they are detached first; if any remains the
// dir is left alone.
func removeBuildDir(dir string) error {
	mounts, err := buildcache.MountsUnder(dir)
	if err != nil {
		return err
	}
	// Deepest first.
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("unmount %s: %w", m, err)
		}
	}
	if left, err := buildcache.MountsUnder(dir); err != nil {
		return err
	} else if len(left) > 0 {
		return fmt.Errorf("%s still has mounts (%s); not removing it", dir, strings.Join(left, ", "))
	}
	return os.RemoveAll(dir)
}
