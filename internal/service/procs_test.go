package service

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// waitProc polls background command pid until it has ended.
func waitProc(t *testing.T, e *env, id, pid string) Proc {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := e.sb.Proc(context.Background(), id, pid)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Running {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("command %s still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProcOutputAndStatus(t *testing.T) {
	e := newEnv(t, "")
	id := e.running(t).ID
	ctx := context.Background()
	p, err := e.sb.StartProc(ctx, id, ProcRequest{Shell: `echo one; echo two >&2; sleep 0.2; echo "$GREETING"; exit 3`,
		Env: map[string]string{"GREETING": "three"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.ID == "" || !p.Running || p.Started.IsZero() || !p.Ended.IsZero() {
		t.Fatalf("started %+v", p)
	}
	// Read what there is, then follow from there to the end.
	var out1, err1 bytes.Buffer
	deadline := time.Now().Add(5 * time.Second)
	var res ProcOutputResult
	for out1.Len()+err1.Len() < len("one\ntwo\n") && time.Now().Before(deadline) {
		res, err = e.sb.ProcOutput(ctx, id, p.ID, ProcOutputOptions{Since: res.Next}, &out1, &err1)
		if err != nil {
			t.Fatal(err)
		}
	}
	if out1.String() != "one\n" || err1.String() != "two\n" || res.Next != 8 || res.Missed != 0 {
		t.Fatalf("first read: stdout %q stderr %q, %+v", out1.String(), err1.String(), res)
	}
	var out2 bytes.Buffer
	res, err = e.sb.ProcOutput(ctx, id, p.ID, ProcOutputOptions{Since: res.Next, Follow: true}, &out2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out2.String() != "three\n" || res.Next != 14 || res.Proc.Running || res.Proc.ExitCode != 3 {
		t.Fatalf("followed: %q, %+v", out2.String(), res)
	}
	st := waitProc(t, e, id, p.ID)
	if st.ExitCode != 3 || st.Ended.Before(st.Started) || st.Output != 14 || st.TimedOut || st.Signal != "" {
		t.Errorf("ended %+v", st)
	}
	// An offset past what was kept from the start: nothing missed, nothing read.
	var none bytes.Buffer
	if res, err = e.sb.ProcOutput(ctx, id, p.ID, ProcOutputOptions{Since: 14}, &none, &none); err != nil || none.Len() != 0 || res.Next != 14 {
		t.Errorf("read at the end: %q %+v %v", none.String(), res, err)
	}
	_, err = e.sb.ProcOutput(ctx, id, p.ID, ProcOutputOptions{Since: -1}, nil, nil)
	checkErr(t, err, errdefs.ErrInvalidArgument, "")

	// Kill forgets it.
	if _, err := e.sb.KillProc(ctx, id, p.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.sb.Proc(ctx, id, p.ID)
	checkErr(t, err, errdefs.ErrNotFound, "")
}

func TestProcSignalTimeoutAndErrors(t *testing.T) {
	e := newEnv(t, "")
	id := e.running(t).ID
	ctx := context.Background()

	p, err := e.sb.StartProc(ctx, id, ProcRequest{Command: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.sb.SignalProc(ctx, id, p.ID, "INT"); err != nil {
		t.Fatal(err)
	}
	if st := waitProc(t, e, id, p.ID); st.Signal == "" || st.ExitCode != 130 {
		t.Errorf("interrupted: %+v", st)
	}

	p, err = e.sb.StartProc(ctx, id, ProcRequest{Shell: "sleep 100", Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitProc(t, e, id, p.ID); !st.TimedOut {
		t.Errorf("after its timeout: %+v", st)
	}

	for _, tc := range []struct {
		name string
		req  ProcRequest
	}{
		{"empty", ProcRequest{}},
		{"both forms", ProcRequest{Command: []string{"true"}, Shell: "true"}},
		{"NUL", ProcRequest{Command: []string{"echo", "a\x00b"}}},
		{"bad env", ProcRequest{Command: []string{"true"}, Env: map[string]string{"A=B": "1"}}},
		{"relative cwd", ProcRequest{Command: []string{"true"}, Cwd: "../x"}},
		{"timeout too long", ProcRequest{Command: []string{"true"}, Timeout: MaxExecTimeout + time.Second}},
		{"negative timeout", ProcRequest{Command: []string{"true"}, Timeout: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.sb.StartProc(ctx, id, tc.req)
			checkErr(t, err, errdefs.ErrInvalidArgument, "")
		})
	}
	_, err = e.sb.Proc(ctx, id, "proc-none")
	checkErr(t, err, errdefs.ErrNotFound, "")
	err = e.sb.SignalProc(ctx, id, "proc-none", "INT")
	checkErr(t, err, errdefs.ErrNotFound, "")
	_, err = e.sb.ProcOutput(ctx, id, "proc-none", ProcOutputOptions{}, nil, nil)
	checkErr(t, err, errdefs.ErrNotFound, "")
	_, err = e.sb.StartProc(ctx, "sb-none", ProcRequest{Command: []string{"true"}})
	checkErr(t, err, errdefs.ErrNotFound, "")
}
