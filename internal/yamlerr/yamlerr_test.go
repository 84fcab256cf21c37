package yamlerr

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestExplain(t *testing.T) {
	type inner struct {
		TTL     int           `yaml:"ttl"`
		Tags    []string      `yaml:"tags"`
		Timeout time.Duration `yaml:"timeout"`
		Public  bool          `yaml:"public"`
		Env     map[string]string
	}
	type doc struct {
		Name string `yaml:"name"`
		Spec inner  `yaml:"spec"`
	}
	tests := []struct {
		name, in, want string
	}{
		{"a string for a number", "name: x\nspec:\n  ttl: long\n", `line 3: ttl must be a whole number, not "long"`},
		{"a number for a list", "spec:\n  tags: 5\n", "line 2: tags must be a list, not the number 5"},
		{"a list for a string", "name: [a]\n", "line 1: name must be a string, not a list"},
		{"a mapping for a bool", "spec:\n  public: {a: 1}\n", "line 2: public must be true or false, not a mapping"},
		{"a bad duration", "spec:\n  timeout: soon\n", `line 2: timeout must be a duration such as 30s or 2m, not "soon"`},
		{"keys of one line", "spec: {tags: [a], ttl: long}\n", `line 1: ttl must be a whole number, not "long"`},
		{"a list for a mapping", "spec:\n  env: [a]\n", "line 2: env must be a mapping, not a list"},
		{"a string for a struct", "spec: x\n", `line 1: spec must be a mapping, not "x"`},
		{"an unknown field", "name: x\nnmae: y\n", "line 2: unknown field nmae"},
		{"not YAML", "name: [x\n", "line 1: did not find expected ',' or ']'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var root yaml.Node
			if err := yaml.Unmarshal([]byte(tt.in), &root); err != nil {
				if got := Explain(err, nil).String(); got != tt.want {
					t.Errorf("Explain = %q, want %q", got, tt.want)
				}
				return
			}
			var d doc
			err := root.Decode(&d)
			if tt.name == "an unknown field" {
				dec := yaml.NewDecoder(strings.NewReader(tt.in))
				dec.KnownFields(true)
				err = dec.Decode(&d)
			}
			if err == nil {
				t.Fatalf("%q decoded", tt.in)
			}
			if got := Explain(err, &root).String(); got != tt.want {
				t.Errorf("Explain = %q, want %q", got, tt.want)
			}
		})
	}
}
