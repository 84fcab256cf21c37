package gemini_test

import (
	"testing"

	"github.com/agent2env/agent2env/internal/llm/gemini"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
)

func TestConformance(t *testing.T) { llmtest.Run(t, gemini.Codec{}) }
