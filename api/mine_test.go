package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
)

// mineFixture drives reservations through the states the order workflow
// would (its database step, then its Redis step, sales.SyncToken), with no
// worker.
type mineFixture struct {
	t    *testing.T
	h    *harness
	ctx  context.Context
	sale *domain.Sale
}

func newMineFixture(t *testing.T, h *harness, sale *domain.Sale) *mineFixture {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &mineFixture{t: t, h: h, ctx: ctx, sale: sale}
}

// reserve takes a hold through the API and, unless queuedOnly, records it
// as the workflow's first step does.
func (f *mineFixture) reserve(user int64, requestID string, record bool) string {
	f.t.Helper()
	r := f.h.reserve(f.sale.ID, f.h.MustToken(user, ""), requestID)
	require.Equal(f.t, http.StatusAccepted, r.Status, string(r.Body))
	token := r.json(f.t)["token"].(string)
	if record {
		_, err := f.h.st.RecordReservation(f.ctx, domain.OrderInput{Token: token, SaleID: f.sale.ID, UserID: user, RequestID: requestID, Path: domain.PathRedis})
		require.NoError(f.t, err)
	}
	return token
}

// step runs a database step and the Redis step that follows it.
func (f *mineFixture) step(token string, db func() error) {
	f.t.Helper()
	require.NoError(f.t, db())
	_, err := sales.SyncToken(f.ctx, f.h.st, redisgateway.NewClient(f.h.rdb), token)
	require.NoError(f.t, err)
}

func (f *mineFixture) placed(token string) {
	f.step(token, func() error { _, err := f.h.st.PlaceOrder(f.ctx, token); return err })
}

// dbList is the database's answer: ListReservations as the API renders it.
func (f *mineFixture) dbList(user int64) []domain.ReservationView {
	f.t.Helper()
	rs, err := f.h.st.ListReservations(f.ctx, user, f.sale.ID, listLimit)
	require.NoError(f.t, err)
	out := make([]domain.ReservationView, len(rs))
	for i, r := range rs {
		out[i] = r.View()
	}
	return out
}

func (f *mineFixture) apiList(user int64) []domain.ReservationView {
	f.t.Helper()
	r := f.h.do("GET", "/api/v1/me/reservations?sale_id="+strconv.FormatInt(f.sale.ID, 10), f.h.MustToken(user, ""), "")
	require.Equal(f.t, http.StatusOK, r.Status, string(r.Body))
	var body struct {
		Reservations []domain.ReservationView `json:"reservations"`
	}
	require.NoError(f.t, json.Unmarshal(r.Body, &body))
	require.NotNil(f.t, body.Reservations, "an empty list is [], not null: %s", r.Body)
	return body.Reservations
}

// TestMyReservationsFromRedis: GET me/reservations of a sale answers from
// Redis what the database answers, across every status and newest first
// (a QUEUED hold shows the sale's price, as its status read does; the row
// has no amount until the order is placed), each entry equal to the
// token's status read; polling it runs no SELECT (Com_select of the API's
// one database session, less the sale cache's refreshes).
func TestMyReservationsFromRedis(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) { c.ReadPerUserRPS = 0 })
	f := newMineFixture(t, h, h.MustWarmSale(10))
	st := h.st

	a := testenv.UniqueUser() // CANCELLED, EXPIRED, FAILED, then PENDING_PAYMENT
	cancelled := f.reserve(a, "mine-a-1", false)
	r := h.do("POST", "/api/v1/reservations/"+cancelled+"/cancel", h.MustToken(a, ""), "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	expired := f.reserve(a, "mine-a-2", true)
	f.placed(expired)
	f.step(expired, func() error { _, err := st.ReleaseOrder(f.ctx, expired, domain.StatusExpired); return err })
	failed := f.reserve(a, "mine-a-3", true)
	f.step(failed, func() error { _, err := st.EndQueued(f.ctx, failed, domain.StatusFailed, "test"); return err })
	pending := f.reserve(a, "mine-a-4", true)
	f.placed(pending)
	b := testenv.UniqueUser() // PAID
	paid := f.reserve(b, "mine-b-1", true)
	f.placed(paid)
	f.step(paid, func() error { _, err := st.MarkPaid(f.ctx, paid, "ref-mine-b"); return err })
	c := testenv.UniqueUser() // QUEUED, recorded
	queued := f.reserve(c, "mine-c-1", true)
	d := testenv.UniqueUser() // none

	for _, user := range []int64{a, b, c, d} {
		want, got := f.dbList(user), f.apiList(user)
		for i := range want {
			if want[i].Status == domain.StatusQueued {
				want[i].AmountCents = f.sale.PriceCents
			}
		}
		require.Equal(t, want, got, "user %d: the database's list", user)
		for _, v := range got {
			r := h.do("GET", "/api/v1/reservations/"+v.Token, h.MustToken(user, ""), "")
			require.Equal(t, http.StatusOK, r.Status)
			var read domain.ReservationView
			require.NoError(t, json.Unmarshal(r.Body, &read))
			require.Equal(t, read, v, "the token's status read")
		}
	}
	statuses := map[string]domain.ReservationStatus{cancelled: domain.StatusCancelled, expired: domain.StatusExpired,
		failed: domain.StatusFailed, pending: domain.StatusPendingPayment, paid: domain.StatusPaid, queued: domain.StatusQueued}
	for _, user := range []int64{a, b, c} {
		for _, v := range f.apiList(user) {
			require.Equal(t, statuses[v.Token], v.Status, "token %s", v.Token)
		}
	}
	require.Len(t, f.apiList(a), 4)

	// Polls: one database session, so MariaDB counts all the API asks.
	st.DB.SetMaxOpenConns(1)
	st.DB.SetMaxIdleConns(1)
	st.DB.SetConnMaxLifetime(0)
	st.DB.SetConnMaxIdleTime(0)
	const polls = 400
	selects := countSelects(t, h, func() {
		for i := range polls {
			user := []int64{a, b, c, d}[i%4]
			require.NotNil(t, f.apiList(user))
		}
	})
	require.Zero(t, selects, "SELECTs caused by %d polls of me/reservations", polls)
}

