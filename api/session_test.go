package api

import (
	"encoding/json"
	"testing"
)

// TestCommandLineJSON checks how a command goes on the wire, and that it
// reads back as it went.
func TestCommandLineJSON(t *testing.T) {
	tests := []struct {
		name string
		cmd  CommandLine
		want string
	}{
		{"argv", CommandLine{Argv: []string{"ls", "-l"}}, `["ls","-l"]`},
		{"shell", CommandLine{Shell: "ls | wc -l"}, `"ls | wc -l"`},
		// As a command line parser gives a shell string: no argv, but an
		// empty slice rather than nil.
		{"shell beside an empty argv", CommandLine{Argv: []string{}, Shell: "ls"}, `"ls"`},
		{"empty argv", CommandLine{Argv: []string{}}, `[]`},
		{"zero", CommandLine{}, `""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("marshal: got %s, want %s", b, tt.want)
			}
			var back CommandLine
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if again, _ := json.Marshal(back); string(again) != tt.want {
				t.Errorf("after a round trip: got %s, want %s", again, tt.want)
			}
		})
	}
}
