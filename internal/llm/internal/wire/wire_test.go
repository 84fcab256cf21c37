package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " backslash \ slash /`, "nl\ncr\rtab\t", "\x00\x01\x1f\x7f",
		"<html>&amp;", "ünïcödé 🚀", "\u2028\u2029", "bad \xff utf8 \xc3", strings.Repeat("x", 100),
	} {
		got := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("AppendString(%q) = %s: not JSON: %v", s, got, err)
			continue
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if back != want {
			t.Errorf("AppendString(%q) decodes to %q, want %q", s, back, want)
		}
	}
}

func TestMembers(t *testing.T) {
	data := []byte(` { "a" : 1, "b\"q":{"x":[1,{"y":"}"}]} ,"c":"s","d":null,"e":true,"f":-1.5e3 } `)
	var keys, values []string
	err := Members(data, func(k string, v []byte) error {
		keys, values = append(keys, k), append(values, string(v))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a", `b"q`, "c", "d", "e", "f"}, keys); d != "" {
		t.Errorf("keys (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"1", `{"x":[1,{"y":"}"}]}`, `"s"`, "null", "true", "-1.5e3"}, values); d != "" {
		t.Errorf("values (-want +got):\n%s", d)
	}
	for _, bad := range []string{"", "[]", "{", `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":[1,2}`, `{"a":"x}`, `{1:2}`} {
		if err := Members([]byte(bad), func(string, []byte) error { return nil }); err == nil {
			t.Errorf("Members(%q) accepted malformed JSON", bad)
		}
	}
}

func TestReplaceModelKeepsEveryOtherByte(t *testing.T) {
	for _, tc := range []struct{ in, model, want string }{
		{`{"model":"alias","messages":[]}`, "real-1", `{"model":"real-1","messages":[]}`},
		{"{\n  \"stream\": true,\n  \"model\" : \"a\",\n  \"x\": {\"model\":\"inner\"}\n}", "b", "{\n  \"stream\": true,\n  \"model\" : \"b\",\n  \"x\": {\"model\":\"inner\"}\n}"},
		{`{"x":{"model":"inner"},"model":"a\"b"}`, `q"uote`, `{"x":{"model":"inner"},"model":"q\"uote"}`},
	} {
		got, ok := ReplaceModel([]byte(tc.in), tc.model)
		if !ok || string(got) != tc.want {
			t.Errorf("ReplaceModel(%s, %q) = %s, %v; want %s", tc.in, tc.model, got, ok, tc.want)
		}
	}
	if _, ok := ReplaceModel([]byte(`{"messages":[]}`), "m"); ok {
		t.Error("ReplaceModel without a model member reported ok")
	}
}

func TestArgumentsObject(t *testing.T) {
	for in, want := range map[string]string{
		"":            `{}`,
		` {"a":1} `:   `{"a":1}`,
		`[1]`:         `{"arguments":"[1]"}`,
		`{"a":`:       `{"arguments":"{\"a\":"}`,
		`not json at`: `{"arguments":"not json at"}`,
	} {
		if got := string(ArgumentsObject(in)); got != want {
			t.Errorf("ArgumentsObject(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestWriter(t *testing.T) {
	var j W
	j.Obj().KStr("a", "x").KArr("b").Int(1).Obj().KBool("c", true).End().Null().End().KObj("d").End().KStrOmit("e", "").End()
	if got, want := string(j.B), `{"a":"x","b":[1,{"c":true},null],"d":{}}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestAt(t *testing.T) {
	data := []byte(`{"a":[{"b":1},{"b":[10, {"c":"x"}]}],"d":"e"}`)
	for _, tc := range []struct {
		path []any
		want string
	}{
		{[]any{"a", 1, "b", 1}, `{"c":"x"}`},
		{[]any{"a", 0}, `{"b":1}`},
		{[]any{"d"}, `"e"`},
		{[]any{"a", 2}, ""},
		{[]any{"z"}, ""},
		{[]any{"d", 0}, ""},
	} {
		if got := string(At(data, tc.path...)); got != tc.want {
			t.Errorf("At(%v) = %s, want %s", tc.path, got, tc.want)
		}
	}
}

func TestUnquoteMatchesEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`""`, `"plain"`, `"a\nb\tc\"d\\e\/f\b\f\r"`, `"\u00e9\u4e2d"`, `"\ud83d\ude80 rocket"`, `"lone \ud83d x"`,
		`"lone \ude80"`, `"\ud83d\u0041"`, `"ünï 🚀"`, `"bad \x"`, `"ctl ` + "\x01" + `"`, `"open`, `x`, `"\u12"`, `"a"b"`,
	} {
		var want string
		werr := json.Unmarshal([]byte(raw), &want)
		got, ok := Unquote([]byte(raw))
		if (werr == nil) != ok || got != want {
			t.Errorf("Unquote(%s) = %q, %v; encoding/json: %q, %v", raw, got, ok, want, werr)
		}
	}
}

func FuzzUnquote(f *testing.F) {
	f.Add(`"a\u00e9\ud83d\ude80\n"`)
	f.Fuzz(func(t *testing.T, s string) {
		raw := "\"" + s + "\""
		var want string
		werr := json.Unmarshal([]byte(raw), &want)
		got, ok := Unquote([]byte(raw))
		if werr == nil && (!ok || got != want) {
			t.Fatalf("Unquote(%s) = %q, %v; encoding/json: %q", raw, got, ok, want)
		}
	})
}

func TestSetAndDeleteMember(t *testing.T) {
	tests := []struct {
		data, set, deleted string
	}{
		{`{}`, `{"k":true}`, `{}`},
		{` { } `, ` { "k":true} `, ` { } `},
		{`{"a":1}`, `{"a":1,"k":true}`, `{"a":1}`},
		{`{"k":null}`, `{"k":true}`, `{}`},
		{`{"k": {"x":1}, "a":1}`, `{"k": true, "a":1}`, `{"a":1}`},
		{`{"a":1, "k":null}`, `{"a":1, "k":true}`, `{"a":1}`},
		{`{"a":1,"k":2,"b":"k"}`, `{"a":1,"k":true,"b":"k"}`, `{"a":1,"b":"k"}`},
		{`{"a":1,"k":2,"k":3,"b":4}`, `{"a":1,"k":2,"k":true,"b":4}`, `{"a":1,"b":4}`},
		{`{"k":1,"k":2}`, `{"k":1,"k":true}`, `{}`},
		{`{"x":{"k":1}}`, `{"x":{"k":1},"k":true}`, `{"x":{"k":1}}`},
	}
	for _, tc := range tests {
		got, ok := SetMember([]byte(tc.data), "k", []byte("true"))
		if !ok || string(got) != tc.set {
			t.Errorf("SetMember(%s) = %s, %v; want %s", tc.data, got, ok, tc.set)
		}
		got, ok = DeleteMember([]byte(tc.data), "k")
		if !ok || string(got) != tc.deleted {
			t.Errorf("DeleteMember(%s) = %s, %v; want %s", tc.data, got, ok, tc.deleted)
		}
		if !json.Valid(got) {
			t.Errorf("DeleteMember(%s) = %s: not JSON", tc.data, got)
		}
	}
	for _, bad := range []string{`[]`, `{"a":`, `null`} {
		if _, ok := SetMember([]byte(bad), "k", []byte("1")); ok {
			t.Errorf("SetMember(%s) ok", bad)
		}
		if _, ok := DeleteMember([]byte(bad), "k"); ok {
			t.Errorf("DeleteMember(%s) ok", bad)
		}
	}
}
