package task

import (
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/internal/quantity"
)

// The patterns the loader checks with. api/task.schema.json carries the
// same strings (a test compares them), so the two agree by construction.
var (
	namePattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	mcpNamePattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)
	envNamePattern  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	durationPattern = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)
	cpuPattern      = regexp.MustCompile(`^([0-9]+m|[0-9]+(\.[0-9]+)?)$`)
	bytesPattern    = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|K|M|G|T)?$`)
	absPathPattern  = regexp.MustCompile(`^/`)
	dotDotPattern   = regexp.MustCompile(`(^|/)\.\.(/|$)`)
	httpURLPattern  = regexp.MustCompile(`^https?://[^/?#\s]+`)
	modelPattern    = regexp.MustCompile(`^[^\s]+$`)
)

// check validates the decoded task against the rules the types alone do
// not carry. nodes (nil when validating a task not read from a file)
// places the errors.
func (t *Task) check(errs *fieldErrors, nodes map[string]*yaml.Node) {
	add := func(field, msg string, args ...any) { errs.add(nodes, field, msg, args...) }
	required := func(field, value string) bool {
		if strings.TrimSpace(value) == "" {
			add(field, "is required")
			return false
		}
		return true
	}
	// optional refuses a field that is written but blank: leaving it
	// out is how to ask for the default.
	optional := func(field, value string) bool {
		if _, written := nodes[field]; written && strings.TrimSpace(value) == "" {
			add(field, "is empty: leave it out or give a value")
			return false
		}
		return value != ""
	}
	if required("name", t.Name) && !namePattern.MatchString(t.Name) {
		add("name", "%q is not a name: use letters, digits, '.', '_' and '-' (up to 63)", t.Name)
	}
	optional("template", t.Template)
	optional("image", t.Image)
	if t.Template != "" && t.Image != "" {
		add("image", "give template or image, not both")
	}
	if r := t.Resources; r != nil {
		if optional("resources.cpu", string(r.CPU)) && !validCPU(string(r.CPU)) {
			add("resources.cpu", "%q is not a CPU quantity such as 2 or 500m", r.CPU)
		}
		checkSize(add, optional, "resources.memory", string(r.Memory))
		checkSize(add, optional, "resources.disk", string(r.Disk))
	}
	if required("agent", t.Agent) && !knownAgent(t.Agent) {
		add("agent", "unknown agent %q (one of %s)", t.Agent, agentList())
	}
	if optional("model", t.Model) && !modelPattern.MatchString(t.Model) {
		add("model", "%q is not a model name", t.Model)
	} else if t.Agent != AgentCustom && t.Agent != "" && strings.TrimSpace(t.Model) == "" {
		add("model", "is required for agent %s", t.Agent)
	}
	required("goal", t.Goal)
	if !optional("entrypoint", t.Entrypoint) && t.Agent == AgentCustom {
		add("entrypoint", "is required for agent custom")
	}
	if optional("workdir", t.Workdir) {
		checkSandboxPath(add, "workdir", t.Workdir)
	}
	for k := range t.Env {
		if !envNamePattern.MatchString(k) {
			add("env."+k, "%q is not an environment variable name", k)
		}
	}
	dests := map[string]bool{}
	for i, in := range t.Inputs {
		p := "inputs" + index(i)
		if required(p+".source", in.Source) {
			switch {
			case absPathPattern.MatchString(in.Source):
				add(p+".source", "%q must be relative to the task file's directory", in.Source)
			case dotDotPattern.MatchString(in.Source):
				add(p+".source", "%q leaves the task file's directory", in.Source)
			}
		}
		if required(p+".destination", in.Destination) {
			checkSandboxPath(add, p+".destination", in.Destination)
			if dests[in.Destination] {
				add(p+".destination", "%s is the destination of an earlier input too", in.Destination)
			}
			dests[in.Destination] = true
		}
	}
	for i, s := range t.Setup {
		if strings.TrimSpace(s) == "" {
			add("setup"+index(i), "is an empty command")
		}
	}
	names := map[string]bool{}
	for i, s := range t.MCP {
		t.checkMCP(add, "mcp"+index(i), s, names)
	}
	optional("end.check", t.End.Check)
	if optional("end.success_file", t.End.SuccessFile) {
		checkSandboxPath(add, "end.success_file", t.End.SuccessFile)
	}
	if t.End.Timeout > MaxTimeout {
		add("end.timeout", "%s is longer than a run may take, %s", t.End.Timeout, MaxTimeout)
	}
	if t.End.ExitCode < 0 || t.End.ExitCode > 255 {
		add("end.exit_code", "%d is not an exit code (0 to 255)", t.End.ExitCode)
	}
	for i, a := range t.Artifacts {
		p := "artifacts" + index(i)
		if required(p, a) {
			checkSandboxPath(add, p, a)
		}
	}
	if _, written := nodes["repeats"]; (written && t.Repeats < 1) || t.Repeats < 0 || t.Repeats > MaxRepeats {
		add("repeats", "%d is not between 1 and %d", t.Repeats, MaxRepeats)
	}
	t.checkNUL(add)
}

