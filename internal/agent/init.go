package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/agent2env/agent2env/internal/seccomp"
	"golang.org/x/sys/unix"
)

// Options configure Run. Fields left zero come from the environment the
// runtime started the agent with.
type Options struct {
	UID, GID int
	Cwd      string
	// SpareKernel is the language of a kernel to start at once, for the
	// first kernel request to adopt; empty is none.
	SpareKernel string
	Log         *slog.Logger
}

// Run is the agent's main: it prepares the sandbox (itself non-dumpable,
// loopback up, spare capabilities dropped, the sandbox's seccomp filter
// installed on itself for everything it will start), serves the daemon on
// the listener the runtime provided, and on SIGTERM ends every process of
// the sandbox and returns.
func Run(ctx context.Context, opts Options) error {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	// First of all, before it reads the credentials it was started with:
	// in a Pod the agent runs as the same user as the commands it starts,
	// and a process's /proc/<pid> files (environ, mem, maps, fd, ...) are
	// open to its user unless it is not dumpable, when the kernel makes
	// them root's and refuses them to anyone without CAP_SYS_PTRACE. Its
	// commands are dumpable again: an exec resets the flag.
	var oomScore *os.File
	if os.Geteuid() != 0 {
		var err error // root's from the prctl on (ServerConfig.OOMScore)
		if oomScore, err = os.OpenFile(procOOMScore, os.O_WRONLY, 0); err != nil {
			log.Warn("open the agent's oom_score_adj", "err", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the agent non-dumpable: %w", err)
	}
	// The agent idles in hundreds of sandboxes at once: keep its heap small.
	debug.SetGCPercent(50)
	// The spare threads start beside the rest of the start-up and the
	// first requests, off the sandbox's path to ready (≈ 1.5 ms of CPU,
	// more in wall time on one CPU); no user process starts before the
	// agent holds them (Server.startUser).
	spare := make(chan struct{})
	go func() {
		reserveThreads(spareThreads(pidsLimit()))
		close(spare)
	}()
	l, err := listener()
	if err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		log.Warn("bring up loopback", "err", err)
	}
	if err := dropCapability(unix.CAP_NET_ADMIN); err != nil {
		return fmt.Errorf("drop CAP_NET_ADMIN: %w", err)
	}
	// Whatever profile the container runtime applied, the sandbox's policy
	// holds from here on: a sandbox that cannot have it does not start.
	if err := seccomp.Install(); err != nil {
		return err
	}
	if os.Getpid() == 1 && opts.UID < 0 {
		shieldSignals() // and no SIGTERM to end on: Notify would undo it
	} else {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
		defer stop()
	}
	env := envForCommands(os.Environ())
	egress, services := os.Getenv(EnvEgress), os.Getenv(EnvServices)
	var reserved []int
	if egress != "" {
		env = mergeEnv(EgressEnv, env)
		reserved = append(reserved, portOf(EgressAddr))
	}
	if services != "" {
		env = mergeEnv(ServicesEnv, env)
		reserved = append(reserved, portOf(ServicesAddr))
	}
	accept := map[string]net.Listener{}
	for _, a := range []struct {
		env, name string
		cmdEnv    []string
	}{{EnvEgressAccept, AcceptEgress, EgressEnv}, {EnvServicesAccept, AcceptServices, ServicesEnv}} {
		addr := os.Getenv(a.env)
		if addr == "" {
			continue
		}
		// Before any command runs, so that none can take the address.
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("listen for the daemon's %s: %w", a.name, err)
		}
		accept[a.name] = l
		env = mergeEnv(a.cmdEnv, env)
		reserved = append(reserved, portOf(addr))
	}
	// A spare kernel's interpreter starts in NewServer, before the rest:
	// it is the longest start of a sandbox made for code.
	srv := NewServer(ServerConfig{
		Env:         env,
		Cwd:         opts.Cwd,
		UID:         opts.UID,
		GID:         opts.GID,
		Token:       os.Getenv(EnvToken),
		Accept:      accept,
		Spare:       spare,
		SpareKernel: opts.SpareKernel,
		Log:         log,
		Reserved:    reserved,
		OOMScore:    oomScore,
	})
	// Before the agent serves, so that no command can take the addresses.
	if egress != "" {
		if err := startForward(ctx, EgressAddr, egress, "egress", log); err != nil {
			return fmt.Errorf("start egress forwarder: %w", err)
		}
	}
	if services != "" {
		if err := startForward(ctx, ServicesAddr, services, "services", log); err != nil {
			return fmt.Errorf("start services forwarder: %w", err)
		}
	}
	startProbeFromEnv(ctx, log)
	// Commands never had them (envForCommands); this drops the
	// process's copies. /proc/<pid>/environ still shows the block the
	// agent was started with, which only non-dumpability keeps from its
	// user: as its memory, which holds the token and key all the same.
	for _, secret := range []string{EnvToken, EnvTLSCert, EnvTLSKey} {
		os.Unsetenv(secret)
	}

	log.Info("agent serving", "version", Version, "pid", os.Getpid())
	err = srv.Serve(ctx, l)
	if os.Getpid() == 1 {
		// Everything else in the pid namespace; PID 1 itself is spared.
		_ = syscall.Kill(-1, syscall.SIGKILL)
	}
	return err
}

