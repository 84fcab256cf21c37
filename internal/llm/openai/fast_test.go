package openai

import (
	"testing"

	"github.com/agent2env/agent2env/internal/llm/llmtest"
)

func TestFastPathMatchesSlow(t *testing.T) {
	llmtest.SameWithSlowPath(t, Codec{}, func(on bool) { slowOnly = on }, "testdata/upstream-stream.txt")
}
