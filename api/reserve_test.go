package api

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// TestReserveConcurrentSellOut: 2,000 concurrent requests of 600 users with
// repeats and replays against 50 units.
func TestReserveConcurrentSellOut(t *testing.T) {
	// Correctness, not latency: a 2-core CI box must not turn slow script
	// answers into 503s (whose outcome is unknown by contract).
	h := MustHarness(t, func(c *config.Config) { c.RedisTimeout = 10 * time.Second })
	const stock, users, requests = 50, 600, 2000
	sale := h.MustWarmSale(stock)
	keys := redisgateway.SaleKeys(sale.ID)

	ids := make([]int64, users)
	jwts := make([]string, users)
	for i := range ids {
		ids[i] = testenv.UniqueUser()
		jwts[i] = h.MustToken(ids[i], "")
	}
	results := crowdReserve(t, h, sale.ID, ids, jwts, requests)
	tokens, userTokens, byRequest := tallySellOut(t, results)
	require.Len(t, tokens, stock, "exactly the stock in distinct tokens")
	for u, toks := range userTokens {
		require.Len(t, toks, 1, "user %d holds one unit", u)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := h.rdb.SCard(ctx, keys.Buyers).Result()
	require.NoError(t, err)
	require.EqualValues(t, stock, n)
	require.EqualValues(t, stock, h.xlen(keys.Inbox))
	require.EqualValues(t, 0, h.redisInt(keys.Stock))

	checkAfterSellOut(t, h, sale.ID, jwts, tokens, byRequest)
	require.EqualValues(t, stock, h.xlen(keys.Inbox), "nothing more reserved")
	// The sale view shows it sold out.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		v := h.do("GET", "/api/v1/sales/"+strconv.FormatInt(sale.ID, 10), "", "").json(t)
		assert.Equal(c, "sold_out", v["state"])
		assert.EqualValues(c, 0, v["stock_left"])
	}, 5*time.Second, 100*time.Millisecond)
}

// sellOutResult is one request of the crowd and its answer.
type sellOutResult struct {
	user      int
	requestID string
	status    int
	token     string
}

// crowdReserve sends requests reservations at once, user i%len(ids) each
// (every third a replay of the user's first request_id), and checks each
// answer's shape.
func crowdReserve(t *testing.T, h *harness, saleID int64, ids []int64, jwts []string, requests int) []sellOutResult {
	users := len(ids)
	results := make([]sellOutResult, requests)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			u := i % users
			// Every third request of a user repeats its first request_id.
			rid := fmt.Sprintf("req-%d-%d", ids[u], (i/users)%2)
			r := h.reserve(saleID, jwts[u], rid)
			res := sellOutResult{user: u, requestID: rid, status: r.Status}
			if r.Status == 202 {
				m := r.json(t)
				res.token, _ = m["token"].(string)
				require.Equal(t, "QUEUED", m["status"])
				require.Equal(t, rid, m["request_id"])
			} else {
				code := r.errCode(t)
				require.Contains(t, []string{"already_purchased", "sold_out", "rate_limited"}, code, "status %d", r.Status)
				if r.Status == 429 {
					require.NotEmpty(t, r.Header.Get("Retry-After"))
				}
			}
			results[i] = res
		}()
	}
	close(start)
	wg.Wait()
	return results
}

// tallySellOut: every 202 has a token, a replay the same one; it returns
// the tokens' users, the users' tokens and the requests' tokens.
func tallySellOut(t *testing.T, results []sellOutResult) (map[string]int, map[int]map[string]bool, map[string]string) {
	tokens := map[string]int{}              // token -> user
	userTokens := map[int]map[string]bool{} // user -> tokens
	byRequest := map[string]string{}        // request id -> token
	for _, r := range results {
		switch r.status {
		case 202:
			require.NotEmpty(t, r.token)
			if prev, ok := byRequest[r.requestID]; ok {
				require.Equal(t, prev, r.token, "a replay returns the same token")
			}
			byRequest[r.requestID] = r.token
			tokens[r.token] = r.user
			if userTokens[r.user] == nil {
				userTokens[r.user] = map[string]bool{}
			}
			userTokens[r.user][r.token] = true
		case 409, 410, 429:
		default:
			t.Fatalf("unexpected status %d", r.status)
		}
	}
	return tokens, userTokens, byRequest
}

