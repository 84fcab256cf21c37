package client_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/google/go-cmp/cmp"
)

const templateJSON = `{"id":"tpl-1","name":"py","displayName":"Python","description":"d","tags":["a"],"author":"",` +
	`"isPublic":true,"latestVersion":2,"createdAt":"2025-01-02T03:04:05Z","updatedAt":"2025-01-02T03:04:05Z",` +
	`"spec":{"image":"python:3.12","resources":{"cpu":"500m","memory":"512Mi"},"ttl":0,"startupTimeout":300}}`

var pySpec = api.TemplateSpec{Image: "python:3.12", Resources: api.ResourceSpec{CPU: "500m", Memory: "512Mi"}, StartupTimeout: 300}

var pyTemplate = api.Template{ID: "tpl-1", Name: "py", DisplayName: "Python", Description: "d", Tags: []string{"a"},
	IsPublic: true, LatestVersion: 2, CreatedAt: created, UpdatedAt: created, Spec: &pySpec}

const versionJSON = `{"id":"ver-1","templateId":"tpl-1","version":1,"spec":{"image":"python:3.12","resources":{"cpu":"500m","memory":"512Mi"},` +
	`"ttl":0,"startupTimeout":300},"changelog":"Initial version","createdBy":"","createdAt":"2025-01-02T03:04:05Z"}`

var pyVersion = api.TemplateVersion{ID: "ver-1", TemplateID: "tpl-1", Version: 1, Spec: pySpec, Changelog: "Initial version", CreatedAt: created}

const taskJSON = `{"id":"pp-1","image":"alpine","status":"pending","progress":{"ready":0,"total":0},"startedAt":"2025-01-02T03:04:05Z"}`

var pendingTask = api.PrepullTask{ID: "pp-1", Image: "alpine", Status: api.PrepullPending, StartedAt: created}

const yamlDoc = "apiVersion: liteboxd/v1\nkind: SandboxTemplate\nmetadata:\n    name: py\n"

