package redisgateway_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// TestStatusRecord: a record is written with the sale's epoch, announced
// on the sale's channel, never moves back to a lower rank, is void once
// the sale's epoch changes (a rebuild) and is not written for a sale whose
// keys are gone; it is part of the sale's keys, so tear-down removes it.
func TestStatusRecord(t *testing.T) {
	f := mustWarmSale(t, 3)
	c := ctx(t)
	sub := f.rdb.PSubscribe(c, redisgateway.EventChannelPattern)
	defer sub.Close()
	_, err := sub.Receive(c) // the subscription's confirmation
	require.NoError(t, err)

	payBy := time.UnixMilli(time.Now().Add(10 * time.Minute).UnixMilli()).UTC()
	pending := redisgateway.StatusRecord{Seq: 2, UserID: 42, Status: "PENDING_PAYMENT", OrderNo: "o-1", AmountCents: 500, PayBy: payBy}
	changed, err := f.scripts.WriteStatus(c, f.rdb, f.saleID, "tok", pending)
	require.NoError(t, err)
	require.True(t, changed)
	msg, err := sub.ReceiveMessage(c)
	require.NoError(t, err)
	require.Equal(t, redisgateway.EventChannel(f.saleID), msg.Channel)
	require.Equal(t, "tok", msg.Payload)
	id, ok := redisgateway.SaleOfEventChannel(msg.Channel)
	require.True(t, ok)
	require.Equal(t, f.saleID, id)

	got, err := f.scripts.ReadStatus(c, f.rdb, f.saleID, "tok")
	require.NoError(t, err)
	require.NotNil(t, got.Record)
	pending.Epoch = 1
	require.Equal(t, pending, *got.Record)

	paid := pending
	paid.Seq, paid.Status = 3, "PAID"
	changed, err = f.scripts.WriteStatus(c, f.rdb, f.saleID, "tok", paid)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = f.scripts.WriteStatus(c, f.rdb, f.saleID, "tok", pending)
	require.NoError(t, err)
	require.False(t, changed, "a late writer never moves the record back")
	got, err = f.scripts.ReadStatus(c, f.rdb, f.saleID, "tok")
	require.NoError(t, err)
	require.Equal(t, "PAID", got.Record.Status)

	require.NoError(t, f.rdb.HSet(c, f.keys.Meta, "epoch", 2).Err())
	got, err = f.scripts.ReadStatus(c, f.rdb, f.saleID, "tok")
	require.NoError(t, err)
	require.Nil(t, got.Record, "a record of an older epoch is void")

	require.Contains(t, f.keys.All(), f.keys.Status)
	require.NoError(t, f.rdb.Del(c, f.keys.All()...).Err())
	changed, err = f.scripts.WriteStatus(c, f.rdb, f.saleID, "tok", paid)
	require.NoError(t, err)
	require.False(t, changed)
	n, err := f.rdb.Exists(c, f.keys.Status).Result()
	require.NoError(t, err)
	require.Zero(t, n, "no record for a torn-down sale")
}

// TestStatusEventsArriveBeforeALaterFence: every announcement (a record
// written, forgotten, written for a sale whose keys are gone; a sale warmed
// or deleted) reaches the listener before the first fence sent after the
// announcing call returned, which is what the API's cache of live views
// relies on.
func TestStatusEventsArriveBeforeALaterFence(t *testing.T) {
	f := mustWarmSale(t, 3)
	c := ctx(t)
	client := redisgateway.NewClient(f.rdb)
	require.True(t, client.Fences())
	type event struct {
		kind  string // token, sale, subscribed, fence
		sale  int64
		token string
		at    time.Time
	}
	events := make(chan event, 1<<16)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- client.ListenStatusEvents(stop, redisgateway.StatusEvents{
			Token:      func(sale int64, token string) { events <- event{kind: "token", sale: sale, token: token} },
			Sale:       func(sale int64) { events <- event{kind: "sale", sale: sale} },
			Subscribed: func() { events <- event{kind: "subscribed"} },
			Fence:      func(at time.Time) { events <- event{kind: "fence", at: at} },
		})
	}()
	t.Cleanup(func() {
		close(stop)
		require.NoError(t, <-done)
	})
	// announced waits for the first fence sent after now and reports
	// whether want came before it.
	announced := func(want event) bool {
		t.Helper()
		after := time.Now()
		seen := false
		for {
			select {
			case e := <-events:
				switch {
				case e.kind == "fence" && e.at.After(after):
					return seen
				case e.kind == want.kind && e.sale == want.sale && e.token == want.token:
					seen = true
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no fence in 5 s")
			}
		}
	}
	for e := range events {
		if e.kind == "subscribed" {
			break
		}
	}

	for i := range 50 {
		token := "fence-" + string(rune('a'+i%26)) + time.Now().Format("150405.000000")
		rec := redisgateway.StatusRecord{Seq: 2, UserID: 7, Status: "PENDING_PAYMENT", OrderNo: token}
		_, err := f.scripts.WriteStatus(c, f.rdb, f.saleID, token, rec)
		require.NoError(t, err)
		require.True(t, announced(event{kind: "token", sale: f.saleID, token: token}), "write %d", i)
		require.NoError(t, client.ForgetStatus(c, f.saleID, token))
		require.True(t, announced(event{kind: "token", sale: f.saleID, token: token}), "forget %d", i)
	}
	other := mustWarmSale(t, 1)
	require.True(t, announced(event{kind: "sale", sale: other.saleID}), "warm-up")
	require.NoError(t, client.DeleteSale(c, other.saleID))
	require.True(t, announced(event{kind: "sale", sale: other.saleID}), "tear-down")
	_, err := f.scripts.WriteStatus(c, f.rdb, other.saleID, "gone", redisgateway.StatusRecord{Seq: 3, UserID: 7, Status: "PAID"})
	require.NoError(t, err)
	require.True(t, announced(event{kind: "token", sale: other.saleID, token: "gone"}), "a record for a sale whose keys are gone")
}

