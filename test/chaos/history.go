// Package chaos is seckill's seeded chaos run: a client workload and a
// nemesis (process kills and freezes, cut and slowed links, lost Redis
// writes, terminated workflows, the database's writer failing over) against two APIs and two workers on their
// own Redis, MariaDB and Temporal, a history of every request, answer and
// fault as JSON lines, and a checker that judges the history and the final
// state of MySQL, Redis and Temporal without trusting the project's own
// reconciliation. The same seed replays the same schedule of operations and
// faults (timing differs).
package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Event kinds.
const (
	KindRequest = "req"   // a client or operator request and its answer
	KindFault   = "fault" // a fault injected
	KindHeal    = "heal"  // a fault healed
	KindProbe   = "probe" // a request of the final probes
	KindNote    = "note"  // a phase of the run
)

// Event is one line of the history.
type Event struct {
	Seq  int64     `json:"seq"`
	T    time.Time `json:"t"`             // sent (request), injected or healed (fault)
	End  time.Time `json:"end,omitzero"`  // answered (request)
	Kind string    `json:"kind"`          // KindRequest, KindFault, ...
	Op   string    `json:"op"`            // reserve, pay, webhook, cancel, ...; the fault class
	API  int       `json:"api,omitempty"` // which API process answered (1-based)

	Sale      int64  `json:"sale,omitempty"`
	User      int64  `json:"user,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	Token     string `json:"token,omitempty"`
	PayRef    string `json:"payment_ref,omitempty"`

	HTTP   int    `json:"http,omitempty"`   // status; 0 with Err: no answer
	Code   string `json:"code,omitempty"`   // error code of the answer
	Status string `json:"status,omitempty"` // reservation status in the answer
	Err    string `json:"err,omitempty"`    // transport error

	// Faults.
	FaultID    int    `json:"fault_id,omitempty"`
	Target     string `json:"target,omitempty"`
	WritesLost bool   `json:"writes_lost,omitempty"` // the fault may lose acknowledged writes
	Detail     string `json:"detail,omitempty"`
}

// Recorder appends events to a JSON-lines file and keeps them in memory.
type Recorder struct {
	mu     sync.Mutex
	seq    int64
	events []Event
	w      *bufio.Writer
	f      *os.File
}

// NewRecorder writes the history to path.
func NewRecorder(path string) (*Recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Recorder{f: f, w: bufio.NewWriter(f)}, nil
}

// Add records e, numbering it; it returns the numbered event.
func (r *Recorder) Add(e Event) Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	e.Seq = r.seq
	if e.T.IsZero() {
		e.T = time.Now()
	}
	r.events = append(r.events, e)
	if r.w != nil {
		b, err := json.Marshal(e)
		if err == nil {
			_, _ = r.w.Write(append(b, '\n'))
		}
	}
	return e
}

// Events is a copy of the history so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Close flushes and closes the file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.w.Flush()
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	r.f = nil
	r.w = nil
	return err
}

// ReadHistory loads a history file.
func ReadHistory(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("read history %s line %d: %w", path, len(out)+1, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// FaultSpan is one fault from injection to heal.
type FaultSpan struct {
	ID         int
	Class      string
	Target     string
	Sale       int64 // the sale a fault touched (0: all)
	WritesLost bool
	From, To   time.Time
}

// Spans pairs the fault and heal events of a history; a fault never healed
// lasts to the end of the history.
func Spans(h []Event) []FaultSpan {
	var out []FaultSpan
	idx := map[int]int{}
	var last time.Time
	for _, e := range h {
		if e.T.After(last) {
			last = e.T
		}
		switch e.Kind {
		case KindFault:
			idx[e.FaultID] = len(out)
			out = append(out, FaultSpan{ID: e.FaultID, Class: e.Op, Target: e.Target, Sale: e.Sale, WritesLost: e.WritesLost, From: e.T})
		case KindHeal:
			if i, ok := idx[e.FaultID]; ok {
				out[i].To = e.T
			}
		}
	}
	for i := range out {
		if out[i].To.IsZero() {
			out[i].To = last
		}
	}
	return out
}
