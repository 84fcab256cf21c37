package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/task"
)

// taskRunFlags are the flags of task run.
type taskRunFlags struct {
	repeats, parallel int
	agents, models    []string
	names             []string
	out               string
}

func newTaskRunCmd(e env, cc *clientConfig) *cobra.Command {
	var f taskRunFlags
	c := &cobra.Command{
		Use:   "run [FILE...] [flags]",
		Short: "run task files in sandboxes, watch them and print the results with pass@k",
		Long: `run submits each task file (its inputs included) to the daemon, k times per agent × model
combination, and watches the runs: a live table on a terminal, a line per change otherwise.
When all have ended it prints a summary (per run, then pass@1 and pass@k per task, agent and
model), writes into --out DIR per run its result.json, output.log, conversation.jsonl (its
model calls, exported from the LLM archive) and artifacts, and the summary, and exits 1 when
any run did not succeed. --name runs a task of the daemon's tasks directory instead of a
local file. Interrupting cancels the runs.`,
		Example: `  agent2env task run tasks/hello.yaml
  agent2env task run tasks/fix-failing-test.yaml --agent claude-code,codex --model coder -k 5 --parallel 5 --out results
  agent2env task run --name hello -k 3`,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 && len(f.names) == 0 {
				return usageErrorf(c, "need a task file (or --name)")
			}
			return taskRun(c.Context(), e, cc, f, args)
		},
	}
	fl := c.Flags()
	fl.IntVarP(&f.repeats, "repeats", "k", 0, "runs per agent × model combination (default: the task's repeats)")
	fl.IntVar(&f.parallel, "parallel", 0, "runs of each task going at once (default: all, within the daemon's --max-runs)")
	fl.StringSliceVar(&f.agents, "agent", nil, "agents instead of the task's, comma-separated: a matrix with --model")
	fl.StringSliceVar(&f.models, "model", nil, "models instead of the task's, comma-separated")
	fl.StringSliceVar(&f.names, "name", nil, "tasks of the daemon's tasks directory to run, by name")
	fl.StringVar(&f.out, "out", "", "directory to write each run's result.json, output.log, conversation.jsonl and artifacts, and summary.json into")
	return c
}

// taskRun is task run: submit, watch, collect, summarize.
func taskRun(ctx context.Context, e env, cc *clientConfig, f taskRunFlags, files []string) error {
	reqs := make([]api.RunSubmitRequest, 0, len(files)+len(f.names))
	for _, p := range files {
		req, err := fileRequest(p)
		if err != nil {
			return err
		}
		reqs = append(reqs, req)
	}
	for _, n := range f.names {
		reqs = append(reqs, api.RunSubmitRequest{TaskName: n})
	}
	cl, err := cc.client(e)
	if err != nil {
		return err
	}
	var batches []string
	var submitted []api.Run
	for i := range reqs {
		reqs[i].Agents, reqs[i].Models, reqs[i].Repeats, reqs[i].Parallel = f.agents, f.models, f.repeats, f.parallel
		b, err := cl.Runs().Submit(ctx, reqs[i])
		if err != nil {
			// The runs of the tasks before go with the command, which
			// would leave them unwatched.
			cancelRuns(ctx, cl, submitted, nil)
			return err
		}
		batches = append(batches, b.ID)
		submitted = append(submitted, b.Runs...)
		fmt.Fprintf(e.stderr, "agent2env: task %s: %s (batch %s)\n", b.Task, counted(len(b.Runs), "run"), b.ID)
	}
	runs, err := watchRuns(ctx, e, cl, batches)
	if err != nil {
		if ctx.Err() != nil {
			// Interrupted: the runs go with the command, every one
			// submitted, those the watch had not listed yet too.
			cancelRuns(ctx, cl, submitted, runs)
		}
		return err
	}
	if f.out != "" {
		if err := saveRuns(ctx, e, cl, f.out, runs); err != nil {
			return err
		}
	}
	printSummary(e.stdout, runs)
	for _, r := range runs {
		if r.Status != api.RunSucceeded {
			return &exitError{code: 1}
		}
	}
	return nil
}

// cancelRuns cancels those of runs that have not ended: neither their
// status nor that of the same run in seen, a later listing, is final. ctx
// may be done (an interruption): the cancels get a context of their own,
// bounded.
func cancelRuns(ctx context.Context, cl *client.Client, runs, seen []api.Run) {
	ended := map[string]bool{}
	for _, r := range slices.Concat(runs, seen) {
		if r.Status.Final() {
			ended[r.ID] = true
		}
	}
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, r := range runs {
		if !ended[r.ID] {
			cl.Runs().Cancel(stop, r.ID)
		}
	}
}

