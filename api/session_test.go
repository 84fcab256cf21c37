package api

import (
	"encoding/json"
	"testing"
)

// TestCommandLineJSON checks how a command goes on the wire, and that it
// reads back as it went. An empty, non-nil Argv beside a shell string is
// what a command line parser gives for a shell string alone.
func TestCommandLineJSON(t *testing.T) {
	for want, cmd := range map[string]CommandLine{
		`["ls","-l"]`:  {Argv: []string{"ls", "-l"}},
		`"ls | wc -l"`: {Shell: "ls | wc -l"},
		`"echo hi"`:    {Argv: []string{}, Shell: "echo hi"},
		`[]`:           {Argv: []string{}},
		`""`:           {},
	} {
		b, err := json.Marshal(cmd)
		if err != nil || string(b) != want {
			t.Errorf("marshal %+v: got %s, %v; want %s", cmd, b, err, want)
			continue
		}
		var back CommandLine
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if again, _ := json.Marshal(back); string(again) != want {
			t.Errorf("%s after a round trip: got %s", want, again)
		}
	}
}
