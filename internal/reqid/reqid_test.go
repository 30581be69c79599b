package reqid

import (
	"context"
	"testing"
)

// A fresh id reads back from its context as the bytes given for the
// header, is valid, is not its neighbour's, and hides no other value.
func TestFreshIDReadsAsItsHeader(t *testing.T) {
	type other struct{}
	parent := context.WithValue(context.Background(), other{}, "kept")
	ctx, header := Fresh(parent, nil)
	next, nextHeader := Fresh(parent, make([]byte, 0, 32))
	if id := From(ctx); id != string(header) || !Valid(id) {
		t.Fatalf("id %q, header %q", id, header)
	}
	if again := From(ctx); again != string(header) || From(next) != string(nextHeader) || string(header) == string(nextHeader) {
		t.Fatalf("ids %q and %q", header, nextHeader)
	}
	if ctx.Value(other{}) != "kept" {
		t.Fatal("the parent's value is lost")
	}
	if id := From(With(ctx, "client-id")); id != "client-id" {
		t.Fatalf("a later id is not the one read: %q", id)
	}
}

func BenchmarkFresh(b *testing.B) {
	var buf [32]byte
	b.ReportAllocs()
	for b.Loop() {
		_, h := Fresh(context.Background(), buf[:0])
		if len(h) == 0 {
			b.Fatal("no id")
		}
	}
}
