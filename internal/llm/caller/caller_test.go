package caller

import (
	"context"
	"testing"
)

func TestFrom(t *testing.T) {
	if got := From(context.Background()); got != (Caller{}) {
		t.Fatalf("From(empty) = %+v, want zero", got)
	}
	want := Caller{Sandbox: "sb1", Run: "run1", Key: "key1"}
	if got := From(WithCaller(context.Background(), want)); got != want {
		t.Fatalf("From = %+v, want %+v", got, want)
	}
}