// checkAfterSellOut: after sell-out a replay still gets its token, a
// holder with a new request_id gets 409, anyone else 410 (the mark
// answers; Redis agrees).
func checkAfterSellOut(t *testing.T, h *harness, saleID int64, jwts []string, tokens map[string]int, byRequest map[string]string) {
	var winner int
	var winnerRID, winnerToken string
	for rid, tok := range byRequest {
		winnerRID, winnerToken, winner = rid, tok, tokens[tok]
		break
	}
	for range 3 {
		r := h.reserve(saleID, jwts[winner], winnerRID)
		require.Equal(t, 202, r.Status, string(r.Body))
		require.Equal(t, winnerToken, r.json(t)["token"])
	}
	require.Equal(t, 409, h.reserve(saleID, jwts[winner], "another-request-id").Status)
	newcomer := h.MustToken(testenv.UniqueUser(), "")
	r := h.reserve(saleID, newcomer, "newcomer-request")
	require.Equal(t, 410, r.Status)
	require.Equal(t, "sold_out", r.errCode(t))
}

// TestReserveMissingStockKeyIsUnavailable: a sale whose stock key is gone
// answers 503, never 410.
func TestReserveMissingStockKeyIsUnavailable(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(5)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, h.rdb.Del(ctx, redisgateway.SaleKeys(sale.ID).Stock).Err())
	r := h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), ""), "request-0001")
	require.Equal(t, 503, r.Status, string(r.Body))
	require.Equal(t, "unavailable", r.errCode(t))
	require.Equal(t, "1", r.Header.Get("Retry-After"))
}

// TestReserveNotWarmed: a sale never loaded into Redis answers 503.
func TestReserveNotWarmed(t *testing.T) {
	h := MustHarness(t)
	sale := testenv.MustSale(t, h.st, 5)
	r := h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), ""), "request-0001")
	require.Equal(t, 503, r.Status, string(r.Body))
	require.NotEmpty(t, r.Header.Get("Retry-After"))
}

// TestSoldOutMarkDropsOnRelease: after a release the mark goes and the unit
// sells again.
func TestSoldOutMarkDropsOnRelease(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(1)
	u1 := testenv.UniqueUser()
	r := h.reserve(sale.ID, h.MustToken(u1, ""), "first-request")
	require.Equal(t, 202, r.Status)
	tok := r.json(t)["token"].(string)
	u2 := h.MustToken(testenv.UniqueUser(), "")
	require.Equal(t, 410, h.reserve(sale.ID, u2, "second-request").Status)
	// Wait for the mark to be loaded, then release the hold behind the API's back.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 410, h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), ""), "probe-request").Status)
	}, 5*time.Second, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The hold ends in the database first (its unit back in its bucket),
	// as a workflow's release does.
	_, err := h.st.EndQueued(ctx, tok, domain.StatusCancelled, "test")
	require.NoError(t, err)
	ok, err := h.scripts.Release(ctx, h.rdb, sale.ID, u1, tok, true, false)
	require.NoError(t, err)
	require.True(t, ok)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 202, h.reserve(sale.ID, u2, "second-request").Status)
	}, 5*time.Second, 100*time.Millisecond)
}

// TestBlacklist: a blacklisted user gets 403 blacklisted at once; removal restores.
func TestBlacklist(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(5)
	u := testenv.UniqueUser()
	tok := h.MustToken(u, "")
	require.Equal(t, 204, h.do("PUT", "/admin/v1/blacklist/"+strconv.FormatInt(u, 10), h.admin, "").Status)
	r := h.reserve(sale.ID, tok, "request-0001")
	require.Equal(t, 403, r.Status)
	require.Equal(t, "blacklisted", r.errCode(t))
	require.Equal(t, 204, h.do("DELETE", "/admin/v1/blacklist/"+strconv.FormatInt(u, 10), h.admin, "").Status)
	require.Equal(t, 202, h.reserve(sale.ID, tok, "request-0001").Status)
}
