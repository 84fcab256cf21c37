package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// TestProcIO drives interactive background commands of a sandbox: a
// tagged one reading a stdin pipe to its end, one on a terminal that is
// resized, and the list of both.
func TestProcIO(t *testing.T) {
	e := newEnv(t, "")
	id := e.running(t).ID
	ctx := context.Background()

	cat, err := startProcIO(ctx, e.sb, id, ProcRequest{Command: []string{"cat"}}, ProcIO{Tag: "cat", Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if cat.Pid <= 0 || cat.Tag != "cat" || cat.TTY || !cat.Running {
		t.Errorf("started %+v", cat)
	}
	tty, err := startProcIO(ctx, e.sb, id, ProcRequest{Shell: "read line; stty size; echo got $line"}, ProcIO{TTY: true, Rows: 24, Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	all, err := e.sb.Procs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != cat.ID || all[1].ID != tty.ID || !all[1].TTY || all[0].Pid != cat.Pid {
		t.Errorf("listed %+v", all)
	}

	checkErr(t, e.sb.ProcInput(ctx, id, cat.ID, strings.NewReader("one\n")), nil, "")
	checkErr(t, e.sb.ProcInput(ctx, id, "cat", strings.NewReader("two\n")), nil, "") // by tag
	checkErr(t, e.sb.CloseProcInput(ctx, id, cat.ID), nil, "")
	var out bytes.Buffer
	res, err := e.sb.ProcOutput(ctx, id, cat.ID, ProcOutputOptions{Follow: true}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "one\ntwo\n" || res.Proc.Running || res.Proc.ExitCode != 0 {
		t.Errorf("cat: %q, %+v", out.String(), res.Proc)
	}

	checkErr(t, e.sb.ResizeProc(ctx, id, tty.ID, 30, 100), nil, "")
	checkErr(t, e.sb.ProcInput(ctx, id, tty.ID, strings.NewReader("hello\r")), nil, "")
	out.Reset()
	if _, err := e.sb.ProcOutput(ctx, id, tty.ID, ProcOutputOptions{Follow: true}, &out, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "30 100") || !strings.Contains(out.String(), "got hello") {
		t.Errorf("tty output %q, want its new size and the line", out.String())
	}

	// What cannot be done: input to a command without stdin, a resize
	// without a terminal, a taken tag, an unknown command.
	quiet, err := startProcIO(ctx, e.sb, id, ProcRequest{Command: []string{"sleep", "10"}}, ProcIO{})
	if err != nil {
		t.Fatal(err)
	}
	checkErr(t, e.sb.ProcInput(ctx, id, quiet.ID, strings.NewReader("x")), errdefs.ErrFailedPrecondition, "")
	checkErr(t, e.sb.ResizeProc(ctx, id, quiet.ID, 10, 10), errdefs.ErrInvalidArgument, "")
	_, err = startProcIO(ctx, e.sb, id, ProcRequest{Command: []string{"sleep", "10"}}, ProcIO{Tag: "busy"})
	checkErr(t, err, nil, "")
	_, err = startProcIO(ctx, e.sb, id, ProcRequest{Command: []string{"sleep", "10"}}, ProcIO{Tag: "busy"})
	checkErr(t, err, errdefs.ErrAlreadyExists, "")
	_, err = startProcIO(ctx, e.sb, id, ProcRequest{Command: []string{"sleep"}}, ProcIO{Tag: "bad tag"})
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
	checkErr(t, e.sb.ProcInput(ctx, id, "proc-99", strings.NewReader("x")), errdefs.ErrNotFound, "")
}

// startProcIO starts a background command with pio through
// StartFollowProc and leaves it running once it has started: its started
// callback ends the read, not the command.
func startProcIO(ctx context.Context, sb *Sandboxes, id string, req ProcRequest, pio ProcIO) (ProcDetail, error) {
	var detail ProcDetail
	errStarted := errors.New("started")
	_, err := sb.StartFollowProc(ctx, id, req, pio, func(d ProcDetail) error {
		detail = d
		return errStarted
	}, func(byte, int64, []byte) error { return nil })
	if errors.Is(err, errStarted) {
		return detail, nil
	}
	return detail, err
}

// A zero rows or cols in a resize is its default, 24 or 80, as at start:
// accepted, as envd accepts it, not refused.
func TestResizeProcDefault(t *testing.T) {
	e := newEnv(t, "")
	id := e.running(t).ID
	ctx := context.Background()
	for _, tc := range []struct {
		rows, cols uint16
		want       string
	}{
		{0, 0, "24 80"},
		{0, 120, "24 120"},
		{40, 0, "40 80"},
	} {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.cols), func(t *testing.T) {
			tty, err := startProcIO(ctx, e.sb, id, ProcRequest{Shell: "read line; stty size"}, ProcIO{TTY: true, Rows: 30, Cols: 100})
			if err != nil {
				t.Fatal(err)
			}
			checkErr(t, e.sb.ResizeProc(ctx, id, tty.ID, tc.rows, tc.cols), nil, "")
			checkErr(t, e.sb.ProcInput(ctx, id, tty.ID, strings.NewReader("\r")), nil, "")
			var out bytes.Buffer
			if _, err := e.sb.ProcOutput(ctx, id, tty.ID, ProcOutputOptions{Follow: true}, &out, nil); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("tty output %q, want the size %s", out.String(), tc.want)
			}
		})
	}
}
