package api

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// The waitlist as a client meets it: join (the place kept on a second
// join), read, leave; a user holding a unit gets 409; once the unit comes
// back (its holder cancels) it goes to the longest-waiting user as a
// reservation they find in me/reservations, not to an open reservation.
func TestWaitlistHandsAReturnedUnitToTheLongestWaiting(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(1)
	path := "/api/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/waitlist"
	tok := func(u int64) string { return h.MustToken(u, authtoken.RoleUser) }
	holder, first, second, late := testenv.UniqueUser(), testenv.UniqueUser(), testenv.UniqueUser(), testenv.UniqueUser()

	r := h.reserve(sale.ID, tok(holder), "holder-req")
	require.Equal(t, 202, r.Status, string(r.Body))
	held := r.json(t)["token"].(string)
	require.Equal(t, 410, h.reserve(sale.ID, tok(late), "late-req-1").Status)

	for i, u := range []int64{first, second, first} {
		r := h.do("POST", path, tok(u), "")
		require.Equal(t, 200, r.Status, string(r.Body))
		require.Equal(t, float64([]int{1, 2, 1}[i]), r.json(t)["position"], "joining again keeps the place")
		require.Equal(t, float64(sale.ID), r.json(t)["sale_id"])
	}
	r = h.do("POST", path, tok(holder), "")
	require.Equal(t, 409, r.Status, string(r.Body))
	require.Equal(t, domain.EAlreadyPurchased, r.errCode(t))
	r = h.do("GET", path, tok(second), "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, float64(2), r.json(t)["position"])
	require.Equal(t, 404, h.do("GET", path, tok(late), "").Status, "not waiting")
	require.Equal(t, 404, h.do("POST", "/api/v1/sales/999999999999/waitlist", tok(late), "").Status)

	joined, err := redisgateway.NewClient(h.rdb).WaitlistJoined(t.Context(), sale.ID, first)
	require.NoError(t, err)
	r = h.do("POST", "/api/v1/reservations/"+held+"/cancel", tok(holder), "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r := h.do("GET", "/api/v1/me/reservations?sale_id="+strconv.FormatInt(sale.ID, 10), tok(first), "")
		if assert.Equal(c, 200, r.Status) {
			list, _ := r.json(t)["reservations"].([]any)
			assert.Len(c, list, 1, "the unit is the first waiter's: %s", r.Body)
		}
	}, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, 404, h.do("GET", path, tok(first), "").Status, "served: off the waitlist")
	// The hand-over records the hold in MySQL right after Redis granted
	// it, so the reader may see it in Redis first.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res, err := h.st.FindReservation(t.Context(), sale.ID, first, domain.WaitlistRequestID(joined))
		if assert.NoError(c, err, "recorded in MySQL like a 202's hold") {
			assert.Equal(c, domain.StatusQueued, res.Status)
		}
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, 410, h.reserve(sale.ID, tok(late), "late-req-2").Status, "never on open sale")

	require.Equal(t, 204, h.do("DELETE", path, tok(second), "").Status)
	require.Equal(t, 404, h.do("GET", path, tok(second), "").Status)
	require.Equal(t, 204, h.do("DELETE", path, tok(second), "").Status, "leaving twice is fine")
	r = h.do("GET", "/api/v1/sales/"+strconv.FormatInt(sale.ID, 10), "", "")
	require.Equal(t, 200, r.Status)
	require.Contains(t, r.json(t), "waitlist_length")
}

// An ended sale takes no one on its waitlist.
func TestWaitlistOfAnEndedSale(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(1, func(s *domain.Sale) {
		s.StartsAt = time.Now().Add(-2 * time.Hour)
		s.EndsAt = time.Now().Add(-time.Hour)
	})
	r := h.do("POST", "/api/v1/sales/"+strconv.FormatInt(sale.ID, 10)+"/waitlist", h.MustToken(testenv.UniqueUser(), authtoken.RoleUser), "")
	require.Equal(t, 403, r.Status, string(r.Body))
	require.Equal(t, domain.ESaleEnded, r.errCode(t))
}

