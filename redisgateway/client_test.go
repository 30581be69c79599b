package redisgateway_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// The encodings redisgateway writes are the ones it parses back.
func TestEncodingsRoundTrip(t *testing.T) {
	state, user, ok := redisgateway.TokenState(redisgateway.TokenValue(domain.TokenOrdered, 42))
	require.True(t, ok)
	require.Equal(t, domain.TokenOrdered, state)
	require.EqualValues(t, 42, user)
	require.Equal(t, "42:req:with:colons", redisgateway.RequestField(42, "req:with:colons"))

	d := redisgateway.RebuildData{}
	d.AddReservation("tok-1", domain.TokenHeld, 7, "req-7")
	require.Equal(t, map[string]string{"tok-1": "held:7"}, d.Tokens)
	require.Equal(t, map[string]string{"7:req-7": "tok-1"}, d.Requests)
}

// Malformed inbox entries say why; a good one carries every field.
func TestParseInboxEntry(t *testing.T) {
	e := redisgateway.ParseInboxEntry(redis.XMessage{ID: "1-0", Values: map[string]any{"token": "t", "user": "9", "request": "r", "tp": "00-x", "rid": "h"}})
	require.NoError(t, e.Malformed)
	require.Equal(t, redisgateway.InboxEntry{ID: "1-0", Token: "t", UserID: 9, RequestID: "r", TraceParent: "00-x", HTTPRequestID: "h"}, withoutValues(e))
	require.EqualError(t, redisgateway.ParseInboxEntry(redis.XMessage{Values: map[string]any{"user": "9"}}).Malformed, "no token")
	require.EqualError(t, redisgateway.ParseInboxEntry(redis.XMessage{Values: map[string]any{"token": "t", "user": "0"}}).Malformed, `bad user "0"`)
}

func withoutValues(e redisgateway.InboxEntry) redisgateway.InboxEntry {
	return redisgateway.InboxEntry{ID: e.ID, Token: e.Token, UserID: e.UserID, RequestID: e.RequestID, TraceParent: e.TraceParent, HTTPRequestID: e.HTTPRequestID}
}

// The sold-out picture exists only for a warmed sale without units, and
// answers replays and buyers from what the reserve script wrote.
func TestReadSoldOut(t *testing.T) {
	f := mustWarmSale(t, 1)
	c := redisgateway.NewClient(f.rdb)
	m, err := c.ReadSoldOut(ctx(t), f.saleID)
	require.NoError(t, err)
	require.Nil(t, m, "units left")
	res, err := c.Reserve(ctx(t), redisgateway.ReserveArgs{SaleID: f.saleID, UserID: 5, RequestID: "req-5", Token: "tok-5", Epoch: 1})
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeOK, res.Outcome)

	m, err = c.ReadSoldOut(ctx(t), f.saleID)
	require.NoError(t, err)
	require.NotNil(t, m)
	tok, ok := m.Replay(5, "req-5")
	require.True(t, ok)
	require.Equal(t, "tok-5", tok)
	_, ok = m.Replay(5, "req-6")
	require.False(t, ok)
	require.Contains(t, m.Buyers, int64(5))

	none, err := c.ReadSoldOut(ctx(t), f.saleID+1_000_000)
	require.NoError(t, err)
	require.Nil(t, none, "not warmed")
}

// Stocks and counters of several sales in one pipeline; a missing key is
// ErrMissing on its own counter, not a failure.
func TestReadCounters(t *testing.T) {
	f := mustWarmSale(t, 3)
	c := redisgateway.NewClient(f.rdb)
	cold := f.saleID + 1_000_000
	stocks, released, err := c.ReadCounters(ctx(t), []int64{f.saleID, cold}, []int64{f.saleID})
	require.NoError(t, err)
	require.Equal(t, redisgateway.Counter{N: 3}, stocks[f.saleID])
	require.ErrorIs(t, stocks[cold].Err, redisgateway.ErrMissing)
	require.ErrorIs(t, released[f.saleID].Err, redisgateway.ErrMissing, "no release yet")
	n, ok, err := c.Stock(ctx(t), cold)
	require.NoError(t, err)
	require.False(t, ok)
	require.Zero(t, n)
}

