package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/store"
)

// mysql: scenario 4, the order transaction with 1 vs 16 stock buckets at
// 64 deducters, on loopback and through a 1 ms RTT proxy.
func (r *runner) mysql(ctx context.Context) error {
	const workers = 64
	proxy, err := netproxy.Start(mysqlAddr(r.o.MySQLDSN), 0)
	if err != nil {
		return err
	}
	defer proxy.Close()
	viaDSN, err := DSNVia(r.o.MySQLDSN, proxy.Addr())
	if err != nil {
		return err
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	via, err := store.Open(octx, viaDSN)
	cancel()
	if err != nil {
		return fmt.Errorf("open store through the proxy: %w", err)
	}
	defer via.Close()

	sc := Scenario{ID: "4 mysql", Title: "MySQL stock deduction (store.PlaceOrder), 64 concurrent deducters"}
	rates := map[string]float64{}
	const oneWay = 500 * time.Microsecond
	for _, c := range []struct {
		label   string
		st      *store.Store
		delay   time.Duration // the proxy's, each way
		buckets int
		orders  int
	}{
		{"loopback, 1 bucket", r.st, 0, 1, 3000},
		{"loopback, 16 buckets", r.st, 0, 16, 9000},
		// The proxy's own cost (a copy and two goroutine hand-offs per
		// chunk, on the same two cores) without its delay.
		{"proxy at 0 ms, 16 buckets", via, 0, 16, 9000},
		{"1 ms RTT, 1 bucket", via, oneWay, 1, 800},
		{"1 ms RTT, 16 buckets", via, oneWay, 16, 6000},
	} {
		proxy.SetDelay(c.delay)
		s, err := NewSale(ctx, r.st, r.saleTitle("deduct "+c.label), 1_000_000, c.buckets)
		if err != nil {
			return err
		}
		r.saleIDs = append(r.saleIDs, s.ID)
		first := r.nextUser
		r.nextUser += int64(c.orders)
		r.o.Logger.Info("recording reservations for the deduction run", "run", c.label, "n", c.orders)
		toks, err := RecordReservations(ctx, r.st, []byte(config.DevTokenKey), s.ID, first, c.orders, workers)
		if err != nil {
			return err
		}
		r.o.Logger.Info("deducting", "run", c.label)
		res, err := Deduct(ctx, c.st, c.label, toks, workers, 2*r.o.Dur)
		if err != nil {
			return fmt.Errorf("deduction %s: %w", c.label, err)
		}
		res.Status = map[string]int64{"placed": res.Requests}
		rates[c.label] = res.RPS
		sc.Runs = append(sc.Runs, res)
		sc.Figures = append(sc.Figures, Figure{Name: c.label, Value: res.RPS, Unit: "orders/s"})
	}
	sc.Figures[0].Published = pubSyncDB
	sc.Figures[3].Published = "127 orders/s (a published quick measurement)"
	sc.Figures[4].Published = "1,848 orders/s (a published quick measurement)"
	sc.Figures = append(sc.Figures,
		Figure{Name: "16 / 1 buckets, loopback", Value: ratio(rates["loopback, 16 buckets"], rates["loopback, 1 bucket"]), Unit: "×"},
		Figure{Name: "16 / 1 buckets, 1 ms RTT", Value: ratio(rates["1 ms RTT, 16 buckets"], rates["1 ms RTT, 1 bucket"]), Unit: "×"},
		Figure{Name: "16 buckets, 1 ms RTT / loopback", Value: ratio(rates["1 ms RTT, 16 buckets"], rates["loopback, 16 buckets"]), Unit: "×", Target: "≥ 0.9"},
		Figure{Name: "16 buckets, 1 ms RTT / proxy at 0 ms", Value: ratio(rates["1 ms RTT, 16 buckets"], rates["proxy at 0 ms, 16 buckets"]), Unit: "×"},
	)
	sc.Notes = []string{"reservations are recorded (QUEUED) before the clock starts; each run places a fixed pool of orders or stops after twice the run length; the proxy delays each chunk by 0.5 ms in each direction (Go, in internal/testkit/netproxy); `proxy at 0 ms` runs through the same proxy without the delay, so 1 ms RTT against it shows the round trips' cost without the proxy's own CPU on the shared cores"}
	r.add(sc)
	return nil
}

func mysqlAddr(dsn string) string {
	if cfg, err := parseDSN(dsn); err == nil {
		return cfg
	}
	return "127.0.0.1:3306"
}