// TestFencesOnlyWhileWanted: a listener whose cache serves nobody publishes
// no fences (each one is a PUBLISH matched against every instance's
// patterns) and looks a few times a second, not every FencePeriod; fences
// resume at once when Resume says they are wanted.
func TestFencesOnlyWhileWanted(t *testing.T) {
	client := redisgateway.NewClient(testenv.MustRedis(t))
	require.True(t, client.Fences())
	var wanted atomic.Bool
	resume := make(chan struct{}, 1)
	fences := make(chan time.Time, 1<<12)
	subscribed := make(chan struct{}, 1)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- client.ListenStatusEvents(stop, redisgateway.StatusEvents{
			Token:      func(int64, string) {},
			Sale:       func(int64) {},
			Subscribed: func() { subscribed <- struct{}{} },
			Fence:      func(at time.Time) { fences <- at },
			Wanted:     wanted.Load,
			Resume:     resume,
		})
	}()
	t.Cleanup(func() {
		close(stop)
		require.NoError(t, <-done)
	})
	<-subscribed
	time.Sleep(300 * time.Millisecond)
	require.Empty(t, fences, "no fence while nobody wants one")
	wanted.Store(true)
	asked := time.Now()
	resume <- struct{}{}
	select {
	case at := <-fences:
		require.Less(t, at.Sub(asked), 100*time.Millisecond, "the fence is sent at once, not on the idle tick")
	case <-time.After(5 * time.Second):
		t.Fatal("no fence once wanted")
	}
}

// TestASilentSubscriptionIsReplaced: a subscription whose link holds every
// byte without an error (a partition) is found dead by its unanswered
// pings and subscribed again; once the link heals, events and fences flow
// on the new subscription. A link error alone would never show it: go-redis
// only resubscribes after an error.
func TestASilentSubscriptionIsReplaced(t *testing.T) {
	proxy, err := netproxy.Start(testenv.RedisAddr(), 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	client := redisgateway.NewClient(rdb)
	subscribed := make(chan struct{}, 16)
	tokens := make(chan string, 16)
	var fences atomic.Int64
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- client.ListenStatusEvents(stop, redisgateway.StatusEvents{
			Token:      func(_ int64, tok string) { tokens <- tok },
			Sale:       func(int64) {},
			Subscribed: func() { subscribed <- struct{}{} },
			Fence:      func(time.Time) { fences.Add(1) },
		})
	}()
	t.Cleanup(func() {
		close(stop)
		require.NoError(t, <-done)
	})
	<-subscribed
	proxy.SetHeld(true)
	time.Sleep(7 * time.Second) // past subscriptionDead (5 s)
	proxy.SetHeld(false)
	select {
	case <-subscribed:
	case <-time.After(10 * time.Second):
		t.Fatal("not subscribed again after the link healed")
	}
	direct := testenv.MustRedis(t)
	require.Eventually(t, func() bool {
		require.NoError(t, direct.Publish(ctx(t), redisgateway.EventChannel(424242), "tok-after-heal").Err())
		select {
		case tok := <-tokens:
			return tok == "tok-after-heal"
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}, 10*time.Second, 10*time.Millisecond, "events flow on the new subscription")
	before := fences.Load()
	require.Eventually(t, func() bool { return fences.Load() > before }, 5*time.Second, 10*time.Millisecond, "fences resume")
}
