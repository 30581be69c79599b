package api

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// TestStatusReadsAreRateLimitedPerUser: polls and stream opens share the
// caller's read bucket (SECKILL_READ_PER_USER_*); the 429 carries the error body and
// Retry-After, and another user is unaffected.
func TestStatusReadsAreRateLimitedPerUser(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) { c.ReadPerUserRPS, c.ReadPerUserBurst = 0.5, 2 })
	sale := h.MustWarmSale(5)
	user := testenv.UniqueUser()
	jwt := h.MustToken(user, "")
	r := h.reserve(sale.ID, jwt, "status-limit-1")
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	token := r.json(t)["token"].(string)

	for range 2 {
		r = h.do("GET", "/api/v1/reservations/"+token, jwt, "")
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, "QUEUED", r.json(t)["status"])
	}
	r = h.do("GET", "/api/v1/reservations/"+token, jwt, "")
	require.Equal(t, http.StatusTooManyRequests, r.Status)
	require.Equal(t, "rate_limited", r.errCode(t))
	require.NotEmpty(t, r.Header.Get("Retry-After"))
	r = h.do("GET", "/api/v1/reservations/"+token+"/events", jwt, "")
	require.Equal(t, http.StatusTooManyRequests, r.Status)
	require.Equal(t, "rate_limited", r.errCode(t))

	other := h.MustToken(testenv.UniqueUser(), "")
	r = h.do("GET", "/api/v1/reservations/"+token, other, "")
	require.Equal(t, http.StatusNotFound, r.Status, "another user's token, own bucket")
}

// TestEventStreamFollowsTheStatusRecord: an instance's stream starts with
// the current view (QUEUED, id 1), pushes each status record the worker
// writes to Redis (here written directly, no order row exists: the stream
// and the poll read Redis, not the database), finds a record whose wake-up
// was lost by its periodic re-read, and ends after a terminal status.
func TestEventStreamFollowsTheStatusRecord(t *testing.T) {
	h := MustHarness(t)
	const reread = 4 * time.Second // streamReread is 30 s
	h.services.Hub.SetReread(reread)
	sale := h.MustWarmSale(5)
	user := testenv.UniqueUser()
	jwt := h.MustToken(user, "")
	r := h.reserve(sale.ID, jwt, "status-stream-1")
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	token := r.json(t)["token"].(string)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lines := openEventLines(t, ctx, h, token, jwt)
	wait := 3 * time.Second // under the re-read period: pub/sub woke the stream
	next := func() (string, string) { return nextStreamEvent(t, lines, wait) }
	id, data := next()
	require.Equal(t, "1", id)
	require.Contains(t, data, `"status":"QUEUED"`)

	payBy := time.Now().Add(10 * time.Minute).UTC().Truncate(time.Millisecond)
	_, err := h.scripts.WriteStatus(ctx, h.rdb, sale.ID, token, redisgateway.StatusRecord{Seq: 2, UserID: user, Status: "PENDING_PAYMENT", OrderNo: "o-stream", AmountCents: sale.PriceCents, PayBy: payBy})
	require.NoError(t, err)
	id, data = next()
	require.Equal(t, "2", id)
	require.Contains(t, data, `"status":"PENDING_PAYMENT"`)
	require.Contains(t, data, `"order_no":"o-stream"`)
	r = h.do("GET", "/api/v1/reservations/"+token, jwt, "")
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "PENDING_PAYMENT", r.json(t)["status"])
	require.Equal(t, payBy.Format(time.RFC3339Nano), r.json(t)["pay_by"])

	// A lost wake-up: the CANCELLED record lands without a message for
	// this token (written for another token, its value copied over), so
	// only the stream's periodic re-read can find it.
	const other = "status-stream-other"
	_, err = h.scripts.WriteStatus(ctx, h.rdb, sale.ID, other, redisgateway.StatusRecord{Seq: 3, UserID: user, Status: "CANCELLED", OrderNo: "o-stream", AmountCents: sale.PriceCents, PayBy: payBy})
	require.NoError(t, err)
	keys := redisgateway.SaleKeys(sale.ID)
	raw, err := h.rdb.HGet(ctx, keys.Status, other).Result()
	require.NoError(t, err)
	require.NoError(t, h.rdb.HSet(ctx, keys.Status, token, raw).Err())
	wait = reread + 2*time.Second
	id, data = next()
	require.Equal(t, "3", id)
	require.Contains(t, data, `"status":"CANCELLED"`)
	id, _ = next()
	require.Empty(t, id, "the stream ends after a terminal status")
}

// openEventLines opens the token's event stream and returns its lines.
func openEventLines(t *testing.T, ctx context.Context, h *harness, token, jwt string) <-chan string {
	req, err := http.NewRequestWithContext(ctx, "GET", h.base+"/api/v1/reservations/"+token+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+jwt)
	resp, err := h.http.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// nextStreamEvent returns the id and data of the next event ("" at the
// end), failing the test when none comes within wait.
func nextStreamEvent(t *testing.T, lines <-chan string, wait time.Duration) (string, string) {
	t.Helper()
	var id, data string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return "", ""
			}
			switch {
			case strings.HasPrefix(l, "id: "):
				id = l[4:]
			case strings.HasPrefix(l, "data: "):
				data = l[6:]
			case l == "" && data != "":
				return id, data
			}
		case <-time.After(wait):
			t.Fatal("no event in time")
		}
	}
}

// TestStatusReadsAskTheDatabaseInDatabaseMode: while the database path owns
// the sale, Redis's copy is stale (the workflow's Redis step leaves it
// alone), so a status record is not believed: the row decides.
func TestStatusReadsAskTheDatabaseInDatabaseMode(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(5)
	user := testenv.UniqueUser()
	jwt := h.MustToken(user, "")
	r := h.reserve(sale.ID, jwt, "status-dbmode-1")
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	token := r.json(t)["token"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	_, err := h.st.RecordReservation(ctx, domain.OrderInput{Token: token, SaleID: sale.ID, UserID: user, RequestID: "status-dbmode-1", Path: domain.PathRedis})
	require.NoError(t, err)
	_, err = h.scripts.WriteStatus(ctx, h.rdb, sale.ID, token, redisgateway.StatusRecord{Seq: 2, UserID: user, Status: "PENDING_PAYMENT", OrderNo: "o-stale", AmountCents: sale.PriceCents})
	require.NoError(t, err)
	_, err = h.st.EndQueued(ctx, token, domain.StatusCancelled, "user")
	require.NoError(t, err)
	r = h.do("GET", "/api/v1/reservations/"+token, jwt, "")
	require.Equal(t, "PENDING_PAYMENT", r.json(t)["status"], "in Redis mode the record answers")

	_, err = h.st.SwitchToDatabase(ctx, sale.ID, 0)
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r := h.do("GET", "/api/v1/reservations/"+token, jwt, "")
		assert.Equal(c, "CANCELLED", r.json(t)["status"])
	}, 5*time.Second, 100*time.Millisecond, "the sale cache learns the mode within a second")
}
