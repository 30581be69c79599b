package status

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// Event streams (GET /api/v1/reservations/{token}/events). A status
// change reaches every API instance as a wake-up on the sale's Redis
// channel (status.lua publishes it); the status record stays the truth:
// a stream re-reads it on every wake-up, on every (re)subscription of the
// instance to the channels (the messages published while it was down are
// lost) and every StreamReread, so a message lost to pub/sub delays an
// event by at most that period and never leaves a client stale.
//
// An open stream costs no goroutine: once its headers and first event are
// written, the handler hijacks the connection from fasthttp (whose request
// goroutine, buffers and context go back to their pools) and registers it
// with the hub. A few workers do the streams' re-reads (and write what
// they find), a few others the keep-alive comments, so a slow re-read
// (MySQL in database mode) never delays a comment; one ticker decides
// which streams are due either. An idle stream is its connection and one
// small struct.
const (
	StreamReread    = 30 * time.Second // the guard against a lost wake-up without a reconnect
	streamHeartbeat = 10 * time.Second // the contract: a comment at least every 15 s
	streamWriteWait = 5 * time.Second  // per write: a client that has not read a full socket buffer by then is dropped (it reconnects with Last-Event-ID)
	streamRetryMS   = 2000             // the client's reconnection delay (SSE retry:)
	streamWorkers   = 32               // re-reads in flight, for every stream of the instance
	streamBeaters   = 4                // keep-alive writes in flight
	streamTick      = time.Second      // how often the ticker looks for streams due a re-read or a comment
	streamUnstarted = time.Minute      // a stream never handed its connection is forgotten after this
	streamsPerUser  = 8                // the contract: more streams of one user at once get 429
)

// Hub holds this instance's open streams: it fans the sale
// channels' wake-ups out to them by token, and its workers serve them.
type Hub struct {
	reader      *Reader
	blacklisted func(userID int64) bool
	logger      *slog.Logger
	stop        <-chan struct{}
	work        chan *Stream // streams due a re-read
	beats       chan *Stream // streams due a keep-alive comment
	reread      atomic.Int64 // StreamReread; tests shorten it

	mu      sync.Mutex
	byToken map[string][]*Stream
	streams map[*Stream]struct{}
	perUser map[int64][]*Stream
	open    atomic.Int64 // streams with a connection
}

// NewHub is the hub of this instance's streams, which read through r; a
// blacklisted user's streams end. It serves once Run runs, until stop.
func NewHub(r *Reader, blacklisted func(userID int64) bool, stop <-chan struct{}, logger *slog.Logger) *Hub {
	h := &Hub{reader: r, blacklisted: blacklisted, stop: stop, logger: logger, work: make(chan *Stream, 4096), beats: make(chan *Stream, 4096),
		byToken: make(map[string][]*Stream), streams: make(map[*Stream]struct{}), perUser: make(map[int64][]*Stream)}
	h.reread.Store(int64(StreamReread))
	return h
}

// add registers a stream before its first read, so a change made between
// that read and the connection's hand-over wakes it. It refuses a user's
// stream beyond streamsPerUser open on this instance; at the cap it first
// drops the user's streams whose clients are gone (a stream never reads,
// so it learns of a closed connection only at its next write).
func (h *Hub) add(e *Stream) bool {
	if h.tryAdd(e) {
		return true
	}
	h.mu.Lock()
	mine := append([]*Stream(nil), h.perUser[e.userID]...)
	h.mu.Unlock()
	for _, o := range mine {
		if !o.alive() {
			h.remove(o)
		}
	}
	return h.tryAdd(e)
}

func (h *Hub) tryAdd(e *Stream) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.perUser[e.userID]) >= streamsPerUser {
		return false
	}
	h.perUser[e.userID] = append(h.perUser[e.userID], e)
	h.byToken[e.token] = append(h.byToken[e.token], e)
	h.streams[e] = struct{}{}
	return true
}

func (h *Hub) remove(e *Stream) {
	h.mu.Lock()
	if _, ok := h.streams[e]; ok {
		delete(h.streams, e)
		dropStream(h.perUser, e.userID, e)
		dropStream(h.byToken, e.token, e)
	}
	h.mu.Unlock()
}

