package oci

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestAgentBeside(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	built := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name  string
		agent []byte        // nil: none beside the executable
		age   time.Duration // how much older than the executable the agent is
		want  bool
	}{
		{name: "none beside", agent: nil},
		{name: "same build", agent: bin, want: true},
		{name: "same build, newer file", agent: bin, age: -time.Minute, want: true},
		{name: "left from an earlier build", agent: bin, age: time.Minute},
		{name: "not a go binary", agent: []byte("#!/bin/sh\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			exe := filepath.Join(dir, "agent2env")
			if err := os.WriteFile(exe, bin, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(exe, built, built); err != nil {
				t.Fatal(err)
			}
			agent := filepath.Join(dir, agentBesideName)
			if tc.agent != nil {
				if err := os.WriteFile(agent, tc.agent, 0o755); err != nil {
					t.Fatal(err)
				}
				at := built.Add(-tc.age)
				if err := os.Chtimes(agent, at, at); err != nil {
					t.Fatal(err)
				}
			}
			want := ""
			if tc.want {
				want = agent
			}
			if got := agentBeside(exe); got != want {
				t.Errorf("agentBeside = %q, want %q", got, want)
			}
		})
	}
}
