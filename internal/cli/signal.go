package cli

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// NotifyContext returns a context that the first SIGINT or SIGTERM
// cancels, the signal as its cause: a command it interrupts stops its work
// (and the remote work it started) and Main exits 128+n for signal n,
// printing nothing more, as a shell does for a command a signal killed.
// stop releases the signals: they act as by default again.
func NotifyContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	return notifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

// notifyContext returns a context that the first of sigs cancels, with a
// *signalError as its cause; stop releases sigs.
func notifyContext(parent context.Context, sigs ...os.Signal) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case s := <-ch:
			cancel(&signalError{sig: s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}

// signalError is the cause of a context a signal cancelled, and the error
// of a command it interrupted: Main exits 128+n for it, silently.
type signalError struct{ sig os.Signal }

func (e *signalError) Error() string { return e.sig.String() + " signal received" }

// code is a shell's exit status for a command that signal n ended: 128+n.
func (e *signalError) code() int {
	if s, ok := e.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// interruption returns the *signalError that cancelled ctx, or nil when
// no signal did.
func interruption(ctx context.Context) *signalError {
	var sig *signalError
	if errors.As(context.Cause(ctx), &sig) {
		return sig
	}
	return nil
}

// interrupted returns err, the error of a command run with ctx, as the
// *signalError that cancelled ctx when err comes of that cancellation (a
// request cut short, a wait given up): the interruption, not a failure.
func interrupted(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var sig *signalError
	if errors.As(err, &sig) {
		return sig
	}
	if sig := interruption(ctx); sig != nil && errors.Is(err, context.Canceled) {
		return sig
	}
	return err
}