// dropStream removes e from m[k], and the key once its list is empty.
func dropStream[K comparable](m map[K][]*Stream, k K, e *Stream) {
	list := m[k]
	for i, o := range list {
		if o == e {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(m, k)
	} else {
		m[k] = list
	}
}

// wake tells the token's streams to re-read.
func (h *Hub) wake(token string) {
	h.mu.Lock()
	list := append([]*Stream(nil), h.byToken[token]...)
	h.mu.Unlock()
	for _, e := range list {
		e.reread.Store(true)
		h.enqueue(e)
	}
}

// wakeAll tells every stream to re-read: the instance has just
// (re)subscribed, and what was published before is lost to it.
func (h *Hub) wakeAll() {
	h.mu.Lock()
	all := make([]*Stream, 0, len(h.streams))
	for e := range h.streams {
		e.reread.Store(true)
		all = append(all, e)
	}
	h.mu.Unlock()
	for _, e := range all {
		h.enqueue(e)
	}
}

// enqueue hands a started stream to the re-read workers, once until they
// take it. It never blocks: when they are that far behind, the stream
// keeps its re-read flag and the ticker hands it over again.
func (h *Hub) enqueue(e *Stream) { handOver(e, &e.queued, h.work) }

// enqueueBeat hands a started stream to the keep-alive workers, likewise.
func (h *Hub) enqueueBeat(e *Stream) { handOver(e, &e.beatQueued, h.beats) }

// handOver puts a started stream on q unless its flag says it is there.
func handOver(e *Stream, queued *atomic.Bool, q chan<- *Stream) {
	if !e.started.Load() || !queued.CompareAndSwap(false, true) {
		return
	}
	select {
	case q <- e:
	default:
		queued.Store(false)
	}
}

// Run listens on every sale's event channel and serves the streams until
// stop, then ends them all.
func (h *Hub) Run(rdb *redisgateway.Client) {
	stop, logger := h.stop, h.logger
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// go-redis resubscribes after a lost connection.
		if err := rdb.ListenStatusEvents(stop, h.reader.Events(h.wake, h.wakeAll)); err != nil {
			logger.Warn("status events: subscription closed")
		}
	}()
	// Each queue's flag is cleared before the work, so a wake during it
	// queues the stream again.
	serveQueue(&wg, stop, streamWorkers, h.work, func(e *Stream) { e.queued.Store(false); e.serve() })
	serveQueue(&wg, stop, streamBeaters, h.beats, func(e *Stream) { e.beatQueued.Store(false); e.keepAlive() })
	tick := time.NewTicker(streamTick)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			wg.Wait()
			h.closeAll()
			return
		case now := <-tick.C:
			h.tick(now)
		}
	}
}

// tick marks the streams due a periodic re-read or a keep-alive comment
// and hands them to the workers (again, for a re-read asked for that did
// not reach them); it forgets streams whose connection never came.
func (h *Hub) tick(now time.Time) {
	var due, beat, lost, over []*Stream
	nowNS := now.UnixNano()
	reread := h.reread.Load()
	h.mu.Lock()
	for e := range h.streams {
		if !e.started.Load() {
			if now.Sub(e.created) > streamUnstarted {
				lost = append(lost, e)
			}
			continue
		}
		if (!e.expires.IsZero() && !now.Before(e.expires)) || h.blacklisted(e.userID) {
			over = append(over, e)
			continue
		}
		if nowNS-e.lastRead.Load() >= reread {
			e.reread.Store(true)
		}
		if e.reread.Load() {
			due = append(due, e)
		}
		if nowNS-e.lastWrite.Load() >= int64(streamHeartbeat) {
			beat = append(beat, e)
		}
	}
	h.mu.Unlock()
	for _, e := range lost {
		h.remove(e)
	}
	for _, e := range over {
		// The token expired (the client reconnects with a fresh one) or
		// the user was blacklisted.
		e.mu.Lock()
		e.end()
		e.mu.Unlock()
		h.remove(e)
	}
	for _, e := range beat {
		h.enqueueBeat(e)
	}
	for _, e := range due {
		h.enqueue(e)
	}
}

