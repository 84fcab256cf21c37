package kubetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agent2env/agent2env/internal/testenv"
)

// A process is one component of the cluster, in a process group of its
// own, with its output in a log file.
type process struct {
	name     string
	log      string
	cmd      *exec.Cmd
	done     <-chan struct{} // closed when the process has been waited for
	stopping atomic.Bool
}

// run starts the binary name from c.Bin with args.
func (c *Cluster) run(name string, args ...string) error {
	return c.runPath(name, filepath.Join(c.Bin, name), args...)
}

// runPath starts the binary at path as the component name.
func (c *Cluster) runPath(name, path string, args ...string) error {
	log := filepath.Join(c.dir, "logs", name+".log")
	out, err := os.Create(log)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(path, args...)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = out, out
	// Its own group, so that stop reaches anything it forks; and killed
	// with the test binary, should that die without cleaning up (bound to a
	// thread of its own: see testenv.StartBound).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	done, err := testenv.StartBound(cmd, syscall.SIGKILL)
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	c.procs = append(c.procs, &process{name: name, log: log, cmd: cmd, done: done})
	return nil
}

// exited reports whether the process ended without being stopped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return !p.stopping.Load()
	default:
		return false
	}
}

// stop ends the process group: SIGTERM, then SIGKILL after 10 s.
func (p *process) stop() {
	p.stopping.Store(true)
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
	// Whatever the group still holds goes too, the leader gone or not.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.done
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
