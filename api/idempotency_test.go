package api

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/idempotency"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// doKeyed sends an admin write with an Idempotency-Key.
func (h *harness) doKeyed(path, token, key, body string) response {
	h.tb.Helper()
	return h.doWith("POST", path, token, body, map[string]string{"Idempotency-Key": key})
}

func uniqueKey(prefix string) string {
	return prefix + "-" + strconv.FormatInt(testenv.UniqueUser(), 10)
}

func TestIdempotentCreateSale(t *testing.T) {
	h := MustHarness(t)
	starts := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	ends := time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	body := `{"goods_id":7,"title":"phone","price_cents":4999,"stock":3,"starts_at":"` + starts + `","ends_at":"` + ends + `"}`
	key := uniqueKey("create")
	first := h.doKeyed("/admin/v1/sales", h.admin, key, body)
	require.Equal(t, 201, first.Status, string(first.Body))
	id := int64(first.json(t)["sale_id"].(float64))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.rdb.Del(ctx, redisgateway.SaleKeys(id).All()...).Err()
	})

	// The same body, also reordered and spaced differently: the first answer.
	reordered := `{ "stock":3, "goods_id":7,"title":"phone","price_cents":4999,"starts_at":"` + starts + `","ends_at":"` + ends + `"}`
	for _, b := range []string{body, reordered} {
		again := h.doKeyed("/admin/v1/sales", h.admin, key, b)
		require.Equal(t, 201, again.Status, string(again.Body))
		require.Equal(t, string(first.Body), string(again.Body), "the first answer, no second sale")
	}

	// The instance that ran it died before keeping the answer: a repeat
	// past the stale bound takes the key over and finds the sale created.
	_, err := h.st.DB.ExecContext(context.Background(), "UPDATE idempotency_keys SET status = NULL, response = NULL, created_at = ? WHERE scope = ?",
		time.Now().Add(-time.Hour).UTC(), idempotency.Scope(1, "POST", "/admin/v1/sales", key))
	require.NoError(t, err)
	taken := h.doKeyed("/admin/v1/sales", h.admin, key, body)
	require.Equal(t, 201, taken.Status, string(taken.Body))
	require.EqualValues(t, id, taken.json(t)["sale_id"], "no second sale")

	other := h.doKeyed("/admin/v1/sales", h.admin, key, strings.Replace(body, `"stock":3`, `"stock":4`, 1))
	require.Equal(t, 409, other.Status)
	require.Equal(t, "idempotency_key_reused", other.errCode(t))

	// Keys are scoped per admin: another admin's same key is its own write.
	r := h.doKeyed("/admin/v1/sales", h.MustToken(2, authtoken.RoleAdmin), key, body)
	require.Equal(t, 201, r.Status, string(r.Body))
	other2 := int64(r.json(t)["sale_id"].(float64))
	require.NotEqual(t, id, other2)
	t.Cleanup(func() { _ = h.rdb.Del(context.Background(), redisgateway.SaleKeys(other2).All()...).Err() })
}

func TestIdempotencyKeyMalformed(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(5)
	path := "/admin/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/stock"
	for _, key := range []string{"", strings.Repeat("k", 129), "has space", "naïve"} {
		r := h.doKeyed(path, h.admin, key, `{"delta":1}`)
		require.Equal(t, 400, r.Status, "key %q", key)
		require.Equal(t, "invalid_request", r.errCode(t))
	}
	require.EqualValues(t, 5, h.dbStock(sale.ID), "a refused key changes nothing")
	require.EqualValues(t, 5, h.redisInt(redisgateway.SaleKeys(sale.ID).Stock))
	r := h.doKeyed(path, h.admin, strings.Repeat("k", 128), `{"delta":1}`)
	require.Equal(t, 200, r.Status, string(r.Body))
}

