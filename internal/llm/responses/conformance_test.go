package responses_test

import (
	"testing"

	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/responses"
)

func TestConformance(t *testing.T) { llmtest.Run(t, responses.Codec{}) }
