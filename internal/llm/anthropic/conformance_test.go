package anthropic_test

import (
	"testing"

	"github.com/agent2env/agent2env/internal/llm/anthropic"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
)

func TestConformance(t *testing.T) { llmtest.Run(t, anthropic.Codec{}) }