// closeAll ends every open stream (the server is shutting down): the
// clients reconnect to another instance with Last-Event-ID.
func (h *Hub) closeAll() {
	h.mu.Lock()
	all := make([]*Stream, 0, len(h.streams))
	for e := range h.streams {
		all = append(all, e)
	}
	h.mu.Unlock()
	for _, e := range all {
		e.mu.Lock()
		if e.conn != nil {
			e.endReconnect()
		}
		e.mu.Unlock()
		h.remove(e)
	}
}

// Stream is one open stream; it outlives the request.
type Stream struct {
	hub     *Hub
	userID  int64
	token   string
	saleID  int64
	created time.Time
	expires time.Time // the token's exp: the stream ends then
	chunked bool      // HTTP/1.1: events are written as chunks

	started    atomic.Bool // its connection is handed over
	queued     atomic.Bool // waiting for a re-read worker
	beatQueued atomic.Bool // waiting for a keep-alive worker
	reread     atomic.Bool // a re-read is asked for (wake-up or period)

	lastRead  atomic.Int64 // unix nanos of the last re-read
	lastWrite atomic.Int64 // unix nanos of the last write

	rmu  sync.Mutex // one re-read of the stream at a time
	mu   sync.Mutex // every write: guards conn, last and buf
	conn net.Conn   // nil once ended
	last int64      // the sequence the client has
	buf  []byte     // the write being built
}

// Start writes the response head, the retry delay and the first event,
// then hands the stream to the hub (or ends it after a terminal status).
func (e *Stream) Start(conn net.Conn, head []byte, view domain.ReservationView, seq int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.conn = conn
	select {
	case <-e.hub.stop: // shutting down: closeAll may have passed it
		e.endReconnect()
		e.hub.remove(e)
		return
	default:
	}
	e.buf = append(e.buf[:0], head...)
	e.appendChunk([]byte("retry: " + strconv.Itoa(streamRetryMS) + "\n\n"))
	done, err := e.appendView(view, seq)
	if err == nil {
		err = e.flush()
	}
	if done || err != nil {
		e.end()
		e.hub.remove(e)
		return
	}
	now := time.Now().UnixNano()
	e.lastRead.Store(now)
	e.hub.open.Add(1)
	e.started.Store(true)
	if e.reread.Load() { // a wake-up came before the hand-over
		e.hub.enqueue(e)
	}
}

// serve re-reads the status when asked to and sends the view if it is
// newer than what the client has. The read holds no write lock, so a slow
// one delays no keep-alive comment.
func (e *Stream) serve() {
	e.rmu.Lock()
	defer e.rmu.Unlock()
	if !e.reread.Swap(false) || e.ended() {
		return
	}
	e.lastRead.Store(time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	view, seq, err := e.hub.reader.Stream(ctx, e.userID, e.token, e.saleID)
	cancel()
	switch {
	case err == nil:
	case errors.Is(err, ErrRedisBusy):
		// Redis is slow or unreachable now: the next wake-up or re-read
		// tries again (the database is not asked for what Redis holds).
		return
	default:
		// Not now (the database unreachable): likewise.
		e.hub.logger.Warn("status events: re-read", "token", e.token, "err", err)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn == nil {
		return
	}
	done, err := e.appendView(view, seq)
	if err == nil && len(e.buf) > 0 {
		err = e.flush()
	}
	if done || err != nil {
		e.end()
		e.hub.remove(e)
	}
}

// alive reports whether the stream's client may still be there: a stream
// not handed its connection yet is; a started one whose connection reads
// end-of-file at once is not (and is ended).
func (e *Stream) alive() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.started.Load() {
		return true
	}
	if e.conn == nil {
		return false
	}
	_ = e.conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	var b [1]byte
	_, err := e.conn.Read(b[:])
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		return true
	}
	e.end()
	return false
}

// ended reports whether the stream's connection is closed.
func (e *Stream) ended() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conn == nil
}

