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