// fileRequest reads a task file, checks it, and packs its inputs. The file
// is loaded here first so that its problems are reported with their lines
// before anything is submitted; the daemon gets its content, not its
// path, since it may run on another machine.
func fileRequest(p string) (api.RunSubmitRequest, error) {
	t, err := task.LoadFile(p)
	if err != nil {
		return api.RunSubmitRequest{}, err
	}
	content, err := os.ReadFile(p)
	if err != nil {
		return api.RunSubmitRequest{}, fmt.Errorf("read task file: %w", err)
	}
	req := api.RunSubmitRequest{Task: string(content)}
	if len(t.Inputs) > 0 {
		data, err := packInputs(t)
		if err != nil {
			return api.RunSubmitRequest{}, fmt.Errorf("task %s: %w", p, err)
		}
		req.Inputs = base64.StdEncoding.EncodeToString(data)
	}
	return req, nil
}

// packInputs returns the task's input sources as a gzipped tar, by their
// paths relative to the task file. Symbolic links are left out: one could
// bring in a file from outside the task's directory.
func packInputs(t *task.Task) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for i, in := range t.Inputs {
		src := filepath.Join(t.Dir, filepath.FromSlash(in.Source))
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			rel, err := filepath.Rel(t.Dir, p)
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), Size: fi.Size(),
				ModTime: fi.ModTime(), Typeflag: tar.TypeReg}); err != nil {
				return err
			}
			fh, err := os.Open(p)
			if err != nil {
				return err
			}
			defer fh.Close()
			// The size the header announced: a file that grows meanwhile
			// would otherwise break the archive.
			_, err = io.CopyN(tw, fh, fi.Size())
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("inputs[%d]: %w", i, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// watchRuns polls the batches' runs until all ended, showing them: a
// table redrawn in place on a terminal, a line per change otherwise.
func watchRuns(ctx context.Context, e env, cl *client.Client, batches []string) ([]api.Run, error) {
	tty := isTerminal(e.stdout)
	poll := e.poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	seen := map[string]string{}
	drawn := 0
	var runs []api.Run
	for {
		runs = runs[:0]
		for _, b := range batches {
			list, err := cl.Runs().List(ctx, client.ListRunsOptions{Batch: b})
			if err != nil {
				return runs, err
			}
			runs = append(runs, list.Items...)
		}
		done := true
		for _, r := range runs {
			done = done && r.Status.Final()
		}
		if tty {
			var buf bytes.Buffer
			runView(nil, runs).table.write(&buf, false)
			// The table's cells are made visible; the cursor moves are
			// the CLI's own.
			term := raw(e.stdout)
			if drawn > 0 {
				// Up over the table drawn last, and erase from there
				// down: the new one replaces it in place.
				fmt.Fprintf(term, "\x1b[%dA\x1b[J", drawn)
			}
			term.Write(buf.Bytes())
			drawn = bytes.Count(buf.Bytes(), []byte("\n"))
		} else {
			for _, r := range runs {
				state := string(r.Status) + "/" + r.Phase
				if seen[r.ID] == state {
					continue
				}
				seen[r.ID] = state
				line := fmt.Sprintf("%s %s %s %s #%d %s", r.ID, r.Task, r.Agent, orDash(r.Model), r.Repeat, r.Status)
				if r.Status.Final() {
					line += " " + runTime(r) + ": " + oneLine(r.Reason)
				} else {
					line += " (" + r.Phase + ")"
				}
				fmt.Fprintln(e.stdout, visibleField(line))
			}
		}
		if done {
			return runs, nil
		}
		select {
		case <-ctx.Done():
			return runs, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// saveRuns writes into dir, per run, result.json, output.log, the
// conversation (conversation.jsonl: the LLM archive's export of the run's
// exchanges, when it made model calls) and the artifacts
// (dir/<run>/artifacts/...), and summary.json.
func saveRuns(ctx context.Context, e env, cl *client.Client, dir string, runs []api.Run) error {
	for _, r := range runs {
		rdir := filepath.Join(dir, r.ID)
		if err := os.MkdirAll(rdir, 0o755); err != nil {
			return err
		}
		js, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(filepath.Join(rdir, "result.json"), append(js, '\n'), 0o644); err != nil {
			return err
		}
		if err := saveStream(filepath.Join(rdir, "output.log"), func() (io.ReadCloser, error) { return cl.Runs().Logs(ctx, r.ID) }); err != nil {
			return err
		}
		if r.LLM.Requests > 0 {
			if err := saveConversation(ctx, cl, filepath.Join(rdir, "conversation.jsonl"), r.ID); err != nil {
				return err
			}
		}
		if len(r.Artifacts) > 0 {
			rc, err := cl.Runs().Artifacts(ctx, r.ID)
			if err != nil {
				return err
			}
			_, err = extractTar(rc, filepath.Join(rdir, "artifacts"))
			rc.Close()
			if err != nil {
				return err
			}
		}
	}
	js, _ := json.MarshalIndent(summarize(runs), "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "agent2env: results in %s\n", dir)
	return nil
}

// saveConversation writes the LLM archive's export of run id's exchanges
// (JSON Lines, as `agent2env llm export --run` gives it) to p.
func saveConversation(ctx context.Context, cl *client.Client, p, id string) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	_, err = cl.LLM().Export(ctx, client.LLMFilter{Run: id}, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func saveStream(p string, open func() (io.ReadCloser, error)) error {
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// combo is the summary of one task × agent × model's runs.
type combo struct {
	Task      string  `json:"task"`
	Agent     string  `json:"agent"`
	Model     string  `json:"model,omitempty"`
	Runs      int     `json:"runs"`
	Succeeded int     `json:"succeeded"`
	PassAt1   float64 `json:"pass_at_1"`
	// PassAtK is pass@k for k = Runs: whether any run succeeded.
	PassAtK float64        `json:"pass_at_k"`
	Status  map[string]int `json:"status"`
}

// summarize groups runs by task, agent and model, in their order.
func summarize(runs []api.Run) []combo {
	var out []combo
	index := map[string]int{}
	for _, r := range runs {
		key := r.Task + "\x00" + r.Agent + "\x00" + r.Model
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, combo{Task: r.Task, Agent: r.Agent, Model: r.Model, Status: map[string]int{}})
		}
		c := &out[i]
		c.Runs++
		c.Status[string(r.Status)]++
		if r.Status == api.RunSucceeded {
			c.Succeeded++
		}
	}
	for i := range out {
		c := &out[i]
		c.PassAt1 = passAtK(c.Runs, c.Succeeded, 1)
		c.PassAtK = passAtK(c.Runs, c.Succeeded, c.Runs)
	}
	return out
}

// passAtK is the unbiased estimate of pass@k from n runs of which c
// succeeded: 1 - C(n-c, k) / C(n, k), computed as 1 - Π (1 - k/i) for i
// from n-c+1 to n, which never forms the binomials (they overflow for
// large n).
func passAtK(n, c, k int) float64 {
	if n == 0 || k > n {
		return 0
	}
	if n-c < k {
		return 1
	}
	p := 1.0
	for i := n - c + 1; i <= n; i++ {
		p *= 1 - float64(k)/float64(i)
	}
	return 1 - p
}

// printSummary prints the runs, then pass rates per combination.
func printSummary(w io.Writer, runs []api.Run) {
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b api.Run) int {
		return strings.Compare(a.Task+a.Agent+a.Model, b.Task+b.Agent+b.Model)
	})
	t := newTable("RUN", "TASK", "AGENT", "MODEL", "#", "STATUS", "TIME", "TOKENS IN/OUT", "REASON")
	for _, r := range sorted {
		t.add(r.ID, r.Task, r.Agent, orDash(r.Model), strconv.Itoa(r.Repeat), string(r.Status), runTime(r), tokens(r.LLM),
			orDash(clip(oneLine(r.Reason), 70)))
	}
	fmt.Fprintln(w)
	t.write(w, false)
	fmt.Fprintln(w)
	s := newTable("TASK", "AGENT", "MODEL", "PASSED", "PASS@1", "PASS@K")
	for _, c := range summarize(runs) {
		s.add(c.Task, c.Agent, orDash(c.Model), fmt.Sprintf("%d/%d", c.Succeeded, c.Runs),
			fmt.Sprintf("%.2f", c.PassAt1), fmt.Sprintf("%.2f (k=%d)", c.PassAtK, c.Runs))
	}
	s.write(w, false)
}
