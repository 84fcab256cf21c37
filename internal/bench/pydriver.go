package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// pyDriver is a Python script the bench drives through pipes: it reads
// one command a line on its stdin and answers each with one JSON line on
// its stdout (the stock SDKs' drivers, e2b_driver.py and
// opensandbox_sdk.py).
type pyDriver struct {
	name string // for errors
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	dir  string
}

// startPyDriver writes script to a temporary file named file and runs it
// with python (unbuffered) and args, env added to the environment; name
// says which driver it is in errors.
func startPyDriver(name, python, file string, script []byte, args, env []string) (*pyDriver, error) {
	dir, err := os.MkdirTemp("", "a2e-bench-py-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*pyDriver, error) {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start the %s: %w", name, err)
	}
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, script, 0o600); err != nil {
		return fail(err)
	}
	cmd := exec.Command(python, append([]string{"-u", path}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return fail(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	return &pyDriver{name: name, cmd: cmd, in: in, out: bufio.NewScanner(out), dir: dir}, nil
}

// ask sends line and decodes the driver's answer into v.
func (d *pyDriver) ask(line string, v any) error {
	if _, err := fmt.Fprintln(d.in, line); err != nil {
		return fmt.Errorf("%s %q: %w", d.name, line, err)
	}
	if !d.out.Scan() {
		return fmt.Errorf("%s %q: no answer (%v)", d.name, line, d.out.Err())
	}
	if err := json.Unmarshal(d.out.Bytes(), v); err != nil {
		return fmt.Errorf("%s %q: %w: %s", d.name, line, err, d.out.Bytes())
	}
	return nil
}

// stop ends the driver (its stdin closed) and removes its script.
func (d *pyDriver) stop() {
	d.in.Close()
	d.cmd.Wait()
	os.RemoveAll(d.dir)
}
