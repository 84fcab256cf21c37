package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/api/sse"
)

// daemonURL is the daemon's base URL, such as http://127.0.0.1:8080. The
// examples run against a stand-in that answers as a daemon would.
var daemonURL = exampleDaemon()

// exampleDaemon starts the stand-in daemon the examples use and returns
// its URL: one running sandbox, sb-1, and two sessions.
func exampleDaemon() string {
	sandbox := api.Sandbox{ID: "sb-1", Image: "agent2env/python", Status: api.StatusRunning}
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if err := json.NewEncoder(w).Encode(v); err != nil {
			log.Print(err)
		}
	}
	mux.HandleFunc("POST /api/v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, sandbox)
	})
	mux.HandleFunc("GET /api/v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != sandbox.ID {
			writeJSON(w, http.StatusNotFound, api.Error{Message: "sandbox " + r.PathValue("id") + " not found", Code: "SANDBOX_NOT_FOUND"})
			return
		}
		writeJSON(w, http.StatusOK, sandbox)
	})
	mux.HandleFunc("POST /api/v1/sandboxes/sb-1/exec", func(w http.ResponseWriter, r *http.Request) {
		stdout, enc := api.EncodeOutput("Python 3.13.5\n", api.OutputBase64)
		writeJSON(w, http.StatusOK, api.ExecResponse{Stdout: stdout, Encoding: enc})
	})
	mux.HandleFunc("POST /api/v1/sandboxes/sb-1/exec/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sw := sse.NewWriter(w)
		for _, line := range []string{"1\n", "2\n", "3\n"} {
			sw.SendJSON("stdout", api.ExecEvent{Type: "stdout", Data: line})
		}
		sw.SendJSON("exit", api.ExecEvent{Type: "exit", ExitCode: 0})
	})
	mux.HandleFunc("GET /api/v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		all := []api.Session{{SessionID: "ses-1"}, {SessionID: "ses-2"}, {SessionID: "ses-3"}}
		start := map[string]int{"": 0, "c1": 1, "c2": 2}[r.URL.Query().Get("cursor")]
		page := api.SessionList{Items: all[start : start+1], Total: 1}
		if start < 2 {
			page.NextCursor = fmt.Sprintf("c%d", start+1)
		}
		writeJSON(w, http.StatusOK, page)
	})
	return httptest.NewServer(mux).URL
}

// Example makes a sandbox, waits until it runs, runs a command in it and
// removes it.
func Example() {
	ctx := context.Background()
	c, err := client.New(daemonURL, client.WithToken(os.Getenv(client.EnvToken)))
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Sandbox.Create(ctx, api.CreateSandboxRequest{Image: "agent2env/python"})
	if err != nil {
		log.Fatal(err)
	}
	sb, err = c.Sandbox.WaitForReady(ctx, sb.ID, 0)
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Sandbox.Execute(ctx, sb.ID, api.ExecRequest{Command: []string{"python3", "-V"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: exit %d, %s", sb.Status, res.ExitCode, res.Stdout)
	// Output: running: exit 0, Python 3.13.5
}

// ExampleSandboxService_ExecuteStream copies a command's output as it is
// produced. Cancelling ctx stops the call, and the command.
func ExampleSandboxService_ExecuteStream() {
	c, err := client.New(daemonURL)
	if err != nil {
		log.Fatal(err)
	}
	cmd := api.ExecRequest{Command: []string{"sh", "-c", "for i in 1 2 3; do echo $i; sleep 1; done"}}
	exit, err := c.Sandbox.ExecuteStream(context.Background(), "sb-1", cmd, os.Stdout, os.Stderr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code", exit.ExitCode)
	// Output:
	// 1
	// 2
	// 3
	// exit code 0
}

// ExampleAPIError tells errors apart: errors.Is by class, errors.As for
// the daemon's code and message.
func ExampleAPIError() {
	c, err := client.New(daemonURL)
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Sandbox.Get(context.Background(), "sb-gone")
	fmt.Println(errors.Is(err, client.ErrNotFound))
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.StatusCode, apiErr.Code)
	}
	// Arguments the client refuses before asking are invalid arguments.
	_, err = c.Sandbox.Get(context.Background(), "")
	fmt.Println(errors.Is(err, client.ErrInvalidArgument))
	// Output:
	// true
	// 404 SANDBOX_NOT_FOUND
	// true
}

// ExampleSessionService_ListPage reads a list a page at a time, following
// NextCursor; the other ListPage methods page the same way.
func ExampleSessionService_ListPage() {
	c, err := client.New(daemonURL)
	if err != nil {
		log.Fatal(err)
	}
	opts := client.ListSessionsOptions{Limit: 1}
	for {
		page, err := c.Sessions().ListPage(context.Background(), opts)
		if err != nil {
			log.Fatal(err)
		}
		for _, s := range page.Items {
			fmt.Println(s.SessionID)
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	// Output:
	// ses-1
	// ses-2
	// ses-3
}

// ExampleSandboxService_UploadFile writes a file into a sandbox from any
// io.Reader, streamed, and reads one back.
func ExampleSandboxService_UploadFile() {
	ctx := context.Background()
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Sandbox.UploadFile(ctx, "sb-1", "/tmp/hello.txt", strings.NewReader("hello\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	rc, err := c.Sandbox.DownloadFile(ctx, "sb-1", "/tmp/hello.txt")
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	io.Copy(os.Stdout, rc)
}

// ExampleContext_Run keeps state between executions in a code-interpreter
// context.
func ExampleContext_Run() {
	ctx := context.Background()
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	cx, err := c.Contexts().Create(ctx, api.CreateContextRequest{Language: api.LanguagePython})
	if err != nil {
		log.Fatal(err)
	}
	defer cx.Delete(ctx)
	if _, err := cx.Run(ctx, "x = 6 * 7"); err != nil {
		log.Fatal(err)
	}
	res, err := cx.Run(ctx, "x")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Result) // 42
}
