package api

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// TestReplayOfARetiredReservation: once an ended reservation's records
// moved out of Redis (redisgateway.Client.Retire), its request still replays to its
// token (the database answers), on a sale with stock as on a sold-out one
// (whose in-process mark does not know it), and the user's new request
// reserves or finds the sale sold out as anyone's would.
func TestReplayOfARetiredReservation(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc := redisgateway.NewClient(h.rdb)
	keys := redisgateway.SaleKeys(sale.ID)
	churner, other := testenv.UniqueUser(), testenv.UniqueUser()
	churnerJWT, otherJWT := h.MustToken(churner, "user"), h.MustToken(other, "user")

	var ended []redisgateway.RetiredRecord
	for _, u := range []struct {
		id  int64
		jwt string
	}{{churner, churnerJWT}, {other, otherJWT}} {
		r := h.reserve(sale.ID, u.jwt, "first-0001")
		require.Equal(t, 202, r.Status, string(r.Body))
		tok := r.json(t)["token"].(string)
		c := h.do("POST", "/api/v1/reservations/"+tok+"/cancel", u.jwt, "")
		require.Equal(t, 200, c.Status, string(c.Body))
		require.Equal(t, string(domain.StatusCancelled), c.json(t)["status"])
		ended = append(ended, redisgateway.RetiredRecord{Token: tok, UserID: u.id, RequestID: "first-0001"})
	}
	require.NoError(t, h.rdb.XTrimMaxLen(ctx, keys.Inbox, 0).Err(), "the relay trimmed their entries")
	before := time.Now().Add(time.Second)
	n, err := rc.Retire(ctx, sale.ID, before, ended, nil)
	require.NoError(t, err)
	require.Equal(t, 2, n)

	replay := h.reserve(sale.ID, churnerJWT, "first-0001")
	require.Equal(t, 202, replay.Status, string(replay.Body))
	require.Equal(t, ended[0].Token, replay.json(t)["token"], "the ended reservation's token again")
	require.EqualValues(t, 2, h.redisInt(keys.Stock), "a replay takes nothing")

	again := h.reserve(sale.ID, churnerJWT, "second-001")
	require.Equal(t, 202, again.Status, string(again.Body))
	require.NotEqual(t, ended[0].Token, again.json(t)["token"])
	require.Equal(t, 202, h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), "user"), "buyer-0001").Status)
	require.Equal(t, 410, h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), "user"), "late-00001").Status)
	e, err := h.services.Cache.Get(ctx, sale.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.Marked() }, 5*time.Second, 10*time.Millisecond, "the sold-out mark loads")

	old := h.reserve(sale.ID, otherJWT, "first-0001")
	require.Equal(t, 202, old.Status, "a sold-out sale still replays a retired request: %s", old.Body)
	require.Equal(t, ended[1].Token, old.json(t)["token"])
	fresh := h.reserve(sale.ID, otherJWT, "second-001")
	require.Equal(t, 410, fresh.Status, string(fresh.Body))
	require.Equal(t, domain.ESoldOut, fresh.errCode(t))
}