// TestMyReservationsFallBackToTheDatabase: when Redis cannot know the
// answer, the database gives it: the sale's keys torn down, the database
// path owning the sale (Redis's copy is stale then), Redis unreachable,
// and a list across sales. Here the row was ended in the database without
// the Redis step, so the two disagree and the answer shows which spoke.
func TestMyReservationsFallBackToTheDatabase(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) { c.ReadPerUserRPS = 0 })
	// diverged makes a user whose only reservation Redis shows QUEUED and
	// the database CANCELLED.
	diverged := func(f *mineFixture) (int64, string) {
		user := testenv.UniqueUser()
		token := f.reserve(user, "mine-fallback-1", true)
		_, err := h.st.EndQueued(f.ctx, token, domain.StatusCancelled, "user")
		require.NoError(t, err)
		got := f.apiList(user)
		require.Len(t, got, 1)
		require.Equal(t, domain.StatusQueued, got[0].Status, "Redis answers while it knows the sale")
		return user, token
	}

	t.Run("torn_down", func(t *testing.T) {
		f := newMineFixture(t, h, h.MustWarmSale(2))
		user, _ := diverged(f)
		require.NoError(t, h.rdb.Del(f.ctx, redisgateway.SaleKeys(f.sale.ID).All()...).Err())
		got := f.apiList(user)
		require.Equal(t, f.dbList(user), got)
		require.Equal(t, domain.StatusCancelled, got[0].Status)
	})
	t.Run("database_mode", func(t *testing.T) {
		f := newMineFixture(t, h, h.MustWarmSale(2))
		user, _ := diverged(f)
		_, err := h.st.SwitchToDatabase(f.ctx, f.sale.ID, 0)
		require.NoError(t, err)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := f.apiList(user)
			assert.Equal(c, f.dbList(user), got)
		}, 5*time.Second, 100*time.Millisecond, "the sale cache learns the mode within a second")
	})
	t.Run("across_sales", func(t *testing.T) {
		f := newMineFixture(t, h, h.MustWarmSale(2))
		user, token := diverged(f)
		r := h.do("GET", "/api/v1/me/reservations", h.MustToken(user, ""), "")
		require.Equal(t, http.StatusOK, r.Status)
		require.Contains(t, string(r.Body), fmt.Sprintf(`{"token":%q,"sale_id":%d,"status":"CANCELLED"`, token, f.sale.ID))
	})
	t.Run("redis_unreachable", func(t *testing.T) {
		dead := redis.NewClient(&redis.Options{Addr: testenv.FreeAddr(t), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		t.Cleanup(func() { _ = dead.Close() })
		hd := MustHarnessWithRedis(t, dead, func(c *config.Config) { c.ReadPerUserRPS = 0 })
		f := newMineFixture(t, hd, testenv.MustSale(t, hd.st, 2))
		user := testenv.UniqueUser()
		in := domain.OrderInput{Token: domain.DeriveToken(hd.cfg.TokenKey, f.sale.ID, user, "mine-dead-1"), SaleID: f.sale.ID, UserID: user, RequestID: "mine-dead-1", Path: domain.PathRedis}
		_, err := hd.st.RecordReservation(f.ctx, in)
		require.NoError(t, err)
		got := f.apiList(user)
		require.Equal(t, f.dbList(user), got)
		require.Len(t, got, 1)
	})
}
