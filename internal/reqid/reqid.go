// Package reqid is the API request id (X-Request-Id): its validation and
// making, its place in a context, and its trip into Temporal as a header of
// the workflows a request starts. In logs its key is http_request_id: the
// contract's request_id is the reservation's idempotency key, another
// concept.
package reqid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// Header is the HTTP header, and LogKey the log attribute, of the id.
const (
	Header = "X-Request-Id"
	LogKey = "http_request_id"
	// TemporalHeader names the id among a workflow's start headers.
	TemporalHeader = "seckill-http-request-id"
)

// Valid reports whether a client's id may be used as is: 1 to 64 of
// [A-Za-z0-9_-], so it is safe in logs and headers.
func Valid(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// prefix makes ids unique across processes; the counter within one. It
// costs no syscall per request, unlike a random id.
var (
	prefix  = newPrefix()
	counter atomic.Uint64
)

func newPrefix() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("reqid: random prefix: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// New makes an id: a per-process random prefix and a counter.
func New() string { return string(appendID(make([]byte, 0, 32), counter.Add(1))) }

func appendID(b []byte, n uint64) []byte {
	b = append(b, prefix...)
	b = append(b, '-')
	return strconv.AppendUint(b, n, 36)
}

type ctxKey struct{}

// Fresh returns ctx carrying a new id (as New makes them) and b with the
// id appended, for the answer's header. The id becomes a string only when
// read from the context (a log line, a workflow start), which most
// requests, refusals above all, never do.
func Fresh(ctx context.Context, b []byte) (context.Context, []byte) {
	n := counter.Add(1)
	return &freshCtx{Context: ctx, n: n}, appendID(b, n)
}

// freshCtx carries the id numbered n; each read formats it again, so
// concurrent readers share nothing mutable.
type freshCtx struct {
	context.Context
	n uint64
}

func (c *freshCtx) Value(key any) any {
	if key == (ctxKey{}) {
		return string(appendID(make([]byte, 0, 32), c.n))
	}
	return c.Context.Value(key)
}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, id)
}

// From returns the id ctx carries, or "".
func From(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// Propagator carries the id from the context of a workflow start into the
// workflow's headers (recorded on its start event), and from there into the
// workflow's and its activities' contexts.
func Propagator() workflow.ContextPropagator { return propagator{} }

type propagator struct{}

func (propagator) Inject(ctx context.Context, w workflow.HeaderWriter) error {
	return inject(From(ctx), w)
}

func (propagator) InjectFromWorkflow(ctx workflow.Context, w workflow.HeaderWriter) error {
	id, _ := ctx.Value(ctxKey{}).(string)
	return inject(id, w)
}

func inject(id string, w workflow.HeaderWriter) error {
	if id == "" {
		return nil
	}
	p, err := converter.GetDefaultDataConverter().ToPayload(id)
	if err != nil {
		return fmt.Errorf("encode request id header: %w", err)
	}
	w.Set(TemporalHeader, p)
	return nil
}

func (propagator) Extract(ctx context.Context, r workflow.HeaderReader) (context.Context, error) {
	id, err := extract(r)
	if err != nil {
		return ctx, err
	}
	return With(ctx, id), nil
}

func (propagator) ExtractToWorkflow(ctx workflow.Context, r workflow.HeaderReader) (workflow.Context, error) {
	id, err := extract(r)
	if err != nil || id == "" {
		return ctx, err
	}
	return workflow.WithValue(ctx, ctxKey{}, id), nil
}

func extract(r workflow.HeaderReader) (string, error) {
	p, ok := r.Get(TemporalHeader)
	if !ok {
		return "", nil
	}
	var id string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &id); err != nil {
		return "", fmt.Errorf("decode request id header: %w", err)
	}
	return id, nil
}