// checkNUL refuses a NUL character in the strings that become a command
// line, an environment, a path or a header in the sandbox, none of which
// can carry one: the run would fail at its first command instead.
func (t *Task) checkNUL(add func(string, string, ...any)) {
	nul := func(field, v string) {
		if strings.ContainsRune(v, 0) {
			add(field, "contains a NUL character")
		}
	}
	nuls := func(prefix string, m map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			nul(prefix+k, m[k])
		}
	}
	for _, f := range [][2]string{{"template", t.Template}, {"image", t.Image}, {"model", t.Model}, {"goal", t.Goal},
		{"entrypoint", t.Entrypoint}, {"workdir", t.Workdir}, {"end.check", t.End.Check}, {"end.success_file", t.End.SuccessFile}} {
		nul(f[0], f[1])
	}
	nuls("env.", t.Env)
	for i, in := range t.Inputs {
		nul("inputs"+index(i)+".source", in.Source)
		nul("inputs"+index(i)+".destination", in.Destination)
	}
	for i, v := range t.Setup {
		nul("setup"+index(i), v)
	}
	for i, v := range t.Artifacts {
		nul("artifacts"+index(i), v)
	}
	for i, m := range t.MCP {
		p := "mcp" + index(i)
		nul(p+".url", m.URL)
		for j, v := range m.Command {
			nul(p+".command"+index(j), v)
		}
		nuls(p+".env.", m.Env)
		nuls(p+".headers.", m.Headers)
	}
}

func (t *Task) checkMCP(add func(string, string, ...any), p string, s MCPServer, names map[string]bool) {
	if s.Name == "" {
		add(p+".name", "is required")
	} else {
		if !mcpNamePattern.MatchString(s.Name) {
			add(p+".name", "%q is not a server name: use letters, digits, '_' and '-'", s.Name)
		}
		if names[s.Name] {
			add(p+".name", "another MCP server is named %q too", s.Name)
		}
		names[s.Name] = true
	}
	switch {
	case s.Name == OwnMCPServer:
		if s.URL != "" || s.Command != nil || s.Headers != nil || s.Env != nil {
			add(p, "%q is the daemon's own MCP server: give it no url, command, headers or env", OwnMCPServer)
		}
	case s.URL != "" && s.Command != nil:
		add(p, "give url (a remote server) or command (a local one), not both")
	case s.URL != "":
		if u, err := url.Parse(s.URL); err != nil || !httpURLPattern.MatchString(s.URL) || u.Host == "" {
			add(p+".url", "%q is not an http or https URL", s.URL)
		}
		if len(s.Env) > 0 {
			add(p+".env", "is for local servers (command)")
		}
	case s.Command != nil:
		if len(s.Command) == 0 {
			add(p+".command", "is empty: give the program and its arguments")
		} else if strings.TrimSpace(s.Command[0]) == "" {
			add(p+".command[0]", "is empty")
		}
		if len(s.Headers) > 0 {
			add(p+".headers", "are for remote servers (url)")
		}
	default:
		add(p, "needs url (a remote server) or command (a local one)")
	}
	for k := range s.Env {
		if !envNamePattern.MatchString(k) {
			add(p+".env."+k, "%q is not an environment variable name", k)
		}
	}
}

// checkSandboxPath requires an absolute path in the sandbox without ".."
// segments, so that a path stays where it reads.
func checkSandboxPath(add func(string, string, ...any), field, p string) {
	switch {
	case !absPathPattern.MatchString(p):
		add(field, "%q must be an absolute path in the sandbox", p)
	case dotDotPattern.MatchString(p):
		add(field, "%q must not contain '..'", p)
	}
}

func validCPU(s string) bool {
	if !cpuPattern.MatchString(s) {
		return false
	}
	_, err := quantity.ParseCPU(s)
	return err == nil
}

// minSize is the least memory, and the least disk, a sandbox may have
// (the sandbox manager's minimum).
const minSize = 16 << 20

// checkSize checks the size at field, when it is given: a quantity such
// as 2Gi, at least minSize.
func checkSize(add func(string, string, ...any), optional func(string, string) bool, field, v string) {
	if !optional(field, v) {
		return
	}
	if !bytesPattern.MatchString(v) {
		add(field, "%q is not a size such as 512Mi or 2Gi", v)
		return
	}
	n, err := quantity.ParseBytes(v)
	switch {
	case err != nil:
		add(field, "%q is not a size such as 512Mi or 2Gi", v)
	case n < minSize:
		add(field, "%s is below the 16Mi minimum", v)
	}
}

func index(i int) string { return "[" + strconv.Itoa(i) + "]" }