// The inbox operations over a warmed sale: read, deliveries, claim from
// the start cursor, ack with the started set, dead-letter.
func TestInboxOperations(t *testing.T) {
	f := mustWarmSale(t, 5)
	c := redisgateway.NewClient(f.rdb)
	for u := int64(1); u <= 3; u++ {
		_, err := c.Reserve(ctx(t), redisgateway.ReserveArgs{SaleID: f.saleID, UserID: u, RequestID: fmt.Sprint("r", u), Token: fmt.Sprint("t", u), Epoch: 1})
		require.NoError(t, err)
	}
	got, err := c.ReadInbox(ctx(t), f.saleID, "a", false, 10, 10*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, "t1", got[0].Token)
	own, err := c.ReadInbox(ctx(t), f.saleID, "a", true, 10, time.Second)
	require.NoError(t, err)
	require.Len(t, own, 3, "pending history")
	deliveries, err := c.Deliveries(ctx(t), f.saleID, "a", own)
	require.NoError(t, err)
	require.EqualValues(t, 2, deliveries[own[0].ID])

	claimed, next, err := c.ClaimInbox(ctx(t), f.saleID, "b", 0, "", 10)
	require.NoError(t, err)
	require.Len(t, claimed, 3)
	require.Empty(t, next, "one page")

	acked, err := c.AckInbox(ctx(t), f.saleID, []string{claimed[0].ID}, []string{claimed[0].Token})
	require.NoError(t, err)
	require.EqualValues(t, 1, acked)
	started, err := c.Started(ctx(t), f.saleID, []string{"t1", "t2"})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, started)
	require.NoError(t, c.MarkStarted(ctx(t), f.saleID, "t2"))

	require.NoError(t, c.DeadLetterInbox(ctx(t), f.saleID, []redisgateway.DeadLetter{{Entry: claimed[1], Reason: "test", Delivered: 3}}))
	dead := f.rdb.XRange(ctx(t), f.keys.Dead, "-", "+").Val()
	require.Len(t, dead, 1)
	require.Equal(t, "t2", dead[0].Values["token"])
	require.Equal(t, "test", dead[0].Values["reason"])
	require.Equal(t, claimed[1].ID, dead[0].Values["entry"])

	g, err := c.InboxGroupState(ctx(t), f.saleID)
	require.NoError(t, err)
	require.EqualValues(t, 1, g.Pending)
	require.EqualValues(t, 0, g.Lag)
	lower, err := c.OldestPending(ctx(t), f.saleID)
	require.NoError(t, err)
	require.Equal(t, claimed[2].ID, lower)

	_, err = c.ReadInbox(ctx(t), f.saleID+1_000_000, "a", false, 10, 10*time.Millisecond)
	require.ErrorIs(t, err, redisgateway.ErrNoInbox)
	_, err = c.InboxGroupState(ctx(t), f.saleID+1_000_000)
	require.ErrorIs(t, err, redisgateway.ErrNoInbox)
}

