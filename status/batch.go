package status

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// batcher lets concurrent reads of one sale share Redis round trips,
// like a group commit: a read joins the sale's next call, which is sent
// after the read arrived (so it sees every status the workflow wrote
// before, and so everything it acknowledged), and one script answers up
// to readBatchMax keys. While fewer than readCallsInFlight calls of the
// sale are in flight a read is sent at once, as before; beyond that,
// reads wait for one of them to return and go together in the next call.
// Nothing is cached: every answer is Redis's, read after the request.
// Status reads batch tokens (redisgateway.ReadStatuses); me/reservations reads
// batch users (redisgateway.ReadUsersReservations).
type batcher[K, V any] struct {
	read    func(ctx context.Context, saleID int64, keys []K) ([]V, error)
	timeout time.Duration

	mu    sync.Mutex
	sales map[int64]*saleReads[K, V]
	calls atomic.Int64 // scripts sent
}

const (
	readBatchMax      = 256
	readCallsInFlight = 2
)

type saleReads[K, V any] struct {
	inFlight int
	next     *readBatch[K, V] // gathering, not sent yet
}

type readBatch[K, V any] struct {
	keys []K
	out  []V
	err  error
	done chan struct{}
}

// newBatcher batches the calls of read, each within timeout.
func newBatcher[K, V any](read func(ctx context.Context, saleID int64, keys []K) ([]V, error), timeout time.Duration) *batcher[K, V] {
	return &batcher[K, V]{read: read, timeout: timeout, sales: make(map[int64]*saleReads[K, V])}
}

// size is how many sales have reads gathered or in flight.
func (r *batcher[K, V]) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sales)
}

// get is key's answer, read in a call sent after get was called; ctx
// bounds the wait.
func (r *batcher[K, V]) get(ctx context.Context, saleID int64, key K) (V, error) {
	var zero V
	r.mu.Lock()
	sr := r.sales[saleID]
	if sr == nil {
		sr = &saleReads[K, V]{}
		r.sales[saleID] = sr
	}
	b := sr.next
	if b == nil {
		b = &readBatch[K, V]{done: make(chan struct{})}
		sr.next = b
	}
	i := len(b.keys)
	b.keys = append(b.keys, key)
	send := sr.inFlight < readCallsInFlight || len(b.keys) >= readBatchMax
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
			return zero, ctx.Err()
		}
	}
	if b.err != nil {
		return zero, b.err
	}
	return b.out[i], nil
}

// call sends a batch; when it returns, the reads gathered meanwhile go in
// the next call (on a goroutine of their own, so this caller answers now).
func (r *batcher[K, V]) call(saleID int64, sr *saleReads[K, V], b *readBatch[K, V]) {
	r.calls.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	b.out, b.err = r.read(ctx, saleID, b.keys)
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
