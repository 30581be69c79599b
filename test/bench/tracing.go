package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Scenario 11, tracing: the sold-out path and GET /healthz on two APIs
// side by side, one exporting traces over OTLP (as `up` runs it) and one
// with tracing off, in rounds taking turns (ABA order, like scenario 1);
// the figures are the median round's. The collector is a sink in this
// process that counts what it is sent: a refusal must cost no span, so
// the traced API should export nothing during the timed runs.
func (r *runner) tracing(ctx context.Context) error {
	const conns = 64
	sink, err := startOTLPSink()
	if err != nil {
		return err
	}
	defer sink.close()
	queue := "bench-tracing-" + r.stamp // nobody polls it: the setup's one order waits there
	plain := r.env(queue)
	traced := r.env(queue)
	traced["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink.url
	traced["OTEL_SERVICE_NAME"] = "seckill-bench-traced"
	traced["OTEL_TRACES_SAMPLER_ARG"] = "1" // as `up` runs it: every admitted request
	off, err := r.startAPIEnv(ctx, "api-untraced", plain)
	if err != nil {
		return err
	}
	defer off.Stop()
	on, err := r.startAPIEnv(ctx, "api-traced", traced)
	if err != nil {
		return err
	}
	defer on.Stop()
	c, url, toks, err := r.soldOutSale(ctx, off, "tracing", conns)
	if err != nil {
		return err
	}
	onURL := strings.Replace(url, off.URL, on.URL, 1)
	// The traced API learns the sale is sold out from its first answer.
	ClosedLoop(ctx, "warm-up", conns, time.Second, 0, reserveOp(c, onURL, toks))
	time.Sleep(6 * time.Second) // the batcher's 5 s flush of the warm-up's spans
	exportsBefore := sink.requests.Load()

	run := func(k int, traced bool, what string) Result {
		suffix := fmt.Sprintf(", round %d", k+1)
		api, target, label := off, url, "untraced "
		if traced {
			api, target, label = on, onURL, "traced "
		}
		if what == "healthz" {
			return ClosedLoop(ctx, label+"GET /healthz"+suffix, conns, r.o.Dur, 0, func(ctx context.Context, _ int64) (int, error) {
				return c.do(ctx, "GET", api.URL+"/healthz", "", nil)
			})
		}
		res := ClosedLoop(ctx, label+"sold-out reserve"+suffix, conns, r.o.Dur, 0, reserveOp(c, target, toks))
		if n := res.Count(http.StatusAccepted); n > 0 {
			r.violation("scenario 11: %d reservations accepted on a sold-out sale", n)
		}
		return res
	}
	runs, rounds := abRounds(soldOutRounds, []string{"sold-out", "healthz"}, run)
	soldOut, health := rounds["sold-out"], rounds["healthz"]
	time.Sleep(6 * time.Second)
	exports := sink.requests.Load() - exportsBefore
	mid, midHealth := medianRound(soldOut), medianRound(health)
	r.add(Scenario{
		ID: "11 tracing", Title: "Tracing on vs off: the sold-out path and GET /healthz, two APIs side by side, 64 connections",
		Runs: runs,
		Figures: []Figure{
			{Name: "sold-out traced req/s", Value: mid.test.RPS, Unit: "req/s"},
			{Name: "sold-out traced / untraced", Value: mid.ratio(), Unit: "×", Target: "≥ 0.8"},
			{Name: "healthz traced / untraced", Value: midHealth.ratio(), Unit: "×"},
			{Name: "OTLP exports during the timed runs", Value: float64(exports), Unit: "requests", Target: "0"},
		},
		Notes: []string{fmt.Sprintf("%d rounds; in each, the sold-out path then GET /healthz on both APIs, the traced one first in the even rounds; the traced API exports over OTLP/HTTP to a sink in the bench process sampling every trace, as `up` does (parent-based, ratio 1); figures are the median round's", soldOutRounds)},
	})
	if exports > 0 {
		r.violation("scenario 11: the traced API exported %d batches of spans while answering only refusals and probes", exports)
	}
	return nil
}

// abRounds runs, in each of n rounds and for each of whats, the untraced
// and the traced side (the traced one first in the even rounds), and
// returns every run and each what's rounds (base: untraced).
func abRounds(n int, whats []string, run func(round int, traced bool, what string) Result) ([]Result, map[string][]abRound) {
	var runs []Result
	rounds := map[string][]abRound{}
	for k := range n {
		first := k%2 == 1 // the traced API first in the even rounds
		for _, what := range whats {
			a := run(k, first, what)
			b := run(k, !first, what)
			runs = append(runs, a, b)
			if first {
				a, b = b, a
			}
			rounds[what] = append(rounds[what], abRound{base: a, test: b})
		}
	}
	return runs, rounds
}

// otlpSink is an OTLP/HTTP collector that accepts and counts exports.
type otlpSink struct {
	url      string
	srv      *http.Server
	requests atomic.Int64
}

func startOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("otlp sink: %w", err)
	}
	s := &otlpSink{url: "http://" + ln.Addr().String()}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.requests.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *otlpSink) close() { _ = s.srv.Close() }