// The relay has delivered an inbox through a time when nothing is
// undelivered, or when its last delivered entry was appended at or after
// it; pending entries (delivered, unacknowledged) count as delivered. An
// inbox that is gone has nothing to deliver.
func TestRelayDelivered(t *testing.T) {
	f := mustWarmSale(t, 5)
	c := redisgateway.NewClient(f.rdb)
	delivered := func(through time.Time) bool {
		t.Helper()
		ok, err := c.RelayDelivered(ctx(t), f.saleID, through)
		require.NoError(t, err)
		return ok
	}
	require.True(t, delivered(time.Now().Add(time.Hour)), "an empty inbox")
	for u := int64(1); u <= 2; u++ {
		_, err := c.Reserve(ctx(t), redisgateway.ReserveArgs{SaleID: f.saleID, UserID: u, RequestID: fmt.Sprint("r", u), Token: fmt.Sprint("t", u), Epoch: 1})
		require.NoError(t, err)
	}
	require.False(t, delivered(time.Now().Add(-time.Hour)), "two entries undelivered")
	got, err := c.ReadInbox(ctx(t), f.saleID, "a", false, 1, -1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	appended, _, _ := strings.Cut(got[0].ID, "-")
	ms, err := strconv.ParseInt(appended, 10, 64)
	require.NoError(t, err)
	require.True(t, delivered(time.UnixMilli(ms)), "delivered through the first entry's time, the second undelivered")
	require.False(t, delivered(time.UnixMilli(ms+1)), "the second entry, appended later, is undelivered")
	_, err = c.ReadInbox(ctx(t), f.saleID, "a", false, 1, -1)
	require.NoError(t, err)
	require.True(t, delivered(time.Now().Add(time.Hour)), "both pending: nothing undelivered")
	gone, err := c.RelayDelivered(ctx(t), f.saleID+1_000_000, time.Now())
	require.NoError(t, err)
	require.True(t, gone, "no inbox: nothing to deliver")
}

// BenchmarkReserveCall: the API's reserve call through redisgateway.Client against
// the direct Scripts call it replaced (the baseline, same run), on a
// sold-out sale so every iteration is one EVALSHA taking nothing.
func BenchmarkReserveCall(b *testing.B) {
	f := mustWarmSale(b, 0)
	c := redisgateway.NewClient(f.rdb)
	a := redisgateway.ReserveArgs{SaleID: f.saleID, UserID: 1, RequestID: "bench-1", Token: "tok", Epoch: 1}
	b.Run("scripts", func(b *testing.B) {
		cx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f.scripts.Reserve(cx, f.rdb, a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("client", func(b *testing.B) {
		cx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Reserve(cx, a); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSoldOutReplay: the sold-out mark's replay lookup (hot path)
// through SoldOut.Replay against the inline key build it replaced.
func BenchmarkSoldOutReplay(b *testing.B) {
	requests := make(map[string]string, 1000)
	for u := range int64(1000) {
		requests[redisgateway.RequestField(u, "req-"+strconv.FormatInt(u, 10))] = "tok"
	}
	m := redisgateway.NewSoldOutForTest(requests)
	b.Run("inline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf [96]byte
			k := strconv.AppendInt(buf[:0], 500, 10)
			k = append(k, ':')
			k = append(k, "req-500"...)
			if _, ok := requests[string(k)]; !ok {
				b.Fatal("miss")
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := m.Replay(500, "req-500"); !ok {
				b.Fatal("miss")
			}
		}
	})
}

// The aside client answers while every connection of the client it was
// made from is busy: its pings time Redis, not the shared pool's queue.
func TestAsideHasConnectionsOfItsOwn(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(), PoolSize: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	c := redisgateway.NewClient(rdb)
	aside, err := c.Aside()
	require.NoError(t, err)
	t.Cleanup(func() { _ = aside.Close() })

	held := make(chan error, 1)
	go func() {
		held <- rdb.BLPop(context.Background(), time.Second, fmt.Sprintf("seckill:test:aside:%d", testenv.UniqueUser())).Err()
	}()
	time.Sleep(100 * time.Millisecond) // the BLPOP has the one connection
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, c.PingAll(ctx), context.DeadlineExceeded, "the shared pool's one connection is held")
	require.True(t, redisgateway.IsTimeout(c.PingAll(ctx)))
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	require.NoError(t, aside.PingAll(ctx))
	require.ErrorIs(t, <-held, redis.Nil)
}

// TestRequestIDByToken: a cancel finds a hold's request_id by its token in
// one read ("t:" field), only for the hold's user, and still by scanning for
// a hold written without that field.
func TestRequestIDByToken(t *testing.T) {
	f := mustWarmSale(t, 5)
	c := ctx(t)
	rc := redisgateway.NewClient(f.rdb)
	r := f.reserve(t, 7, "req-a")
	require.Equal(t, redisgateway.OutcomeOK, r.Outcome)
	req, ok, err := rc.RequestID(c, f.saleID, 7, r.Token)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "req-a", req)
	_, ok, err = rc.RequestID(c, f.saleID, 8, r.Token)
	require.NoError(t, err)
	require.False(t, ok, "another user's token")
	_, ok, err = rc.RequestID(c, f.saleID, 7, "no-such-token")
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, f.rdb.HDel(c, f.keys.Requests, "t:"+r.Token).Err())
	req, ok, err = rc.RequestID(c, f.saleID, 7, r.Token)
	require.NoError(t, err)
	require.True(t, ok, "found by scanning")
	require.Equal(t, "req-a", req)
}
