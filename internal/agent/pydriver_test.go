package agent

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/testenv"
)

var update = flag.Bool("update", false, "write kernels/python.marshal from kernels/python.py")

// compiledPython is the interpreter the driver is compiled by: CPython 3.11,
// which the built-in images install from the same Debian release as the
// host that builds them.
const compiledPython = "python3.11"

// compileDriver prints the magic number of the interpreter it runs in and
// the driver on stdin compiled by it, as pythonBootstrap compiles it.
const compileDriver = `import importlib.util, marshal, sys
code = compile(sys.stdin.buffer.read(), "<agent2env kernel>", "exec")
sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER + marshal.dumps(code))
`

// sameCode exits 0 when the compiled driver (the file argv[1]) has this
// interpreter's magic number and equals the source on stdin compiled now:
// code objects compare their bytecode, constants (the functions' code
// among them), names and line tables.
const sameCode = `import importlib.util, marshal, sys
blob = open(sys.argv[1], "rb").read()
code = compile(sys.stdin.buffer.read(), "<agent2env kernel>", "exec")
if blob[:4] != importlib.util.MAGIC_NUMBER:
    sys.exit("kernels/python.marshal was compiled by another Python (magic %s, this one's %s)" % (blob[:4].hex(), importlib.util.MAGIC_NUMBER.hex()))
if marshal.loads(blob[4:]) != code:
    sys.exit("kernels/python.marshal is not kernels/python.py compiled")
`

// TestPythonDriverCode checks that kernels/python.marshal is the driver's
// source compiled by CPython 3.11; go generate (go test -run
// TestPythonDriverCode -update) writes it after a change of the source.
func TestPythonDriverCode(t *testing.T) {
	py, err := exec.LookPath(compiledPython)
	if err != nil {
		testenv.Missing(t, "%s is needed to check the compiled kernel driver: apt-get install python3.11", compiledPython)
	}
	const path = "kernels/python.marshal"
	if *update {
		cmd := exec.Command(py, "-c", compileDriver)
		cmd.Stdin = strings.NewReader(pythonDriver)
		out, err := withoutReaping(cmd.Output)
		if err != nil {
			t.Fatalf("compile the driver: %v", err)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	cmd := exec.Command(py, "-c", sameCode, path)
	cmd.Stdin = strings.NewReader(pythonDriver)
	if out, err := withoutReaping(cmd.CombinedOutput); err != nil {
		t.Fatalf("%s: %s(run go generate ./internal/agent after changing kernels/python.py)", err, out)
	}
}

// TestPythonBootstrap runs the bootstrap as a kernel does, with inputs that
// tell which of its two paths ran: the compiled driver when the magic
// number is the interpreter's (the source may then be anything), the
// source otherwise (the compiled code may then be anything).
func TestPythonBootstrap(t *testing.T) {
	requireInterpreters(t)
	magic, err := withoutReaping(exec.Command("python3", "-c", "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())").Output)
	if err != nil {
		t.Fatal(err)
	}
	ours := strings.TrimSpace(string(magic))
	code := pythonDriverCode[4:]
	if ours != fmt.Sprintf("%x", pythonDriverCode[:4]) {
		// Another Python compiles its own: the compiled case needs code
		// this interpreter can load.
		cmd := exec.Command("python3", "-c", compileDriver)
		cmd.Stdin = strings.NewReader(pythonDriver)
		out, err := withoutReaping(cmd.Output)
		if err != nil {
			t.Fatalf("compile the driver: %v", err)
		}
		code = out[4:]
	}
	broken := "raise SystemExit('not this one')\n"
	for _, tc := range []struct{ name, input string }{
		{"compiled", driverInput(ours, code, broken)},
		{"source", driverInput("00000000", []byte(broken), pythonDriver)},
		{"what the agent writes", pythonDriverInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := bootKernel(t, tc.input); !strings.Contains(got, `"type":"ready"`) {
				t.Fatalf("no ready message: %q", got)
			}
		})
	}
}

// bootKernel starts python3 with the bootstrap and input on its stdin,
// the request pipe closed at once, and returns what it wrote on its
// control pipe (the driver's ready message, then nothing: it ends at the
// requests' end). It starts and waits through the process's reaper, as the
// agent does: once an agent of these tests runs, the reaper takes every
// child that exits, and os/exec's Wait would find none.
func bootKernel(t *testing.T, input string) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal(err)
	}
	var pipes [8]*os.File // stdin, stderr, requests, control: read and write ends
	for i := 0; i < len(pipes); i += 2 {
		if pipes[i], pipes[i+1], err = os.Pipe(); err != nil {
			t.Fatal(err)
		}
		defer pipes[i].Close()
		defer pipes[i+1].Close()
	}
	stdinR, stdinW, stderrR, stderrW := pipes[0], pipes[1], pipes[2], pipes[3]
	reqR, reqW, ctlR, ctlW := pipes[4], pipes[5], pipes[6], pipes[7]
	attr := &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{stdinR.Fd(), stderrW.Fd(), stderrW.Fd(), reqR.Fd(), ctlW.Fd()}}
	_, exited, err := processReaper().start(func() (int, error) {
		return syscall.ForkExec(py, []string{py, "-c", pythonBootstrap}, attr)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*os.File{stdinR, stderrW, reqR, reqW, ctlW} { // the child's ends, and no requests
		f.Close()
	}
	go func() {
		_, _ = stdinW.WriteString(input)
		stdinW.Close()
	}()
	var stderr bytes.Buffer
	read := make(chan struct{})
	go func() {
		_, _ = stderr.ReadFrom(stderrR)
		close(read)
	}()
	var ctl bytes.Buffer
	_, _ = ctl.ReadFrom(ctlR)
	select {
	case ws := <-exited:
		if ws.ExitStatus() != 0 {
			<-read
			t.Fatalf("kernel exited with %d: %s", ws.ExitStatus(), stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the kernel did not exit once its requests ended")
	}
	return ctl.String()
}
