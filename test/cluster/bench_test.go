package cluster_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/test/cluster"
)

// BenchmarkReservations measures reservations/s of a burst split over two
// APIs (two workers running) for 1 sale and for 8 sales at once, on the
// three-master Redis Cluster and, for comparison, on one standalone Redis
// with the same settings (AOF, fsync every second):
//
//	go test -run '^$' -bench Reservations -benchtime 1x ./cluster/
//
// Every request is a distinct user and the stock covers the burst, so each
// request runs the reserve script. It reports the figures; it asserts no
// speed. Orders expire after a short payment window, so the order
// workflows end soon after.
func BenchmarkReservations(b *testing.B) {
	stacks := []struct {
		name  string
		start func(testing.TB) (a, b string)
	}{
		// The single Redis runs first: the later stack shares the machine
		// with the earlier one's order workflows, which favours the first.
		{"single", func(tb testing.TB) (string, string) {
			x, y := mustStack(tb, map[string]string{"REDIS_ADDR": cluster.MustRedisServer(tb)})
			return x.URL, y.URL
		}},
		{"cluster", func(tb testing.TB) (string, string) {
			x, y := mustClusterStack(tb, nil)
			return x.URL, y.URL
		}},
	}
	for _, st := range stacks {
		b.Run("redis="+st.name, func(b *testing.B) {
			urlA, urlB := st.start(b)
			// A first, unmeasured burst opens the connection pools.
			warm := mustLiveSaleWindow(b, urlA, 300, 5)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			res, err := cluster.Burst{URLs: []string{urlA, urlB}, SaleIDs: []int64{warm}, Requests: 300, Concurrency: 64,
				UserBase: userBlock(300), JWTSecret: []byte(config.DevJWTSecret)}.Run(ctx)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("warm-up: %s", res)
			for _, sales := range []int{1, 8} {
				b.Run("sales="+strconv.Itoa(sales), func(b *testing.B) {
					benchBurst(b, []string{urlA, urlB}, sales)
				})
			}
		})
	}
}

func benchBurst(b *testing.B, urls []string, sales int) {
	const requests, concurrency = 4000, 64
	var rate float64
	for range b.N {
		b.StopTimer()
		ids := make([]int64, sales)
		for i := range ids {
			ids[i] = mustLiveSaleWindow(b, urls[0], requests/sales+1, 5)
		}
		burst := cluster.Burst{URLs: urls, SaleIDs: ids, Requests: requests, Concurrency: concurrency,
			UserBase: userBlock(requests), JWTSecret: []byte(config.DevJWTSecret)}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		b.StartTimer()
		res, err := burst.Run(ctx)
		b.StopTimer()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if res.Errors > 0 || res.Status[http.StatusAccepted] != requests {
			b.Fatalf("not every request reserved: %s (first error %v)", res, res.FirstErr)
		}
		b.Logf("%d sale(s): %s", sales, res)
		rate += res.Rate()
	}
	b.ReportMetric(rate/float64(b.N), "reservations/s")
}
