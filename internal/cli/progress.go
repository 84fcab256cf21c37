package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
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
// character device such as a terminal, or says it is one (tests'
// terminals).
func isTerminal(w io.Writer) bool {
	for _, w := range []io.Writer{w, raw(w)} {
		if t, ok := w.(interface{ isTerminal() bool }); ok {
			return t.isTerminal()
		}
	}
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

// Timings of following the image a request waits for.
var (
	// followRetry is how often a follow that found nothing in flight
	// looks again: the daemon may not have begun preparing the image yet.
	followRetry = time.Second
	// followGrace is how long the end of a sandbox's wait leaves the
	// follow of its image to read the rest of its stream.
	followGrace = 2 * time.Second
	// buildsDelay is how long a request runs before showBuilds looks for
	// images being prepared: most requests are done by then.
	buildsDelay = 2 * time.Second
)

// followImage shows on stderr the pull or build of ref that the daemon
// has in flight, which a pending sandbox waits for: a line saying so and
// the progress (a bar on a terminal, a line now and then elsewhere).
// Nothing is shown when ref is stored already. Call the stop function it
// returns once the wait is over.
func followImage(ctx context.Context, e env, cl *client.Client, ref string) (stop func()) {
	return follow(ctx, e, followGrace, func(ctx context.Context, ending <-chan struct{}, show func(ref string) client.ProgressFunc) {
		for {
			_, err := cl.Image.Follow(ctx, ref, show(ref))
			if !errors.Is(err, client.ErrNotFound) {
				return // stored, failed (the wait says why) or stopped
			}
			select {
			case <-ending:
				return
			case <-ctx.Done():
				return
			case <-time.After(followRetry):
			}
		}
	})
}

// showBuilds shows on stderr, while a request that may create a sandbox
// runs (a context's, a session's), the progress of the images the daemon
// is building or pulling, which the request may be waiting for. Call the
// stop function it returns once the request is answered.
func showBuilds(ctx context.Context, e env, cl *client.Client) (stop func()) {
	return follow(ctx, e, 0, func(ctx context.Context, _ <-chan struct{}, show func(ref string) client.ProgressFunc) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(buildsDelay):
		}
		imgs, err := cl.Image.List(ctx)
		if err != nil {
			return
		}
		for _, img := range imgs {
			if img.Status == api.ImageBuilding || img.Status == api.ImagePulling {
				// One at a time: the daemon's builds go one after the other.
				if _, err := cl.Image.Follow(ctx, img.Ref, show(img.Ref)); err != nil {
					return
				}
			}
		}
	})
}

// follow runs watch in the background. The progress function show(ref)
// gives it shows ref's events on e.stderr, after a line naming ref; an
// image stored already (its "done" event alone) shows nothing. The stop
// function it returns closes ending, leaves watch grace to end on its
// own, then cancels it, and ends the progress output.
func follow(ctx context.Context, e env, grace time.Duration,
	watch func(ctx context.Context, ending <-chan struct{}, show func(ref string) client.ProgressFunc)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	ending := make(chan struct{})
	p := newProgress(e.stderr)
	show := func(ref string) client.ProgressFunc {
		shown := false
		return func(ev api.ImageProgress) {
			if !shown {
				if ev.Phase == "done" {
					return
				}
				shown = true
				p.done()
				fmt.Fprintf(e.stderr, "waiting for image %s, which the daemon is preparing (its first use builds or pulls it)\n", ref)
			}
			p.update(ev)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		watch(ctx, ending, show)
	}()
	return func() {
		close(ending)
		select {
		case <-done:
		case <-time.After(grace):
		}
		cancel()
		<-done
		p.done()
	}
}
