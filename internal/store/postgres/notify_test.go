package postgres

import (
	"context"
	"testing"
	"time"
)

// What a daemon notifies, the listeners of the topic on another daemon of
// the store receive, in order; other topics and stores in other schemas
// of the database do not.
func TestNotify(t *testing.T) {
	url := server.URL(t)
	a, b, other := open(t, url), open(t, url), open(t, server.URL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := a.Listen(ctx, "run")
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := other.Listen(ctx, "run")
	if err != nil {
		t.Fatal(err)
	}
	// A second topic, added while the first is listened to.
	session, err := a.Listen(ctx, "session")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"one", "two", "three"} {
		if err := b.Notify(ctx, "run", []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Notify(ctx, "session", []byte("s")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"one", "two", "three"} {
		select {
		case p := <-got:
			if string(p) != want {
				t.Errorf("received %q, want %q", p, want)
			}
		case <-ctx.Done():
			t.Fatalf("no notification %q", want)
		}
	}
	select {
	case p := <-session:
		if string(p) != "s" {
			t.Errorf("session topic received %q", p)
		}
	case <-ctx.Done():
		t.Fatal("no notification on the second topic")
	}
	if err := b.Notify(ctx, "run", make([]byte, 8000)); err == nil {
		t.Error("a payload of 8000 bytes was sent")
	}
	select {
	case p := <-elsewhere:
		t.Errorf("a store in another schema received %q", p)
	case <-time.After(200 * time.Millisecond):
	}
	// The channel closes with its context.
	lctx, lcancel := context.WithCancel(ctx)
	ch, err := a.Listen(lctx, "run")
	if err != nil {
		t.Fatal(err)
	}
	lcancel()
	for range ch {
	}
}