func TestIdempotentStock(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(10)
	path := "/admin/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/stock"
	key := uniqueKey("stock")
	first := h.doKeyed(path, h.admin, key, `{"delta":10}`)
	require.Equal(t, 200, first.Status, string(first.Body))
	again := h.doKeyed(path, h.admin, key, `{"delta":10}`)
	require.Equal(t, 200, again.Status)
	require.Equal(t, string(first.Body), string(again.Body))
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	got, err := h.st.GetSale(context.Background(), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 20, got.StockTotal, "stock_total moves once")
	require.EqualValues(t, 20, h.redisInt(redisgateway.SaleKeys(sale.ID).Stock))

	r := h.doKeyed(path, h.admin, key, `{"delta":5}`)
	require.Equal(t, 409, r.Status)
	require.Equal(t, "idempotency_key_reused", r.errCode(t))

	// Concurrent repeats of one key: one write, every answer the same.
	key = uniqueKey("stock-concurrent")
	var wg sync.WaitGroup
	answers := make([]response, 8)
	for i := range answers {
		wg.Go(func() { answers[i] = h.doKeyed(path, h.admin, key, `{"delta":-3}`) })
	}
	wg.Wait()
	for _, a := range answers {
		require.Equal(t, 200, a.Status, string(a.Body))
		require.Equal(t, string(answers[0].Body), string(a.Body))
	}
	got, err = h.st.GetSale(context.Background(), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 17, got.StockTotal)
	require.EqualValues(t, 17, h.redisInt(redisgateway.SaleKeys(sale.ID).Stock))
}

// A stock addition that meets a frozen Redis is committed and answers 200;
// its retry with the key changes nothing; Redis takes the addition by
// itself once it runs again.
func TestStockAdditionDuringFrozenRedis(t *testing.T) {
	h, srv := mustHarnessOnOwnRedis(t, func(c *config.Config) { c.RedisTimeout = 250 * time.Millisecond })
	rdb := h.rdb
	sale := h.MustWarmSale(10)
	path := "/admin/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/stock"
	key := uniqueKey("frozen")

	srv.Freeze(t)
	thawed := false
	defer func() {
		if !thawed {
			srv.Thaw(t)
		}
	}()
	first := h.doKeyed(path, h.admin, key, `{"delta":10}`)
	require.Equal(t, 200, first.Status, string(first.Body))
	require.EqualValues(t, 20, first.json(t)["stock_total"])
	again := h.doKeyed(path, h.admin, key, `{"delta":10}`)
	require.Equal(t, 200, again.Status, string(again.Body))
	require.Equal(t, string(first.Body), string(again.Body))
	got, err := h.st.GetSale(context.Background(), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 20, got.StockTotal, "stock_total moves once")
	require.EqualValues(t, 20, h.dbStock(sale.ID))

	srv.Thaw(t)
	thawed = true
	require.Eventually(t, func() bool {
		n, err := rdb.Get(context.Background(), redisgateway.SaleKeys(sale.ID).Stock).Int64()
		return err == nil && n == 20
	}, 30*time.Second, 50*time.Millisecond, "Redis follows the committed addition by itself")
	// The addition is marked applied in MySQL just after Redis took it.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pending, err := h.st.PendingAdditions(context.Background(), sale.ID, 10)
		if assert.NoError(c, err) {
			assert.Empty(c, pending)
		}
	}, 10*time.Second, 50*time.Millisecond)
}

// A pause the database committed while Redis is frozen answers 200, and
// Redis takes it by itself once it runs again.
func TestPauseDuringFrozenRedis(t *testing.T) {
	h, srv := mustHarnessOnOwnRedis(t, func(c *config.Config) { c.RedisTimeout = 250 * time.Millisecond })
	sale := h.MustWarmSale(10)
	srv.Freeze(t)
	thawed := false
	defer func() {
		if !thawed {
			srv.Thaw(t)
		}
	}()
	r := h.do("POST", "/admin/v1/sales/"+strconv.FormatInt(sale.ID, 10)+"/pause", h.admin, "")
	require.Equal(t, 200, r.Status, string(r.Body))
	got, err := h.st.GetSale(context.Background(), sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ControlPaused, got.Control)

	srv.Thaw(t)
	thawed = true
	require.Eventually(t, func() bool {
		c, err := h.rdb.HGet(context.Background(), redisgateway.SaleKeys(sale.ID).Meta, "control").Result()
		return err == nil && c == string(domain.ControlPaused)
	}, 30*time.Second, 50*time.Millisecond, "Redis follows the committed pause by itself")
}
