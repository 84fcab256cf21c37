package manager

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

func TestProcRequest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		req     ProcRequest
		want    string // the agent request, as fmt shows it
		wantErr bool
	}{
		{name: "argv, env sorted, cwd cleaned, timeout",
			req:  ProcRequest{Command: []string{"sleep", "1"}, Env: map[string]string{"B": "2", "A": "1"}, Cwd: "/workspace//y/", Timeout: 1500 * time.Millisecond},
			want: "[sleep 1]||[A=1 B=2]|/workspace/y|1.5s|false"},
		{name: "shell", req: ProcRequest{Shell: "echo hi"}, want: "[]|echo hi|[]||0s|false"},
		{name: "neither", req: ProcRequest{}, wantErr: true},
		{name: "both", req: ProcRequest{Command: []string{"a"}, Shell: "b"}, wantErr: true},
		{name: "NUL in shell", req: ProcRequest{Shell: "a\x00"}, wantErr: true},
		{name: "bad env name", req: ProcRequest{Shell: "a", Env: map[string]string{"": "x"}}, wantErr: true},
		{name: "cwd stepping out", req: ProcRequest{Shell: "a", Cwd: "../x"}, wantErr: true},
		{name: "timeout over the maximum", req: ProcRequest{Shell: "a", Timeout: MaxExecTimeout + 1}, wantErr: true},
		{name: "negative timeout", req: ProcRequest{Shell: "a", Timeout: -1}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := procRequest(tc.req)
			if tc.wantErr {
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("error %v, want invalid argument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := fmt.Sprintf("%v|%s|%v|%s|%s|%v", got.Command, got.Shell, got.Env, got.Cwd, got.Timeout, got.Stdin || got.TTY)
			if s != tc.want {
				t.Errorf("request %s, want %s", s, tc.want)
			}
		})
	}
}

// An agent's unknown process is named, with its sandbox, in the error.
func TestProcErr(t *testing.T) {
	err := procErr(fmt.Errorf("get: %w", errdefs.ErrNotFound), "sb-1", "proc-9")
	if !errors.Is(err, errdefs.ErrNotFound) || err.Error() != "sandbox sb-1 has no process 'proc-9'" {
		t.Errorf("error %v", err)
	}
	other := errors.New("boom")
	if procErr(other, "sb-1", "proc-9") != other || procErr(nil, "a", "b") != nil {
		t.Error("other errors must pass unchanged")
	}
}
