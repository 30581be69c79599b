package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// sessionSelects is MariaDB's Com_select of the pool's one session and that
// session's id (SHOW statements are not counted as SELECTs).
func sessionSelects(t *testing.T, h *harness) (thread, selects int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var name string
	require.NoError(t, h.st.DB.QueryRowContext(ctx, "SHOW SESSION VARIABLES LIKE 'pseudo_thread_id'").Scan(&name, &thread))
	require.NoError(t, h.st.DB.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_select'").Scan(&name, &selects))
	return thread, selects
}

// countSelects runs load and answers the SELECTs the API's one database
// session ran meanwhile, less the 1 s refresher's. A query that a loaded
// machine made time out closes the session (the driver drops a connection
// whose query was cancelled), and its count with it, so a run whose
// session changed runs again, three times at most.
func countSelects(t *testing.T, h *harness, load func()) int64 {
	t.Helper()
	for attempt := 1; ; attempt++ {
		thread, before := sessionSelects(t, h)
		refreshBefore := h.services.Cache.RefreshQueries()
		load()
		after, selects := sessionSelects(t, h)
		refresh := h.services.Cache.RefreshQueries() - refreshBefore
		if after == thread {
			return selects - before - refresh
		}
		require.Less(t, attempt, 3, "the database session changed in every run: the count would be wrong")
		t.Logf("the database session changed (%d, then %d): measuring again", thread, after)
	}
}

// TestAnonymousReadsAreNotADatabaseAmplifier: the sale view comes from the
// sale cache, which knows every sale id, and the storefront's page is
// static, so 2,000 GETs over 1,000 unknown ids (and the landing page) run
// at most 10 SELECTs, as MariaDB counts them (Com_select of the API's one
// database session).
func TestAnonymousReadsAreNotADatabaseAmplifier(t *testing.T) {
	h := MustHarness(t)
	// One session: everything the API asks the database is counted on it.
	h.st.DB.SetMaxOpenConns(1)
	h.st.DB.SetMaxIdleConns(1)
	h.st.DB.SetConnMaxLifetime(0)
	h.st.DB.SetConnMaxIdleTime(0)
	sale := testenv.MustSale(t, h.st, 1)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	require.Eventually(t, func() bool { // a refresh ran since the sale exists
		return h.services.Cache.Cached(sale.ID) != nil
	}, 5*time.Second, 50*time.Millisecond)

	var bad atomic.Int64
	var took time.Duration
	selects := countSelects(t, h, func() {
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= 2200 {
						return
					}
					path, want := "/api/v1/sales/"+strconv.FormatInt(sale.ID+1_000_000_000+i%1000, 10), 404
					if i >= 2000 {
						path, want = "/", 200
					}
					resp, err := client.Get(h.base + path)
					if err != nil || resp.StatusCode != want {
						bad.Add(1)
					}
					if err == nil {
						resp.Body.Close()
					}
				}
			})
		}
		wg.Wait()
		took = time.Since(start)
	})
	require.Zero(t, bad.Load(), "unexpected answers")
	// The once-a-second refresher runs whatever the traffic, and so do the
	// API's other periodic reads, over as long as the requests took (on a
	// loaded host, seconds): what the requests cost is the rest.
	idle := countSelects(t, h, func() { time.Sleep(took) })
	t.Logf("2,000 unknown-id GETs and 200 storefront GETs in %s: %d SELECTs besides the 1 s refresher's (%d idle over as long)", took.Round(time.Millisecond), selects, idle)
	require.LessOrEqual(t, selects, 10+idle)
}

// TestReadRoutesAreRateLimited: read routes have buckets per user and per
// address; health probes and /metrics have none.
func TestReadRoutesAreRateLimited(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) {
		c.TrustedAddrs = nil
		c.ReadRPS, c.ReadBurst = 0.01, 5
		c.ReadPerUserRPS, c.ReadPerUserBurst = 0.01, 2
	})
	sale := testenv.MustSale(t, h.st, 1)
	salePath := "/api/v1/sales/" + strconv.FormatInt(sale.ID, 10)
	a := h.MustToken(testenv.UniqueUser(), "")
	for i, want := range []int{200, 200, 429} { // user a's bucket; the address keeps 3 tokens
		r := h.do("GET", "/api/v1/me/reservations", a, "")
		require.Equal(t, want, r.Status, "user read %d: %s", i, r.Body)
	}
	for i, want := range []int{200, 200, 200, 429} {
		r := h.do("GET", salePath, "", "")
		require.Equal(t, want, r.Status, "anonymous read %d: %s", i, r.Body)
		if want == 429 {
			require.Equal(t, "rate_limited", r.errCode(t))
			require.NotEmpty(t, r.Header.Get("Retry-After"))
		}
	}
	r := h.do("GET", "/api/v1/me/reservations", h.MustToken(testenv.UniqueUser(), ""), "")
	require.Equal(t, 429, r.Status, "another user from the same address")
	require.Equal(t, 429, h.do("GET", "/", "", "").Status)
	for range 20 {
		require.Equal(t, 200, h.do("GET", "/healthz", "", "").Status)
		require.Equal(t, 200, h.do("GET", "/metrics", "", "").Status)
	}
	require.Equal(t, 200, h.do("GET", "/readyz", "", "").Status)
}
