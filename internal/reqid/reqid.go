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
func New() string {
	buf := make([]byte, 0, 32)
	buf = append(buf, prefix...)
	buf = append(buf, '-')
	buf = strconv.AppendUint(buf, counter.Add(1), 36)
	return string(buf)
}

type ctxKey struct{}

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
