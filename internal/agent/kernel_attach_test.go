package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/testenv"
)

// kernelRunResult is what a kernel execution run in the background gave.
type kernelRunResult struct {
	res KernelResult
	err error
}

// executeInBackground runs code in kernel id through c with ctx,
// collecting its stdout in out and its displays' text in displays.
func executeInBackground(ctx context.Context, c *Client, id, code string, out, displays *testenv.Buffer) <-chan kernelRunResult {
	done := make(chan kernelRunResult, 1)
	go func() {
		res, err := c.Execute(ctx, id, KernelExecRequest{Code: code, Timeout: time.Minute}, KernelOutput{
			Stdout: func(p []byte) error { _, err := out.Write(p); return err },
			Display: func(d map[string]any) error {
				_, err := fmt.Fprintf(displays, "%v;", d["text/plain"])
				return err
			},
		})
		done <- kernelRunResult{res, err}
	}()
	return done
}

// TestKernelExecuteSuspend: a kernel execution in flight is suspended for
// a checkpoint, as an exec is: it lets go of its connection, the code runs
// on, and once the dial is let through the execution goes on from the
// frames it has received: its caller gets all the output and displays,
// once, in order (more than the agent holds included: the kernel's output
// waits for it), and its result. Twice too.
func TestKernelExecuteSuspend(t *testing.T) {
	requireInterpreters(t)
	lines := "import time\nfor i in range(30):\n    print(i)\n    if i == 10: display(i)\n    time.sleep(0.02)\nn = i + 1\nn\n"
	var want strings.Builder
	for i := range 30 {
		fmt.Fprintf(&want, "%d\n", i)
	}
	for _, tc := range []struct {
		name      string
		code      string
		suspends  int
		before    string // output seen before the suspension
		wantOut   string
		wantBytes int // of output, when wantOut is not given
		wantRes   string
		wantDisp  string
	}{
		{name: "output", code: lines, suspends: 1, before: "3\n", wantOut: want.String(), wantRes: "30", wantDisp: "10;"},
		{name: "twice", code: lines, suspends: 2, before: "3\n", wantOut: want.String(), wantRes: "30", wantDisp: "10;"},
		{name: "more than held", code: "import sys, time\nprint('start')\ntime.sleep(0.2)\nsys.stdout.write('x' * 1000000)\n7",
			suspends: 1, before: "start\n", wantBytes: len("start\n") + 1000000, wantRes: "7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, hold := gatedAgent(t, time.Minute)
			if _, err := c.CreateKernel(context.Background(), KernelSpec{ID: "k", Language: LangPython}); err != nil {
				t.Fatal(err)
			}
			var out, displays testenv.Buffer
			done := executeInBackground(context.Background(), c, "k", tc.code, &out, &displays)
			waitFor(t, "the output before the suspension", func() bool { return strings.Contains(out.String(), tc.before) })
			for i := range tc.suspends {
				if i > 0 {
					// Attached again: a suspension before would find none.
					seen := len(out.String())
					waitFor(t, "the output after the suspension", func() bool { return len(out.String()) > seen })
				}
				release := hold()
				n, resume := c.SuspendAttachments()
				if n != 1 {
					t.Errorf("SuspendAttachments = %d, want 1", n)
				}
				time.Sleep(300 * time.Millisecond)
				resume()
				release()
				time.Sleep(50 * time.Millisecond)
			}
			var r kernelRunResult
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the execution did not end after the suspension")
			}
			if r.err != nil || r.res.Error != nil || resultText(r.res) != tc.wantRes {
				t.Fatalf("execute = %+v, %v; want the result %s", r.res, r.err, tc.wantRes)
			}
			switch got := out.String(); {
			case tc.wantOut != "" && got != tc.wantOut:
				t.Errorf("output %q, want %q", got, tc.wantOut)
			case tc.wantBytes != 0 && len(got) != tc.wantBytes:
				t.Errorf("%d bytes of output, want %d", len(got), tc.wantBytes)
			}
			if got := displays.String(); got != tc.wantDisp {
				t.Errorf("displays %q, want %q", got, tc.wantDisp)
			}
		})
	}
}

// TestKernelSuspendedClientGone: an execution whose caller leaves while a
// checkpoint has it suspended is interrupted once the checkpoint is done,
// as one whose caller leaves is, the kernel keeping its state; before,
// it runs on.
func TestKernelSuspendedClientGone(t *testing.T) {
	requireInterpreters(t)
	c, _, hold := gatedAgent(t, time.Minute)
	ctx := context.Background()
	if _, err := c.CreateKernel(ctx, KernelSpec{ID: "k", Language: LangPython}); err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(ctx)
	var out, displays testenv.Buffer
	done := executeInBackground(gone, c, "k", "import time\nfor i in range(100):\n    print(i)\n    last = i\n    time.sleep(0.05)\n", &out, &displays)
	waitFor(t, "the output before the suspension", func() bool { return strings.Contains(out.String(), "2\n") })
	release := hold()
	_, resume := c.SuspendAttachments()
	time.Sleep(200 * time.Millisecond)
	cancel()
	if r := <-done; !errors.Is(r.err, context.Canceled) {
		t.Errorf("execute = %+v, %v; want canceled", r.res, r.err)
	}
	resume()
	release()
	res, err := c.Execute(ctx, "k", KernelExecRequest{Code: "last", Timeout: time.Minute}, KernelOutput{})
	if err != nil || res.StateLost {
		t.Fatalf("execute after = %+v, %v", res, err)
	}
	var last int
	if err := json.Unmarshal([]byte(resultText(res)), &last); err != nil || last < 2 || last >= 99 {
		t.Errorf("last = %q, want the loop interrupted past 2", resultText(res))
	}
}

