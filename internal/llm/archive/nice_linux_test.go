package archive_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/llm/archive"
)

// TestIndexerNice: the indexer runs on a thread of lower priority than
// the requests it indexes.
func TestIndexerNice(t *testing.T) {
	dir := t.TempDir()
	openArchive(t, dir, openStore(t, dir), archive.Config{})
	deadline := time.Now().Add(5 * time.Second)
	for {
		stats, _ := filepath.Glob("/proc/self/task/*/stat")
		for _, p := range stats {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			_, rest, _ := strings.Cut(string(b), ") ")
			if f := strings.Fields(rest); len(f) > 16 && f[16] == "10" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no thread of the process at nice 10 among %d", len(stats))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