// keepAlive writes a comment unless something was written since it fell
// due.
func (e *Stream) keepAlive() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn == nil || time.Now().UnixNano()-e.lastWrite.Load() < int64(streamHeartbeat-streamTick) {
		return
	}
	e.appendChunk([]byte(": keep-alive\n\n"))
	if e.flush() != nil {
		e.end()
		e.hub.remove(e)
	}
}

// appendView adds the view as an event when the client does not have it
// yet; done is true once the reservation has ended (the stream closes).
func (e *Stream) appendView(view domain.ReservationView, seq int64) (done bool, err error) {
	if seq > e.last {
		body, err := json.Marshal(view)
		if err != nil {
			return true, err
		}
		e.appendChunk([]byte("id: " + strconv.FormatInt(seq, 10) + "\nevent: status\ndata: " + string(body) + "\n\n"))
		e.last = seq
	}
	return view.Status.Terminal(), nil
}

// appendChunk adds p to the pending write, framed as a chunk on HTTP/1.1.
func (e *Stream) appendChunk(p []byte) {
	if e.chunked {
		e.buf = strconv.AppendInt(e.buf, int64(len(p)), 16)
		e.buf = append(e.buf, '\r', '\n')
		e.buf = append(e.buf, p...)
		e.buf = append(e.buf, '\r', '\n')
		return
	}
	e.buf = append(e.buf, p...)
}

// flush writes the pending bytes within streamWriteWait.
func (e *Stream) flush() error {
	_ = e.conn.SetWriteDeadline(time.Now().Add(streamWriteWait))
	_, err := e.conn.Write(e.buf)
	e.buf = e.buf[:0]
	if cap(e.buf) > 512 {
		e.buf = nil // an idle stream keeps no buffer
	}
	e.lastWrite.Store(time.Now().UnixNano())
	return err
}

// endReconnect ends the stream of an instance that shuts down: an SSE
// retry: field first tells the client to reconnect (to another instance,
// with Last-Event-ID), after a delay spread over streamRetryMS so that an
// instance's streams do not all come back at once. A write to a client
// already gone fails, and the connection closes all the same.
func (e *Stream) endReconnect() {
	if e.conn == nil {
		return
	}
	retry := streamRetryMS/2 + rand.IntN(streamRetryMS)
	e.buf = e.buf[:0]
	e.appendChunk([]byte("retry: " + strconv.Itoa(retry) + "\n\n"))
	_ = e.conn.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := e.conn.Write(e.buf); err != nil {
		e.hub.logger.Debug("event stream: reconnect hint not delivered", "err", err)
	}
	e.end()
}

// end finishes the body (the last chunk) and closes the connection.
func (e *Stream) end() {
	if e.conn == nil {
		return
	}
	if e.chunked {
		e.buf = append(e.buf[:0], "0\r\n\r\n"...)
		_ = e.conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = e.conn.Write(e.buf)
	}
	e.buf = nil
	_ = e.conn.Close()
	e.conn = nil
	if e.started.Load() {
		e.hub.open.Add(-1)
	}
}

// serveQueue runs n goroutines that do work for each stream from q until
// stop closes.
func serveQueue(wg *sync.WaitGroup, stop <-chan struct{}, n int, q <-chan *Stream, work func(*Stream)) {
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case e := <-q:
					work(e)
				}
			}
		}()
	}
}

// Open registers a user's stream of a token before its first read, so a
// change made between that read and the connection's hand-over (Start)
// wakes it; false when the user has streamsPerUser open here already.
// last is the sequence the client saw last; chunked, whether events are
// written as HTTP/1.1 chunks; the stream ends at expires.
func (h *Hub) Open(userID int64, token string, saleID, last int64, expires time.Time, chunked bool) (*Stream, bool) {
	e := &Stream{hub: h, userID: userID, token: token, saleID: saleID, last: last, created: time.Now(), expires: expires, chunked: chunked}
	if !h.add(e) {
		return nil, false
	}
	return e, true
}

// Drop forgets a stream that will not be started.
func (h *Hub) Drop(e *Stream) { h.remove(e) }

// SetReread sets how often a stream re-reads without a wake-up (tests
// shorten it).
func (h *Hub) SetReread(d time.Duration) { h.reread.Store(int64(d)) }
