package faults

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// replicaMaxLag is the scenario's MYSQL_READ_MAX_LAG: the replica stays
// within it through the buying, so every read that may lag is asked of a
// replica that lacks what the buyers just got; it passes it afterwards.
const replicaMaxLag = 20 * time.Second

// TestReplicaLagNeverShowsNotFound: the API and the worker read what may
// lag from a replica whose SQL thread is stopped once the sale is warm, so
// it lacks every reservation made after. Buyers read their reservation and
// their lists right after each 202: while Redis owns the sale (the list
// across sales reads the database), then with Redis frozen and the sale on
// the database path, where the status reads reach the database too; then,
// the replica past its bound, all of them again. No answer is a 404 or
// lacks the reservation; the API's metrics show the primary answering
// after the replica, then alone; the fault checker finds every invariant
// holding, and the API's reconciliation, the replica still stopped, is
// consistent and says it read the primary.
func TestReplicaLagNeverShowsNotFound(t *testing.T) {
	pair := testenv.MustReplicaPair(t)
	primary := pair.PrimaryDSN(testenv.ReplicaDatabase)
	mustIsolatedSaleIDs(t, primary)
	rsrv, raddr, _ := MustOwnRedis(t)
	reads := map[string]string{"MYSQL_READ_DSN": pair.ReplicaDSN(testenv.ReplicaDatabase), "MYSQL_READ_MAX_LAG": replicaMaxLag.String()}
	s := MustStack(t, stackOpts{redisAddr: raddr, mysqlDSN: primary, workerEnv: reads, apiEnv: merge(reads, map[string]string{
		"SECKILL_REDIS_TIMEOUT": "250ms", "SECKILL_FALLBACK_RPS": "200", "SECKILL_PER_ADDR_RPS": "100000", "SECKILL_PER_ADDR_BURST": "100000",
		"SECKILL_READ_RPS": "100000", "SECKILL_READ_BURST": "100000",
	})})
	s.openWindows = true
	const stock = 60
	s.MustSale(stock, 600)
	waitStockSeen(t, s)
	lagURL := s.api.URL + "/metrics"
	require.Eventually(t, func() bool {
		lag, ok := scrapeSeries(lagURL, "seckill_mysql_replica_lag_seconds")
		return ok && lag >= 0 && lag < 2
	}, 30*time.Second, 100*time.Millisecond, "the API finds the replica caught up")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	require.NoError(t, pair.StopSQLThread(ctx))
	t.Cleanup(func() { assert.NoError(t, pair.StartSQLThread(context.Background())) })

	b := &replicaBuyers{s: s, got: map[int64]string{}}
	b.buy(t, 15, "redis")
	rsrv.Freeze(t)
	thawRedis := sync.OnceFunc(func() { rsrv.Thaw(t) })
	t.Cleanup(thawRedis)
	b.buy(t, 15, "database") // their 503s open the breakers: the sale moves to the database path
	var dbPath int
	require.NoError(t, s.st.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM reservations WHERE sale_id = ? AND path = ?",
		s.saleID, string(domain.PathDatabase)).Scan(&dbPath))
	require.Positive(t, dbPath, "the database path sold while Redis was frozen")
	thawRedis()
	waitBackOnRedis(t, s)
	afterReplica, _ := scrapeSeries(lagURL, `seckill_mysql_lagging_reads_total{from="primary_after_replica"}`)
	assert.Positive(t, afterReplica, "the primary answered what the lagging replica lacked")

	require.Eventually(t, func() bool {
		lag, _ := scrapeSeries(lagURL, "seckill_mysql_replica_lag_seconds")
		return lag > replicaMaxLag.Seconds()
	}, 2*replicaMaxLag, 200*time.Millisecond, "the replica falls behind its bound")
	before, _ := scrapeSeries(lagURL, `seckill_mysql_lagging_reads_total{from="primary"}`)
	for user, tok := range b.got {
		b.read(t, user, tok, "past the bound")
	}
	after, _ := scrapeSeries(lagURL, `seckill_mysql_lagging_reads_total{from="primary"}`)
	assert.Greater(t, after, before, "past its bound the replica is not read")
	assert.Empty(t, b.failures, "every read right after a 202 found the reservation")
	require.GreaterOrEqual(t, len(b.got), 20, "most buyers got a 202")

	s.checkIdle("replica SQL thread stopped, redis SIGSTOP", func(r *Row) {
		r.Given202 = len(b.got)
	})
	// The API's own reconciliation, its replica still stopped.
	code, body := mustCall(t, "GET", fmt.Sprintf("%s/admin/v1/sales/%d/reconciliation", s.api.URL, s.saleID), -1, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	assert.Equal(t, true, body["consistent"], "%v", body)
	assert.Equal(t, map[string]any{domain.ReadsSnapshots: "primary", domain.ReadsRereads: "primary"}, body["read_from"])
	t.Logf("%d buyers got a 202 and found it at once; the primary answered %v reads the replica lacked", len(b.got), afterReplica)
}

// replicaBuyers buy one unit each and read it back at once, recording
// every read that did not find it.
type replicaBuyers struct {
	s        *stack
	mu       sync.Mutex
	got      map[int64]string
	failures []string
}

// buy has n fresh users buy concurrently, each sending its request again
// on a 503, a 429 or a transport error, and reading its reservation back
// right after its 202.
func (b *replicaBuyers) buy(t *testing.T, n int, phase string) {
	var wg sync.WaitGroup
	for range n {
		user := b.s.nextUser()
		wg.Go(func() {
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				code, body, err := b.s.reserve(user, fmt.Sprintf("replica-%d", user))
				if err != nil || code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				if code == http.StatusAccepted {
					tok := body["token"].(string)
					b.read(t, user, tok, phase)
					b.mu.Lock()
					b.got[user] = tok
					b.mu.Unlock()
				}
				return
			}
		})
	}
	wg.Wait()
}

// read reads the user's reservation, their list of the sale and their
// list across sales, each of which must hold it.
func (b *replicaBuyers) read(t *testing.T, user int64, tok, phase string) {
	s := b.s
	fail := func(format string, args ...any) {
		b.mu.Lock()
		b.failures = append(b.failures, phase+": "+fmt.Sprintf(format, args...))
		b.mu.Unlock()
	}
	code, body, err := call(t, "GET", s.api.URL+"/api/v1/reservations/"+tok, user, nil)
	if err != nil || code != http.StatusOK {
		fail("GET reservation %s: %d %v %v", tok, code, body, err)
	}
	for _, q := range []string{"", fmt.Sprintf("?sale_id=%d", s.saleID)} {
		code, body, err := call(t, "GET", s.api.URL+"/api/v1/me/reservations"+q, user, nil)
		if err != nil || code != http.StatusOK {
			fail("GET me/reservations%s of %d: %d %v %v", q, user, code, body, err)
			continue
		}
		if !listsToken(body, tok) {
			fail("GET me/reservations%s of %d lacks %s: %v", q, user, tok, body)
		}
	}
}

func listsToken(body map[string]any, tok string) bool {
	list, _ := body["reservations"].([]any)
	for _, r := range list {
		if m, ok := r.(map[string]any); ok && m["token"] == tok {
			return true
		}
	}
	return false
}

// scrapeSeries is the value of one series (its name and labels as
// exposed) at url; ok is false when it is not there.
func scrapeSeries(url, series string) (float64, bool) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}
