package api

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/lua"
)

// statusReads lets concurrent status reads of one sale share Redis round
// trips, like a group commit: a read joins the sale's next call, which is
// sent after the read arrived (so it sees every status the workflow wrote
// before, and so everything it acknowledged), and one script answers up
// to statusBatchMax tokens. While fewer than statusCallsInFlight calls of
// the sale are in flight a read is sent at once, as before; beyond that,
// reads wait for one of them to return and go together in the next call.
// Nothing is cached: every answer is Redis's, read after the request.
type statusReads struct {
	rdb     *lua.Client
	timeout time.Duration

	mu    sync.Mutex
	sales map[int64]*saleReads
	calls atomic.Int64 // scripts sent
}

const (
	statusBatchMax      = 256
	statusCallsInFlight = 2
)

type saleReads struct {
	inFlight int
	next     *statusBatch // gathering, not sent yet
}

type statusBatch struct {
	tokens []string
	out    []lua.StatusRead
	err    error
	done   chan struct{}
}

func newStatusReads(rdb *lua.Client, timeout time.Duration) *statusReads {
	return &statusReads{rdb: rdb, timeout: timeout, sales: make(map[int64]*saleReads)}
}

// read is the token's hold state and status record; ctx bounds the wait.
func (r *statusReads) read(ctx context.Context, saleID int64, token string) (lua.StatusRead, error) {
	r.mu.Lock()
	sr := r.sales[saleID]
	if sr == nil {
		sr = &saleReads{}
		r.sales[saleID] = sr
	}
	b := sr.next
	if b == nil {
		b = &statusBatch{done: make(chan struct{})}
		sr.next = b
	}
	i := len(b.tokens)
	b.tokens = append(b.tokens, token)
	send := sr.inFlight < statusCallsInFlight || len(b.tokens) >= statusBatchMax
	if send {
		sr.next = nil
		sr.inFlight++
	}
	r.mu.Unlock()
	if send {
		r.call(saleID, sr, b)
	} else {
		select {
		case <-b.done:
		case <-ctx.Done():
			return lua.StatusRead{}, ctx.Err()
		}
	}
	if b.err != nil {
		return lua.StatusRead{}, b.err
	}
	return b.out[i], nil
}

// call sends a batch; when it returns, the reads gathered meanwhile go in
// the next call (on a goroutine of their own, so this caller answers now).
func (r *statusReads) call(saleID int64, sr *saleReads, b *statusBatch) {
	r.calls.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	b.out, b.err = r.rdb.ReadStatuses(ctx, saleID, b.tokens)
	cancel()
	close(b.done)
	r.mu.Lock()
	sr.inFlight--
	next := sr.next
	if next != nil {
		sr.next = nil
		sr.inFlight++
	} else if sr.inFlight == 0 {
		delete(r.sales, saleID)
	}
	r.mu.Unlock()
	if next != nil {
		go r.call(saleID, sr, next)
	}
}
