package agent

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// ttyTerm is the TERM of every tty process, before the request's Env.
const ttyTerm = "TERM=xterm-256color"

// procIO holds the ends of a detached process's standard streams.
type procIO struct {
	// child are the process's fds 0, 1 and 2 (a pty's slave thrice),
	// closed in the agent once it has started.
	child [3]*os.File
	// stdin is where its input goes (a pipe, or the pty's master); nil
	// when it reads /dev/null.
	stdin *os.File
	// outs are what its output is read from, by stream: the master, or
	// the stdout and stderr pipes.
	outs []*os.File
	// master is the pty's master; nil without a tty.
	master *os.File
}

// closeChild closes the child's ends.
func (pio *procIO) closeChild() {
	for i, f := range pio.child {
		if f != nil && (i == 0 || f != pio.child[i-1]) {
			f.Close()
		}
	}
}

// closeAll closes every end, for a process that did not start.
func (pio *procIO) closeAll() {
	pio.closeChild()
	for _, f := range append(pio.outs, pio.stdin) {
		if f != nil {
			f.Close()
		}
	}
}

// pipeIO makes the pipes of a process without a tty: stdout and stderr,
// and stdin when it takes input (else it reads /dev/null).
func pipeIO(stdin bool) (*procIO, error) {
	pio := &procIO{}
	for i := 1; i <= 2; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			pio.closeAll()
			return nil, fmt.Errorf("create pipe: %w", err)
		}
		pio.outs, pio.child[i] = append(pio.outs, r), w
	}
	var err error
	if stdin {
		pio.child[0], pio.stdin, err = os.Pipe()
	} else {
		pio.child[0], err = os.Open(os.DevNull)
	}
	if err != nil {
		pio.closeAll()
		return nil, fmt.Errorf("open stdin: %w", err)
	}
	return pio, nil
}

// ptyIO opens a pseudo-terminal of rows x cols for a process running as
// uid and gid (negative: the agent's own user), who then owns its slave as
// a login's user does. The agent's end, the master, is non-blocking, so
// that closing it ends a read or write in progress; creack/pty leaves it
// blocking, so it is opened again from the fd.
func ptyIO(rows, cols uint16, uid, gid int) (*procIO, error) {
	ptmx, slave, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open a pty: %w", err)
	}
	// The size is the slave's before the process starts.
	err = pty.Setsize(slave, &pty.Winsize{Rows: rows, Cols: cols})
	if err == nil && uid >= 0 {
		err = slave.Chown(uid, gid)
	}
	fd := -1
	if err == nil {
		fd, err = unix.FcntlInt(ptmx.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	}
	ptmx.Close()
	if err == nil {
		if err = unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		slave.Close()
		return nil, fmt.Errorf("set up pty %s: %w", slave.Name(), err)
	}
	master := os.NewFile(uintptr(fd), "/dev/ptmx")
	return &procIO{child: [3]*os.File{slave, slave, slave}, stdin: master, outs: []*os.File{master}, master: master}, nil
}

// setSize sets the size of the terminal whose master is f. (pty.Setsize
// would take the fd, and with it make f blocking.)
func setSize(f *os.File, rows, cols uint16) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	ctlErr := rc.Control(func(fd uintptr) {
		err = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
	if ctlErr != nil {
		return ctlErr
	}
	return err
}

// loginShell returns the login shell /etc/passwd gives uid, or /bin/sh
// when it gives none that exists or gives one that refuses logins
// (nologin, false).
func loginShell(uid int) string {
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return "/bin/sh"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) != 7 || fields[2] != strconv.Itoa(uid) {
			continue
		}
		shell := fields[6]
		if base := filepath.Base(shell); shell == "" || base == "nologin" || base == "false" {
			break
		}
		if fi, err := os.Stat(shell); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return shell
		}
		break
	}
	return "/bin/sh"
}
