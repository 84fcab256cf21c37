package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Options configure Run. Fields left zero come from the environment the
// runtime started the agent with.
type Options struct {
	UID, GID int
	Cwd      string
	Log      *slog.Logger
}

// Run is the agent's main: it prepares the sandbox (loopback up, spare
// capabilities dropped), serves the daemon on the listener the runtime
// provided, and on SIGTERM ends every process of the sandbox and returns.
func Run(ctx context.Context, opts Options) error {
	// The agent idles in hundreds of sandboxes at once: keep its heap small.
	debug.SetGCPercent(50)
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
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
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	env := envForCommands(os.Environ())
	if sock := os.Getenv(EnvEgress); sock != "" {
		// Before any command runs, so that none can take the address.
		if err := startEgress(ctx, sock, log); err != nil {
			return fmt.Errorf("start egress forwarder: %w", err)
		}
		env = mergeEnv(EgressEnv, env)
	}
	srv := NewServer(ServerConfig{
		Env:   env,
		Cwd:   opts.Cwd,
		UID:   opts.UID,
		GID:   opts.GID,
		Token: os.Getenv(EnvToken),
		Log:   log,
	})
	os.Unsetenv(EnvToken)

	err = srv.Serve(ctx, l)
	if os.Getpid() == 1 {
		// Everything else in the pid namespace; PID 1 itself is spared.
		_ = syscall.Kill(-1, syscall.SIGKILL)
	}
	return err
}

// listener returns the socket to serve on: an inherited fd (oci) or a TCP
// address (kubernetes).
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
		return net.Listen("tcp", addr)
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
