package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
)

// Redraw and log intervals of progress output.
const (
	barInterval  = 100 * time.Millisecond
	lineInterval = 2 * time.Second
)

// progress shows the progress events of an image pull, build or import.
// On a terminal it redraws one bar line per item; elsewhere it prints a
// line when the item changes or completes, and at most every
// lineInterval in between. It is safe for concurrent use.
type progress struct {
	w   io.Writer
	tty bool
	now func() time.Time

	mu      sync.Mutex
	key     string    // phase and item of the last event shown
	line    string    // how it was shown
	last    time.Time // when
	drawn   int       // length of the bar line on screen, 0 if none
	current int64     // bytes of the last event shown
}

// newProgress shows progress on w. The bar's CR goes to the writer under
// w's escaping (raw); the daemon's phases and items are made visible.
func newProgress(w io.Writer) *progress {
	return &progress{w: raw(w), tty: isTerminal(w), now: time.Now}
}

// isTerminal reports whether w, or the writer under its escaping, is a
// character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := raw(w).(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// update shows ev, unless it is too soon after the last redraw.
func (p *progress) update(ev api.ImageProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := ev.Phase + "\x00" + ev.Item
	now := p.now()
	changed := key != p.key
	complete := ev.Total > 0 && ev.Current >= ev.Total && ev.Current != p.current
	interval := lineInterval
	if p.tty {
		interval = barInterval
	}
	if !changed && !complete && now.Sub(p.last) < interval {
		return
	}
	line := progressLine(ev)
	if line == p.line {
		return
	}
	p.key, p.line, p.last, p.current = key, line, now, ev.Current
	if !p.tty {
		fmt.Fprintln(p.w, line)
		return
	}
	if changed && p.drawn > 0 {
		// Leave the finished item's line on screen.
		fmt.Fprintln(p.w)
		p.drawn = 0
	}
	pad := max(p.drawn-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.drawn = len(line)
}

// done ends the bar line, if one is drawn.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn > 0 {
		fmt.Fprintln(p.w)
		p.drawn = 0
	}
}

// barWidth is the number of cells in a progress bar.
const barWidth = 16

// progressLine renders ev as "phase item [=====>   ] 1.0 MiB/4.0 MiB  25%".
func progressLine(ev api.ImageProgress) string {
	var b strings.Builder
	b.WriteString(visibleField(ev.Phase))
	if ev.Item != "" {
		// Keep a line with a bar within 80 columns, or redraws wrap.
		limit := 60
		if ev.Total > 0 {
			limit = 28
		}
		b.WriteString(" " + shorten(visibleField(ev.Item), limit))
	}
	switch {
	case ev.Total > 0:
		frac := min(float64(ev.Current)/float64(ev.Total), 1)
		fill := int(frac * barWidth)
		bar := strings.Repeat("=", fill)
		if fill < barWidth {
			bar += ">" + strings.Repeat(" ", barWidth-fill-1)
		}
		fmt.Fprintf(&b, " [%s] %s/%s %3d%%", bar, formatBytes(ev.Current), formatBytes(ev.Total), int(frac*100))
	case ev.Current > 0:
		b.WriteString(" " + formatBytes(ev.Current))
	}
	return b.String()
}

// shorten cuts s to n runes, keeping its start and end.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	half := (n - 3) / 2
	return string(r[:half]) + "..." + string(r[len(r)-(n-3-half):])
}
