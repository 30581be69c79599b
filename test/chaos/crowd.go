package chaos

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/client"
)

// A crowd is a flash sale's moment: many fresh users reserving at once, at
// a sale's opening and in the second before a fault that hits Redis, one
// API instance or the database's writer, so faults land in bursts (the steady clients alone send
// about 50 requests/s).
const (
	crowdUsers   = 1500 // users per crowd, one reservation each
	crowdSenders = 64   // requests in flight
	crowdLead    = 300 * time.Millisecond
	crowdMax     = 6 // crowds per run, the opening's included
)

// CrowdTimes are the crowds of a plan, from the start of the workload: the
// opening, and crowdLead before each fault on Redis, on one API or on the
// database's writer.
func CrowdTimes(plan []Planned) []time.Duration {
	out := []time.Duration{0}
	for _, p := range plan {
		if len(out) == crowdMax {
			break
		}
		switch p.Class {
		case FRedisKill, FRedisFreeze, FRedisAOFLoss, FRedisFailover, FLinkCut, FLinkSlow, FAPIKill, FAPIFreeze,
			FDBFailoverKill, FDBFailoverCut:
			out = append(out, max(p.At-crowdLead, 0))
		}
	}
	return out
}

var crowdSeq atomic.Int64

// crowd sends one burst: crowdUsers fresh users reserve once each on the
// sales in turn, crowdSenders at a time, replaying a 503 or a lost answer
// with the same request_id (as the contract asks). A 202 is left to expire.
func (w *Workload) crowd(ctx context.Context, n int) {
	id := crowdSeq.Add(1)
	users := make(chan int, crowdUsers)
	for i := range crowdUsers {
		users <- i
	}
	close(users)
	var wg sync.WaitGroup
	for range crowdSenders {
		wg.Go(func() {
			for i := range users {
				if ctx.Err() != nil {
					return
				}
				s := w.Sales[i%len(w.Sales)]
				u := 900_000_000 + id*10_000 + int64(i)
				reqID := fmt.Sprintf("crowd-%d-%05d", n, i)
				path := client.ReservationsPath(s.ID)
				for attempt := 0; attempt < 5 && ctx.Err() == nil; attempt++ {
					a, _ := w.C.do(ctx, i+attempt, http.MethodPost, path, u, map[string]any{"request_id": reqID},
						Event{Op: OpReserve, Sale: s.ID, User: u, RequestID: reqID})
					if !unknown(a) {
						break
					}
					sleep(ctx, time.Duration(200+100*attempt)*time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
}