// TestServiceRequests checks the request each template, prepull, export
// and sandbox control call sends and what it makes of the answer.
func TestServiceRequests(t *testing.T) {
	public := false
	tests := []struct {
		name  string
		reply reply
		call  func(ctx context.Context, c *client.Client) (any, error)
		want  recorded
		out   any
	}{
		{
			name:  "template create",
			reply: reply{status: http.StatusCreated, contentType: "application/json", body: templateJSON},
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Template.Create(ctx, api.CreateTemplateRequest{Name: "py", Tags: []string{"a"}, IsPublic: &public,
					Spec: api.TemplateSpec{Image: "python:3.12"}, AutoPrepull: true})
			},
			want: recorded{Method: "POST", Path: "/api/v1/templates", ContentType: "application/json",
				Body: `{"name":"py","tags":["a"],"isPublic":false,"spec":{"image":"python:3.12","resources":{"cpu":"","memory":""},"ttl":0},"autoPrepull":true}`},
			out: &pyTemplate,
		},
		{
			name:  "template list without options",
			reply: jsonReply(`{"items":[],"total":0,"page":1,"pageSize":20}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Template.List(ctx, client.ListTemplatesOptions{})
			},
			want: recorded{Method: "GET", Path: "/api/v1/templates"},
			out:  &api.TemplateList{Items: []api.Template{}, Page: 1, PageSize: 20},
		},
		{
			name:  "template list with options",
			reply: jsonReply(`{"items":[` + templateJSON + `],"total":41,"page":3,"pageSize":20}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Template.List(ctx, client.ListTemplatesOptions{Tag: "ml & data", Search: "py thon", Page: 3, PageSize: 20})
			},
			want: recorded{Method: "GET", Path: "/api/v1/templates", Query: "page=3&pageSize=20&search=py+thon&tag=ml+%26+data"},
			out:  &api.TemplateList{Items: []api.Template{pyTemplate}, Total: 41, Page: 3, PageSize: 20},
		},
		{
			name:  "template get escapes the name",
			reply: jsonReply(templateJSON),
			call:  func(ctx context.Context, c *client.Client) (any, error) { return c.Template.Get(ctx, "a/b") },
			want:  recorded{Method: "GET", Path: "/api/v1/templates/a%2Fb"},
			out:   &pyTemplate,
		},
		{
			name:  "template update",
			reply: jsonReply(templateJSON),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Template.Update(ctx, "py", api.UpdateTemplateRequest{Tags: []string{}, Spec: api.TemplateSpec{Image: "python:3.13"}, Changelog: "bump"})
			},
			want: recorded{Method: "PUT", Path: "/api/v1/templates/py", ContentType: "application/json",
				Body: `{"tags":[],"spec":{"image":"python:3.13","resources":{"cpu":"","memory":""},"ttl":0},"changelog":"bump"}`},
			out: &pyTemplate,
		},
		{
			name:  "template delete",
			reply: reply{status: http.StatusNoContent},
			call:  func(ctx context.Context, c *client.Client) (any, error) { return nil, c.Template.Delete(ctx, "py") },
			want:  recorded{Method: "DELETE", Path: "/api/v1/templates/py"},
		},
		{
			name:  "template versions",
			reply: jsonReply(`{"items":[` + versionJSON + `],"total":1}`),
			call:  func(ctx context.Context, c *client.Client) (any, error) { return c.Template.ListVersions(ctx, "py") },
			want:  recorded{Method: "GET", Path: "/api/v1/templates/py/versions"},
			out:   &api.VersionList{Items: []api.TemplateVersion{pyVersion}, Total: 1},
		},
		{
			name:  "template versions, a page",
			reply: jsonReply(`{"items":[` + versionJSON + `],"total":1,"next_cursor":"c2"}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Template.ListVersionsPage(ctx, "py", client.ListVersionsOptions{Limit: 1, Cursor: "c1", Order: api.OrderAsc})
			},
			want: recorded{Method: "GET", Path: "/api/v1/templates/py/versions", Query: "cursor=c1&limit=1&order=asc"},
			out:  &api.VersionList{Items: []api.TemplateVersion{pyVersion}, Total: 1, NextCursor: "c2"},
		},
		{
			name:  "template version",
			reply: jsonReply(versionJSON),
			call:  func(ctx context.Context, c *client.Client) (any, error) { return c.Template.GetVersion(ctx, "py", 1) },
			want:  recorded{Method: "GET", Path: "/api/v1/templates/py/versions/1"},
			out:   &pyVersion,
		},
		{
			name: "template rollback",
			reply: jsonReply(`{"id":"tpl-1","name":"py","latestVersion":3,"rolledBackFrom":2,"rolledBackTo":1,` +
				`"updatedAt":"2025-01-02T03:04:05Z"}`),
			call: func(ctx context.Context, c *client.Client) (any, error) { return c.Template.Rollback(ctx, "py", 1, "") },
			want: recorded{Method: "POST", Path: "/api/v1/templates/py/rollback", ContentType: "application/json",
				Body: `{"targetVersion":1}`},
			out: &api.RollbackResponse{ID: "tpl-1", Name: "py", LatestVersion: 3, RolledBackFrom: 2, RolledBackTo: 1, UpdatedAt: created},
		},
		{
			name:  "template export latest",
			reply: reply{status: http.StatusOK, contentType: "application/x-yaml", body: yamlDoc},
			call: func(ctx context.Context, c *client.Client) (any, error) {
				b, err := c.Template.ExportYAML(ctx, "py", 0)
				return string(b), err
			},
			want: recorded{Method: "GET", Path: "/api/v1/templates/py/export"},
			out:  yamlDoc,
		},
		{
			name:  "template export version",
			reply: reply{status: http.StatusOK, contentType: "application/x-yaml", body: yamlDoc},
			call: func(ctx context.Context, c *client.Client) (any, error) {
				b, err := c.Template.ExportYAML(ctx, "py", 2)
				return string(b), err
			},
			want: recorded{Method: "GET", Path: "/api/v1/templates/py/export", Query: "version=2"},
			out:  yamlDoc,
		},
		{
			name:  "export all",
			reply: reply{status: http.StatusOK, contentType: "application/x-yaml", body: yamlDoc},
			call: func(ctx context.Context, c *client.Client) (any, error) {
				b, err := c.ImportExport.ExportAll(ctx, "ml", []string{"a", "b"})
				return string(b), err
			},
			// One comma-separated value, which both LiteBoxd and agent2env read.
			want: recorded{Method: "GET", Path: "/api/v1/templates/export", Query: "names=a%2Cb&tag=ml"},
			out:  yamlDoc,
		},
		{
			name:  "export all without filters",
			reply: reply{status: http.StatusOK, contentType: "application/x-yaml", body: yamlDoc},
			call: func(ctx context.Context, c *client.Client) (any, error) {
				b, err := c.ImportExport.ExportAll(ctx, "", nil)
				return string(b), err
			},
			want: recorded{Method: "GET", Path: "/api/v1/templates/export"},
			out:  yamlDoc,
		},
		{
			name:  "prepull create rounds the timeout up",
			reply: reply{status: http.StatusAccepted, contentType: "application/json", body: taskJSON},
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Prepull.Create(ctx, "alpine", 90*time.Second+time.Millisecond)
			},
			want: recorded{Method: "POST", Path: "/api/v1/images/prepull", ContentType: "application/json",
				Body: `{"image":"alpine","timeout":91}`},
			out: &pendingTask,
		},
		{
			name:  "prepull create rounds the largest timeout up without overflowing",
			reply: reply{status: http.StatusAccepted, contentType: "application/json", body: taskJSON},
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Prepull.Create(ctx, "alpine", math.MaxInt64)
			},
			want: recorded{Method: "POST", Path: "/api/v1/images/prepull", ContentType: "application/json",
				Body: `{"image":"alpine","timeout":9223372037}`},
			out: &pendingTask,
		},
		{
			name:  "prepull create with the default timeout",
			reply: reply{status: http.StatusAccepted, contentType: "application/json", body: taskJSON},
			call:  func(ctx context.Context, c *client.Client) (any, error) { return c.Prepull.Create(ctx, "alpine", 0) },
			want: recorded{Method: "POST", Path: "/api/v1/images/prepull", ContentType: "application/json",
				Body: `{"image":"alpine"}`},
			out: &pendingTask,
		},
		{
			name:  "prepull for template",
			reply: reply{status: http.StatusAccepted, contentType: "application/json", body: taskJSON},
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Prepull.CreateForTemplate(ctx, "py")
			},
			want: recorded{Method: "POST", Path: "/api/v1/templates/py/prepull"},
			out:  &pendingTask,
		},
		{
			name:  "prepull list",
			reply: jsonReply(`{"items":[` + taskJSON + `]}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Prepull.List(ctx, "python:3.12", api.PrepullPulling)
			},
			want: recorded{Method: "GET", Path: "/api/v1/images/prepull", Query: "image=python%3A3.12&status=pulling"},
			out:  []api.PrepullTask{pendingTask},
		},
		{
			name:  "prepull list all",
			reply: jsonReply(`{"items":[]}`),
			call:  func(ctx context.Context, c *client.Client) (any, error) { return c.Prepull.List(ctx, "", "") },
			want:  recorded{Method: "GET", Path: "/api/v1/images/prepull"},
			out:   []api.PrepullTask{},
		},
		{
			name:  "prepull list, a page",
			reply: jsonReply(`{"items":[` + taskJSON + `],"next_cursor":"c2"}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Prepull.ListPage(ctx, client.ListPrepullsOptions{Image: "alpine", Status: api.PrepullPending, Limit: 1, Cursor: "c1", Order: api.OrderAsc})
			},
			want: recorded{Method: "GET", Path: "/api/v1/images/prepull", Query: "cursor=c1&image=alpine&limit=1&order=asc&status=pending"},
			out:  &api.PrepullList{Items: []api.PrepullTask{pendingTask}, NextCursor: "c2"},
		},
		{
			name:  "prepull get",
			reply: jsonReply(taskJSON),
			call:  func(ctx context.Context, c *client.Client) (any, error) { return c.Prepull.Get(ctx, "pp-1") },
			want:  recorded{Method: "GET", Path: "/api/v1/images/prepull/pp-1"},
			out:   &pendingTask,
		},
		{
			name:  "prepull delete",
			reply: reply{status: http.StatusNoContent},
			call:  func(ctx context.Context, c *client.Client) (any, error) { return nil, c.Prepull.Delete(ctx, "pp-1") },
			want:  recorded{Method: "DELETE", Path: "/api/v1/images/prepull/pp-1"},
		},
		{
			name:  "sandbox stop",
			reply: jsonReply(`{"message":"stop requested"}`),
			call:  func(ctx context.Context, c *client.Client) (any, error) { return nil, c.Sandbox.Stop(ctx, "sb1") },
			want:  recorded{Method: "POST", Path: "/api/v1/sandboxes/sb1/stop"},
		},
		{
			name:  "sandbox start",
			reply: jsonReply(`{"message":"start requested"}`),
			call:  func(ctx context.Context, c *client.Client) (any, error) { return nil, c.Sandbox.Start(ctx, "sb1") },
			want:  recorded{Method: "POST", Path: "/api/v1/sandboxes/sb1/start"},
		},
		{
			name:  "sandbox restart",
			reply: jsonReply(`{"message":"restart requested"}`),
			call:  func(ctx context.Context, c *client.Client) (any, error) { return nil, c.Sandbox.Restart(ctx, "sb1") },
			want:  recorded{Method: "POST", Path: "/api/v1/sandboxes/sb1/restart"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rec := fakeDaemon(t, tt.reply)
			out, err := tt.call(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Auth = "Bearer secret"
			if diff := cmp.Diff(tt.want, *rec); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.out, out); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServiceErrors checks that the template, prepull and import errors
// of the daemon come back as *APIError of the right class, with the
// operation in the message.
func TestServiceErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		code   string
		call   func(ctx context.Context, c *client.Client) error
		prefix string
		class  error
	}{
		{
			name: "template exists", status: http.StatusConflict, code: api.CodeTemplateExists,
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Template.Create(ctx, api.CreateTemplateRequest{Name: "py"})
				return err
			},
			prefix: "create template py: ", class: client.ErrConflict,
		},
		{
			name: "template not found", status: http.StatusNotFound, code: api.CodeTemplateNotFound,
			call:   func(ctx context.Context, c *client.Client) error { return c.Template.Delete(ctx, "py") },
			prefix: "delete template py: ", class: client.ErrNotFound,
		},
		{
			name: "version not found", status: http.StatusNotFound, code: api.CodeVersionNotFound,
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Template.GetVersion(ctx, "py", 9)
				return err
			},
			prefix: "get version 9 of template py: ", class: client.ErrNotFound,
		},
		{
			name: "rollback rejected", status: http.StatusBadRequest, code: api.CodeInvalidRequest,
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Template.Rollback(ctx, "py", 0, "")
				return err
			},
			prefix: "roll back template py to version 0: ", class: client.ErrBadRequest,
		},
		{
			name: "prepull in progress", status: http.StatusConflict, code: api.CodePrepullInProgress,
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Prepull.Create(ctx, "alpine", 0)
				return err
			},
			prefix: "prepull alpine: ", class: client.ErrConflict,
		},
		{
			name: "prepull not found", status: http.StatusNotFound, code: api.CodePrepullNotFound,
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Prepull.Get(ctx, "pp-9")
				return err
			},
			prefix: "get prepull task pp-9: ", class: client.ErrNotFound,
		},
		{
			name: "invalid yaml", status: http.StatusBadRequest, code: api.CodeInvalidYAML,
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.ImportExport.ImportTemplates(ctx, strings.NewReader("{"), "", false)
				return err
			},
			prefix: "import templates: ", class: client.ErrBadRequest,
		},
		{
			name: "export failed", status: http.StatusInternalServerError, code: api.CodeInternal,
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.ImportExport.ExportAll(ctx, "", nil)
				return err
			},
			prefix: "export templates: ", class: nil,
		},
		{
			name: "sandbox not stopped", status: http.StatusConflict, code: api.CodeConflict,
			call:   func(ctx context.Context, c *client.Client) error { return c.Sandbox.Start(ctx, "sb1") },
			prefix: "start sandbox sb1: ", class: client.ErrConflict,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := fakeDaemon(t, reply{status: tt.status, contentType: "application/json",
				body: `{"error":"it went wrong","code":"` + tt.code + `"}`})
			err := tt.call(t.Context(), c)
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err %v is not an *APIError", err)
			}
			want := &client.APIError{StatusCode: tt.status, Code: tt.code, Message: "it went wrong"}
			if diff := cmp.Diff(want, apiErr); diff != "" {
				t.Errorf("APIError (-want +got):\n%s", diff)
			}
			if got, want := err.Error(), tt.prefix+want.Error(); got != want {
				t.Errorf("message %q, want %q", got, want)
			}
			checkClass(t, err, tt.class)
		})
	}
}

func TestServiceEmptyNames(t *testing.T) {
	c, err := client.New("http://daemon.invalid")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	calls := map[string]func() error{
		"template get":      func() error { _, err := c.Template.Get(ctx, ""); return err },
		"template update":   func() error { _, err := c.Template.Update(ctx, "", api.UpdateTemplateRequest{}); return err },
		"template delete":   func() error { return c.Template.Delete(ctx, "") },
		"template versions": func() error { _, err := c.Template.ListVersions(ctx, ""); return err },
		"template version":  func() error { _, err := c.Template.GetVersion(ctx, "", 1); return err },
		"template rollback": func() error { _, err := c.Template.Rollback(ctx, "", 1, ""); return err },
		"template export":   func() error { _, err := c.Template.ExportYAML(ctx, "", 0); return err },
		"prepull template":  func() error { _, err := c.Prepull.CreateForTemplate(ctx, ""); return err },
		"prepull get":       func() error { _, err := c.Prepull.Get(ctx, ""); return err },
		"prepull delete":    func() error { return c.Prepull.Delete(ctx, "") },
		"prepull timeout":   func() error { _, err := c.Prepull.Create(ctx, "alpine", -time.Second); return err },
		"import nil reader": func() error { _, err := c.ImportExport.ImportTemplates(ctx, nil, "", false); return err },
		"sandbox stop":      func() error { return c.Sandbox.Stop(ctx, "") },
		"sandbox start":     func() error { return c.Sandbox.Start(ctx, "") },
		"sandbox restart":   func() error { return c.Sandbox.Restart(ctx, "") },
	}
	for name, call := range calls {
		// daemon.invalid does not resolve: an error that is not an
		// *APIError and names no lookup was made locally.
		var apiErr *client.APIError
		if err := call(); err == nil || errors.As(err, &apiErr) || containsAny(err.Error(), "dial", "lookup") {
			t.Errorf("%s: err %v, want a local error", name, err)
		}
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