// shieldSignals keeps the agent alive whatever signal its own commands
// send it, when it is its sandbox's PID 1 and runs as the same user as
// they do (a Pod's container: --uid=-1), so that the kernel's permission
// check does not protect it. The kernel drops a signal to a namespace's
// init from inside the namespace unless init handles it; Go handles the
// terminating ones, so the agent takes them and discards them (sent ones
// only: a real fault still crashes). Not SIG_IGN: an ignored signal stays
// ignored across fork and exec, so every command would start with SIGINT,
// SIGTERM and SIGHUP ignored (an interrupt would not end it, Python would
// have no KeyboardInterrupt); a handled one is the default again in the
// child. The cost: the runtime's SIGTERM is discarded too, and the
// container ends at the SIGKILL after its grace period, which takes every
// process of the namespace with it, as the agent would have.
func shieldSignals() {
	sent := make(chan os.Signal, 1)
	signal.Notify(sent, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGABRT, syscall.SIGTERM,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGXCPU, syscall.SIGXFSZ,
		syscall.SIGVTALRM, syscall.SIGIO, syscall.SIGPWR,
		syscall.SIGILL, syscall.SIGTRAP, syscall.SIGBUS, syscall.SIGFPE,
		syscall.SIGSEGV, syscall.SIGSTKFLT, syscall.SIGSYS)
	go func() {
		for range sent {
		}
	}()
}

// spareThreads returns how many idle OS threads the agent holds before
// any command runs, in a sandbox of at most limit processes: 16, or an
// eighth of the limit when that is less. The Go runtime starts a thread
// whenever a goroutine blocks in a system call with others ready to run; in
// a sandbox whose processes are used up (a fork bomb: threads count as
// processes) it cannot, and that is fatal ("failed to create new OS
// thread"). Threads it started once, it keeps.
func spareThreads(limit int64) int {
	return int(min(16, limit/8))
}

// pidsLimit reads the sandbox's process limit from its cgroup (v2 or v1),
// or returns a large number when there is none.
func pidsLimit() int64 {
	for _, f := range []string{"/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return n
		}
	}
	return math.MaxInt64
}

// reserveThreads makes the runtime start n more OS threads now, which it
// then keeps idle: each of n goroutines holds a thread of its own at once.
func reserveThreads(n int) {
	var held sync.WaitGroup
	release := make(chan struct{})
	for range n {
		held.Add(1)
		go func() {
			runtime.LockOSThread()
			held.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	held.Wait()
	close(release)
}

// listener returns the socket to serve on: an inherited fd (oci) or a TCP
// address (kubernetes), which needs a token and serves TLS when given a
// certificate and key.
func listener() (net.Listener, error) {
	if s := os.Getenv(EnvListenFD); s != "" {
		fd, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", EnvListenFD, s, err)
		}
		f := os.NewFile(uintptr(fd), "agent-listener")
		defer f.Close()
		l, err := net.FileListener(f)
		if err != nil {
			return nil, fmt.Errorf("use inherited listener fd %d: %w", fd, err)
		}
		return l, nil
	}
	if addr := os.Getenv(EnvListen); addr != "" {
		if os.Getenv(EnvToken) == "" {
			return nil, errors.New("refusing to listen on TCP without " + EnvToken)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		cert, key := os.Getenv(EnvTLSCert), os.Getenv(EnvTLSKey)
		if cert == "" && key == "" {
			return l, nil
		}
		pair, err := tls.X509KeyPair([]byte(cert), []byte(key))
		if err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("%s and %s: %w", EnvTLSCert, EnvTLSKey, err)
		}
		return tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}), nil
	}
	return nil, fmt.Errorf("neither %s nor %s is set", EnvListenFD, EnvListen)
}

// loopbackUp sets the lo interface of the sandbox's network namespace up.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// dropCapability removes c from the agent's effective, permitted and
// inheritable sets.
func dropCapability(c int) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	idx, bit := c/32, uint32(1)<<(c%32)
	if data[idx].Permitted&bit == 0 {
		return nil
	}
	data[idx].Effective &^= bit
	data[idx].Permitted &^= bit
	data[idx].Inheritable &^= bit
	return unix.Capset(&hdr, &data[0])
}
