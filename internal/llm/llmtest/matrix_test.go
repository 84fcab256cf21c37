package llmtest_test

import (
	"testing"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/anthropic"
	"github.com/agent2env/agent2env/internal/llm/gemini"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/openai"
	"github.com/agent2env/agent2env/internal/llm/responses"
)

// TestMatrix translates every case between every pair of the four formats.
func TestMatrix(t *testing.T) {
	llmtest.Matrix(t, []llm.Codec{openai.Codec{}, responses.Codec{}, anthropic.Codec{}, gemini.Codec{}})
}
