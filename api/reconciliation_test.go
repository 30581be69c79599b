package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/backend"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// MustTemporalHarness is the harness's API with a Temporal client, which
// reconciliation needs.
func MustTemporalHarness(tb testing.TB) *harness {
	tb.Helper()
	h := MustHarness(tb)
	app := New(Deps{Config: h.cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Services: backend.Build(backend.Deps{Config: h.cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Store: h.st, Redis: redisgateway.NewClient(h.rdb),
		Temporal: testenv.MustTemporal(tb)})})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	go func() { _ = app.Listener(ln) }()
	tb.Cleanup(func() { _ = app.ShutdownWithTimeout(5 * time.Second) })
	h.app, h.base = app, "http://"+ln.Addr().String()
	return h
}

func TestReconciliationEndpoint(t *testing.T) {
	h := MustTemporalHarness(t)
	sale := h.MustWarmSale(5)
	path := "/admin/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/reconciliation"

	r := h.do("GET", path, h.admin, "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	var rep domain.ReconciliationReport
	require.NoError(t, json.Unmarshal(r.Body, &rep))
	require.Equal(t, sale.ID, rep.SaleID)
	require.EqualValues(t, 5, rep.StockTotal)
	require.EqualValues(t, 5, rep.RedisStock)
	require.EqualValues(t, 5, rep.DBStock)
	require.True(t, rep.RedisLoaded)
	require.True(t, rep.Consistent, "%s", r.Body)
	require.Empty(t, rep.Discrepancies)
	// The contract's keys are all there, orders with every status.
	raw := r.json(t)
	for _, k := range []string{"sale_id", "stock_total", "redis_stock", "db_stock", "orders", "in_flight", "discrepancies", "consistent"} {
		require.Contains(t, raw, k)
	}
	require.Len(t, raw["orders"], 5)
	require.NotNil(t, raw["discrepancies"], "an empty list, not null")

	// A drifted Redis stock with nothing in flight: reported, then repaired
	// only when asked.
	require.NoError(t, h.rdb.IncrBy(t.Context(), redisgateway.SaleKeys(sale.ID).Stock, 2).Err())
	r = h.do("GET", path, h.admin, "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.NoError(t, json.Unmarshal(r.Body, &rep))
	require.False(t, rep.Consistent)
	require.Len(t, rep.Discrepancies, 1, "%s", r.Body)
	require.Equal(t, domain.KindRedisStockDrift, rep.Discrepancies[0].Kind)
	require.False(t, rep.Discrepancies[0].Repaired)
	require.EqualValues(t, 7, h.redisInt(redisgateway.SaleKeys(sale.ID).Stock), "report-only changes nothing")

	r = h.do("GET", path+"?repair=true", h.admin, "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.NoError(t, json.Unmarshal(r.Body, &rep))
	require.Len(t, rep.Discrepancies, 1, "%s", r.Body)
	require.True(t, rep.Discrepancies[0].Repaired)
	require.EqualValues(t, 5, h.redisInt(redisgateway.SaleKeys(sale.ID).Stock))
	r = h.do("GET", path, h.admin, "")
	require.NoError(t, json.Unmarshal(r.Body, &rep))
	require.True(t, rep.Consistent, "%s", r.Body)

	// Errors.
	require.Equal(t, "invalid_request", h.do("GET", path+"?repair=maybe", h.admin, "").errCode(t))
	require.Equal(t, "not_found", h.do("GET", "/admin/v1/sales/999999999999/reconciliation", h.admin, "").errCode(t))
	require.Equal(t, "forbidden", h.do("GET", path, h.MustToken(testenv.UniqueUser(), authtoken.RoleUser), "").errCode(t))
	require.Equal(t, "unauthorized", h.do("GET", path, "", "").errCode(t))
}

func TestReconciliationNeedsTemporal(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(1)
	r := h.do("GET", "/admin/v1/sales/"+strconv.FormatInt(sale.ID, 10)+"/reconciliation", h.admin, "")
	require.Equal(t, "unavailable", r.errCode(t))
	require.NotEmpty(t, r.Header.Get("Retry-After"))
}
