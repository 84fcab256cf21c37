package agent

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestSpareKernel: the first kernel that fits the spare (its language, no
// environment, the default directory) adopts its process; one that does
// not fit gets a process of its own and the spare is ended.
func TestSpareKernel(t *testing.T) {
	requireInterpreters(t)
	for _, tc := range []struct {
		name  string
		spec  func(work string) KernelSpec
		adopt bool
	}{
		{"fits", func(string) KernelSpec { return KernelSpec{ID: "k", Language: LangPython} }, true},
		{"default directory given", func(work string) KernelSpec { return KernelSpec{ID: "k", Language: LangPython, Cwd: work} }, true},
		{"other language", func(string) KernelSpec { return KernelSpec{ID: "k", Language: LangBash} }, false},
		{"own environment", func(string) KernelSpec { return KernelSpec{ID: "k", Language: LangPython, Env: []string{"A=1"}} }, false},
		{"other directory", func(string) KernelSpec { return KernelSpec{ID: "k", Language: LangPython, Cwd: os.TempDir()} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			s := NewServer(ServerConfig{Env: []string{"PATH=" + os.Getenv("PATH")}, Cwd: work, UID: -1, GID: -1, SpareKernel: LangPython})
			sp := s.kernels.spare
			<-sp.done
			if sp.err != nil {
				t.Fatalf("spare: %v", sp.err)
			}
			info, err := s.kernels.create(context.Background(), tc.spec(work))
			if err != nil {
				t.Fatal(err)
			}
			defer s.kernels.remove("k")
			if adopted := info.Pid == sp.p.pid; adopted != tc.adopt {
				t.Fatalf("kernel pid %d, spare's %d: adopted %v, want %v", info.Pid, sp.p.pid, adopted, tc.adopt)
			}
			if !tc.adopt {
				select {
				case <-sp.p.exited:
				case <-time.After(10 * time.Second):
					t.Fatal("the spare that did not fit still runs")
				}
			}
			if s.kernels.spare != nil {
				t.Error("the spare is still offered after the first create")
			}
		})
	}
}

// TestSpareKernelDead: a spare that died before it was asked for is not
// adopted; the kernel starts as without one.
func TestSpareKernelDead(t *testing.T) {
	requireInterpreters(t)
	s := NewServer(ServerConfig{Env: []string{"PATH=" + os.Getenv("PATH")}, Cwd: t.TempDir(), UID: -1, GID: -1, SpareKernel: LangPython})
	sp := s.kernels.spare
	<-sp.done
	if sp.err != nil {
		t.Fatalf("spare: %v", sp.err)
	}
	syscall.Kill(sp.p.pid, syscall.SIGKILL)
	<-sp.p.exited
	info, err := s.kernels.create(context.Background(), KernelSpec{ID: "k", Language: LangPython})
	if err != nil {
		t.Fatal(err)
	}
	defer s.kernels.remove("k")
	if info.Pid == sp.p.pid || info.Pid == 0 {
		t.Fatalf("kernel pid %d, the dead spare's %d", info.Pid, sp.p.pid)
	}
}

// TestSpareKernelBeforeSpareThreads: the spare's interpreter starts before
// the agent holds its spare threads (it runs no user code), and is ready;
// the create that adopts it, after which user code runs, waits for them.
func TestSpareKernelBeforeSpareThreads(t *testing.T) {
	requireInterpreters(t)
	spare := make(chan struct{})
	s := NewServer(ServerConfig{Env: []string{"PATH=" + os.Getenv("PATH")}, Cwd: t.TempDir(), UID: -1, GID: -1,
		Spare: spare, SpareKernel: LangPython})
	sp := s.kernels.spare
	select {
	case <-sp.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the spare kernel did not start before the spare threads were held")
	}
	if sp.err != nil {
		t.Fatalf("spare: %v", sp.err)
	}
	created := make(chan KernelInfo, 1)
	go func() {
		info, err := s.kernels.create(context.Background(), KernelSpec{ID: "k", Language: LangPython})
		if err != nil {
			t.Error(err)
		}
		created <- info
	}()
	select {
	case info := <-created:
		t.Fatalf("the spare was adopted before the spare threads were held: %+v", info)
	case <-time.After(200 * time.Millisecond):
	}
	close(spare)
	select {
	case info := <-created:
		defer s.kernels.remove("k")
		if info.Pid != sp.p.pid {
			t.Errorf("kernel pid %d, the spare's %d: not adopted", info.Pid, sp.p.pid)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the create did not end once the spare threads were held")
	}
}
