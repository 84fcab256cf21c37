package proxy_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
)

// TestUntranslatableResponsesRefused: a Responses request that refers to
// earlier responses OpenAI keeps, or holds a file, is refused with a 400
// in Responses' format naming the field when its model's provider speaks
// another format (translated, it went without them, unseen); passed
// through to a Responses provider it goes.
func TestUntranslatableResponsesRefused(t *testing.T) {
	for _, tc := range []struct{ name, body, field string }{
		{"previous_response_id", `{"model":"m","input":"hi","previous_response_id":"resp_x"}`, "previous_response_id"},
		{"conversation", `{"model":"m","input":"hi","conversation":"conv_x"}`, "conversation"},
		{"file id", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "input_file"},
		{"inline file", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"see"},{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,AA=="}]}]}`, "input_file"},
	} {
		for _, f := range []llm.Format{llm.FormatOpenAI, llm.FormatAnthropic, llm.FormatResponses} {
			t.Run(tc.name+"/"+string(f), func(t *testing.T) {
				up := llmtest.NewFakeUpstream(t, proxy.Codecs[f], "", answer("hi"))
				base, _ := serve(t, proxy.Config{
					Providers: []proxy.Provider{{Name: "up", Type: string(f), BaseURL: up.URL}},
					Models:    []proxy.Model{{Name: "m", Provider: "up"}},
				})
				resp, err := http.Post(base+"/v1/responses", "application/json", strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if f == llm.FormatResponses {
					if resp.StatusCode != http.StatusOK || len(up.Calls()) != 1 {
						t.Errorf("passed through: %d %s, %d upstream calls; want 200, 1", resp.StatusCode, got, len(up.Calls()))
					}
					return
				}
				e := proxy.Codecs[llm.FormatResponses].DecodeError(resp.StatusCode, got)
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Message, tc.field) || !strings.Contains(string(got), `"invalid_request_error"`) {
					t.Errorf("translated: %d %s; want a 400 in Responses' format naming %s", resp.StatusCode, got, tc.field)
				}
				if n := len(up.Calls()); n != 0 {
					t.Errorf("%d calls went upstream", n)
				}
			})
		}
	}
}

// TestBadRequestJSON: a request that is not JSON, or whose member has the
// wrong kind of value, is a 400 in the client's format that says where
// and what in plain words, not in Go's, and reaches no upstream.
func TestBadRequestJSON(t *testing.T) {
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatAnthropic], "", func(*llm.Request) (*llm.Response, *llm.Error) {
		t.Error("a bad request reached the upstream")
		return nil, llm.Invalid("unexpected")
	})
	base, _ := serve(t, proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "anthropic", BaseURL: up.URL}},
		Models:    []proxy.Model{{Name: "m", Provider: "up"}},
	})
	for _, tt := range []struct{ name, body, want string }{
		{"a bare word", `{"model":"m","messages":[x]}`, `request is not valid JSON: line 1, column 26: unexpected "x" where a value should start`},
		{"cut short", "{\"model\":\"m\",\n\"messages\":[", `request is not valid JSON: line 2, column 13: the JSON value is cut short`},
		{"not an object", `[1]`, `request: the body must be a JSON object (got array)`},
		{"a string for an array", `{"model":"m","messages":"hi"}`, `chat completions request: messages must be a JSON array (got string)`},
		{"a string for a number", `{"model":"m","messages":[],"temperature":"hot"}`, `chat completions request: temperature must be a number (got string)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			inbounds[llm.FormatOpenAI].auth(req.Header)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			e := proxy.Codecs[llm.FormatOpenAI].DecodeError(resp.StatusCode, got)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Message, tt.want) ||
				strings.Contains(e.Message, "invalid character") || strings.Contains(e.Message, "Go ") {
				t.Errorf("%d %s, want a 400 saying %q", resp.StatusCode, got, tt.want)
			}
		})
	}
}