// A waiter the hand-over passes over (blacklisted since they joined) is
// off the waitlist in Redis and in the database alike: a later rebuild of
// the sale, which puts back every join the database keeps, does not bring
// them back; the unit goes to the next waiter.
func TestWaitlistForgetsAWaiterTheHandOverPassesOver(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(1)
	path := "/api/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/waitlist"
	tok := func(u int64) string { return h.MustToken(u, authtoken.RoleUser) }
	holder, banned, next := testenv.UniqueUser(), testenv.UniqueUser(), testenv.UniqueUser()
	r := h.reserve(sale.ID, tok(holder), "holder-req")
	require.Equal(t, 202, r.Status, string(r.Body))
	held := r.json(t)["token"].(string)
	for _, u := range []int64{banned, next} {
		r := h.do("POST", path, tok(u), "")
		require.Equal(t, 200, r.Status, string(r.Body))
	}
	require.Equal(t, 204, h.do("PUT", "/admin/v1/blacklist/"+strconv.FormatInt(banned, 10), h.admin, "").Status)

	r = h.do("POST", "/api/v1/reservations/"+held+"/cancel", tok(holder), "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r := h.do("GET", "/api/v1/me/reservations?sale_id="+strconv.FormatInt(sale.ID, 10), tok(next), "")
		if assert.Equal(c, 200, r.Status) {
			list, _ := r.json(t)["reservations"].([]any)
			assert.Len(c, list, 1, "the unit is the next waiter's: %s", r.Body)
		}
	}, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, 404, h.do("GET", path, tok(banned), "").Status, "passed over: off the waitlist")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var n int
		err := h.st.DB.NewRaw("SELECT COUNT(*) FROM waitlist_joins WHERE sale_id = ? AND user_id = ?", sale.ID, banned).Scan(t.Context(), &n)
		if assert.NoError(c, err) {
			assert.Zero(c, n, "the database forgot the passed-over join")
		}
	}, 5*time.Second, 20*time.Millisecond)
}

// A user whose join Redis lost (a restart, a failover) and who joins again
// before the worker's look at the new Redis puts it back keeps the place
// their first 200 promised: the database kept that join, so the second is
// answered at the first's place, ahead of those who joined after it.
func TestWaitlistJoinAgainAfterALostJoinKeepsThePlace(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(1)
	path := "/api/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/waitlist"
	tok := func(u int64) string { return h.MustToken(u, authtoken.RoleUser) }
	holder, early, later := testenv.UniqueUser(), testenv.UniqueUser(), testenv.UniqueUser()
	require.Equal(t, 202, h.reserve(sale.ID, tok(holder), "holder-req").Status)
	for _, u := range []int64{early, later} {
		r := h.do("POST", path, tok(u), "")
		require.Equal(t, 200, r.Status, string(r.Body))
	}
	rc := redisgateway.NewClient(h.rdb)
	first, err := rc.WaitlistJoined(t.Context(), sale.ID, early)
	require.NoError(t, err)

	require.NoError(t, h.rdb.ZRem(t.Context(), redisgateway.SaleKeys(sale.ID).Waitlist, strconv.FormatInt(early, 10)).Err())
	r := h.do("POST", path, tok(early), "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, float64(1), r.json(t)["position"], "the earlier place, ahead of the later join")
	got, err := rc.WaitlistJoined(t.Context(), sale.ID, early)
	require.NoError(t, err)
	require.Equal(t, first, got, "under the first join's number")
	joins, err := h.st.WaitingJoins(t.Context(), sale.ID)
	require.NoError(t, err)
	require.Len(t, joins, 2)
	require.Equal(t, first, joins[0].Joined, "the database keeps the first join")

	// A user who left and joins again starts at the back.
	require.Equal(t, 204, h.do("DELETE", path, tok(early), "").Status)
	r = h.do("POST", path, tok(early), "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, float64(2), r.json(t)["position"], "a leave gives the place up")
}
