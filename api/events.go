package api

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/lua"
)

// Event streams (GET /api/v1/reservations/{token}/events). A status
// change reaches every API instance as a wake-up on the sale's Redis
// channel (status.lua publishes it); the status record stays the truth:
// a stream re-reads it on every wake-up and every streamReread, so a
// message lost to pub/sub (a reconnect, an instance started late) delays
// an event by at most that period and never leaves a client stale.
const (
	streamReread    = 5 * time.Second
	streamHeartbeat = 10 * time.Second // the contract: a comment at least every 15 s
	streamWriteWait = 30 * time.Second // per write; the server's WriteTimeout is per response
	streamRetryMS   = 2000             // the client's reconnection delay (SSE retry:)
)

// statusHub fans the sale channels' wake-ups out to this instance's
// streams, by token.
type statusHub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func newStatusHub() *statusHub {
	return &statusHub{subs: make(map[string]map[chan struct{}]struct{})}
}

func (h *statusHub) subscribe(token string) chan struct{} {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	set := h.subs[token]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		h.subs[token] = set
	}
	set[ch] = struct{}{}
	h.mu.Unlock()
	return ch
}

func (h *statusHub) unsubscribe(token string, ch chan struct{}) {
	h.mu.Lock()
	if set := h.subs[token]; set != nil {
		delete(set, ch)
		if len(set) == 0 {
			delete(h.subs, token)
		}
	}
	h.mu.Unlock()
}

// wake tells the token's streams to re-read; a stream that has a wake-up
// pending needs no second one.
func (h *statusHub) wake(token string) {
	h.mu.Lock()
	for ch := range h.subs[token] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	h.mu.Unlock()
}

// run listens on every sale's event channel until stop; go-redis
// resubscribes after a lost connection.
func (h *statusHub) run(stop <-chan struct{}, rdb *lua.Client, logger *slog.Logger) {
	if err := rdb.ListenStatusEvents(stop, h.wake); err != nil {
		logger.Warn("status events: subscription closed")
	}
}

// GET /api/v1/reservations/{token}/events
func (s *server) reservationEvents(c *fiber.Ctx) error {
	p := principal(c)
	token, saleID, err := tokenParam(c)
	if err != nil {
		return sendErr(c, err)
	}
	view, seq, err := s.statusView(c.UserContext(), p.UserID, token, saleID)
	if err != nil {
		return s.sendMaybeUnavailable(c, err)
	}
	// Last-Event-ID: the sequence the client saw last; garbage counts as
	// nothing seen.
	last, _ := strconv.ParseInt(strings.TrimSpace(c.Get("Last-Event-ID")), 10, 64)

	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	conn := c.Context().Conn()
	wake := s.hub.subscribe(token)
	st := &eventStream{s: s, userID: p.UserID, token: token, saleID: saleID, last: last, wake: wake,
		shutdown: c.Context().Done(), // closed when the server starts shutting down
		deadline: func() { _ = conn.SetWriteDeadline(time.Now().Add(streamWriteWait)) }}
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer s.hub.unsubscribe(token, wake)
		st.w = w
		st.serve(view, seq)
	})
	return nil
}

// eventStream is one open stream; it outlives the handler's fiber.Ctx.
type eventStream struct {
	s        *server
	w        *bufio.Writer
	userID   int64
	token    string
	saleID   int64
	last     int64 // the sequence the client has
	wake     chan struct{}
	shutdown <-chan struct{}
	deadline func()
}

func (e *eventStream) serve(view domain.ReservationView, seq int64) {
	if e.write("retry: "+strconv.Itoa(streamRetryMS)+"\n\n") != nil {
		return
	}
	if done, err := e.send(view, seq); done || err != nil {
		return
	}
	reread := time.NewTicker(streamReread)
	defer reread.Stop()
	heartbeat := time.NewTicker(streamHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-e.s.stop:
			return
		case <-e.shutdown:
			return
		case <-heartbeat.C:
			if e.write(": keep-alive\n\n") != nil {
				return
			}
			continue
		case <-e.wake:
		case <-reread.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
		view, seq, err := e.s.statusView(ctx, e.userID, e.token, e.saleID)
		cancel()
		if err != nil {
			// Not now (Redis and the database unreachable): the next
			// wake-up or re-read tries again.
			e.s.logger.Warn("status events: re-read", "token", e.token, "err", err)
			continue
		}
		if done, err := e.send(view, seq); done || err != nil {
			return
		}
	}
}

// send writes the view as an event when the client does not have it yet;
// done is true once the reservation has ended (the stream closes).
func (e *eventStream) send(view domain.ReservationView, seq int64) (done bool, err error) {
	if seq > e.last {
		body, err := json.Marshal(view)
		if err != nil {
			return true, err
		}
		if err := e.write("id: " + strconv.FormatInt(seq, 10) + "\nevent: status\ndata: " + string(body) + "\n\n"); err != nil {
			return true, err
		}
		e.last = seq
	}
	return view.Status.Terminal(), nil
}

func (e *eventStream) write(s string) error {
	e.deadline()
	if _, err := e.w.WriteString(s); err != nil {
		return err
	}
	return e.w.Flush()
}