// TestKernelExecuteWaitsForCheckpoint: an execution that starts while a
// checkpoint holds the attachments waits until it lets them go on, then
// runs as usual.
func TestKernelExecuteWaitsForCheckpoint(t *testing.T) {
	requireInterpreters(t)
	c, _, hold := gatedAgent(t, time.Minute)
	ctx := context.Background()
	if _, err := c.CreateKernel(ctx, KernelSpec{ID: "k", Language: LangPython}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the first, which asks whether the agent takes it, may leave none in the pool
		if _, err := c.Execute(ctx, "k", KernelExecRequest{Code: "1"}, KernelOutput{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // its connection back in the pool
	release := hold()
	defer release()
	_, resume := c.SuspendAttachments()
	var out, displays testenv.Buffer
	done := executeInBackground(ctx, c, "k", "print('ran')", &out, &displays)
	select {
	case r := <-done:
		t.Fatalf("an execution started during the checkpoint ran: %+v %v, output %q", r.res, r.err, out.String())
	case <-time.After(300 * time.Millisecond):
	}
	resume()
	release()
	select {
	case r := <-done:
		if r.err != nil || out.String() != "ran\n" {
			t.Errorf("execute after the checkpoint = %+v, %v, output %q; want ran", r.res, r.err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the execution did not run after the checkpoint")
	}
}

// TestKernelRestoredAbandons: a restored sandbox's agent interrupts the
// copies of the executions a checkpoint suspended (their clients are the
// original sandbox's), keeping the kernel's state; a client attaching to
// one is told it is gone.
func TestKernelRestoredAbandons(t *testing.T) {
	requireInterpreters(t)
	c, free, hold := gatedAgent(t, time.Minute)
	ctx := context.Background()
	if _, err := c.CreateKernel(ctx, KernelSpec{ID: "k", Language: LangPython}); err != nil {
		t.Fatal(err)
	}
	var out, displays testenv.Buffer
	done := executeInBackground(ctx, c, "k", "import time\nfor i in range(100):\n    print(i)\n    last = i\n    time.sleep(0.05)\n", &out, &displays)
	waitFor(t, "the output before the suspension", func() bool { return strings.Contains(out.String(), "2\n") })
	release := hold()
	_, resume := c.SuspendAttachments()
	time.Sleep(100 * time.Millisecond)
	if _, err := free.Restored(ctx, RestoredRequest{}); err != nil {
		t.Fatal(err)
	}
	resume()
	release()
	if r := <-done; r.err == nil {
		t.Errorf("execute of an abandoned copy = %+v, want an error", r.res)
	}
	res, err := free.Execute(ctx, "k", KernelExecRequest{Code: "last", Timeout: time.Minute}, KernelOutput{})
	if err != nil || res.StateLost || resultText(res) == "" || resultText(res) == "99" {
		t.Errorf("execute after = %+v, %v; want the loop's last value, interrupted", res, err)
	}
}

// TestKernelOlderAgent: an agent older than POST
// /v1/kernels/{id}/execute/attach, which refuses it before it reads the
// request, runs the execution on POST /v1/kernels/{id}/execute, as it did.
func TestKernelOlderAgent(t *testing.T) {
	var attaches, executes atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/kernels/{id}/execute/", func(w http.ResponseWriter, r *http.Request) {
		attaches.Add(1)
		http.NotFound(w, r)
	})
	mux.HandleFunc("POST /v1/kernels/{id}/execute", func(w http.ResponseWriter, r *http.Request) {
		executes.Add(1)
		var req KernelExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err)
			return
		}
		_ = writeFrame(w, frameStdout, []byte(req.Code+"\n"))
		b, _ := json.Marshal(KernelResult{ExecutionCount: 3})
		_ = writeFrame(w, frameResult, b)
	})
	c := serveOlderAgent(t, mux)
	for range 2 {
		var out strings.Builder
		res, err := c.Execute(context.Background(), "k", KernelExecRequest{Code: "old"}, KernelOutput{
			Stdout: func(p []byte) error { out.Write(p); return nil },
		})
		if err != nil || res.ExecutionCount != 3 || out.String() != "old\n" {
			t.Errorf("execute on an older agent = %+v, %v, output %q; want the old answer", res, err, out.String())
		}
	}
	// An env it would not set is refused, not dropped.
	_, err := c.Execute(context.Background(), "k", KernelExecRequest{Code: "old", Env: map[string]string{"A": "1"}}, KernelOutput{})
	if !errors.Is(err, ErrOlderAgent) || !strings.Contains(err.Error(), "env") {
		t.Errorf("execute with env on an older agent: %v, want ErrOlderAgent naming the env", err)
	}
	if attaches.Load() != 3 || executes.Load() != 2 {
		t.Errorf("%d requests to execute/attach, %d to execute; want 3 and 2", attaches.Load(), executes.Load())
	}
}
