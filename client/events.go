package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/domain"
)

// streamIdle is how long a reservation's event stream may stay silent: the
// server sends a comment at least every 10 s.
const streamIdle = 30 * time.Second

// Event is one status event of a reservation's stream.
type Event struct {
	ID   int64 // the status's rank: 1 QUEUED, 2 PENDING_PAYMENT, 3 ended
	View domain.ReservationView
}

// Events reads a reservation's event stream; Close it when done.
type Events struct {
	body   io.ReadCloser
	lines  *bufio.Scanner
	idle   *time.Timer
	cancel context.CancelFunc
}

// Events opens a reservation's event stream after lastEventID (0: from the
// current view). The stream's answer is awaited for the client's timeout,
// then it lasts until ctx ends, the server ends it, or it is silent for
// 30 s. A reconnect after an ended status gets a stream that is already
// over (Next answers io.EOF). Refusals (401, 404, 429) are their
// *domain.Error and are not retried here: a reconnecting caller waits
// their Retry-After.
func (c *Client) Events(ctx context.Context, token string, lastEventID int64) (*Events, error) {
	path := EventsPath(token)
	ctx, cancel := context.WithCancel(ctx)
	req, err := c.request(ctx, call{method: http.MethodGet, path: path}, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	}
	answered := time.AfterFunc(c.timeout, cancel)
	resp, err := (&http.Client{Transport: c.http.Transport}).Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if !answered.Stop() { // the answer came as the wait ran out: the stream is cancelled already
		_ = resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: no answer within %s", path, c.timeout)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer cancel()
		defer func() { _ = resp.Body.Close() }()
		raw, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if rerr != nil {
			return nil, fmt.Errorf("GET %s: read body: %w", path, rerr)
		}
		return nil, answerError(resp, raw)
	}
	e := &Events{body: resp.Body, lines: bufio.NewScanner(resp.Body), idle: time.AfterFunc(streamIdle, cancel), cancel: cancel}
	if resp.StatusCode == http.StatusNoContent {
		e.lines = bufio.NewScanner(strings.NewReader(""))
	}
	return e, nil
}

// Next is the stream's next status event; io.EOF once the server ended
// the stream.
func (e *Events) Next() (Event, error) {
	var ev Event
	var kind, data string
	for e.lines.Scan() {
		e.idle.Reset(streamIdle)
		line := e.lines.Text()
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "" && data != "":
			if kind != "status" {
				kind, data = "", ""
				continue
			}
			if err := json.Unmarshal([]byte(data), &ev.View); err != nil {
				return Event{}, fmt.Errorf("event %d: decode: %w", ev.ID, err)
			}
			return ev, nil
		case field == "id":
			ev.ID, _ = strconv.ParseInt(value, 10, 64) // an unparseable id counts as none, as in EventSource
		case field == "event":
			kind = value
		case field == "data":
			data += value
		}
	}
	if err := e.lines.Err(); err != nil {
		return Event{}, fmt.Errorf("read events: %w", err)
	}
	return Event{}, io.EOF
}

// Close ends the stream.
func (e *Events) Close() error {
	e.idle.Stop()
	e.cancel()
	if err := e.body.Close(); err != nil {
		return fmt.Errorf("close events: %w", err)
	}
	return nil
}
