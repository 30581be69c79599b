package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/wire"
)

// TestConsoleSaleReads: the admin list of sales and one sale's operator
// view answer what the reservations did, and only to an admin.
func TestConsoleSaleReads(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(5)
	sid := strconv.FormatInt(sale.ID, 10)
	for i := range 2 {
		r := h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), ""), "console-"+strconv.Itoa(i))
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	}
	require.Equal(t, http.StatusOK, h.do("POST", "/admin/v1/sales/"+sid+"/pause", h.admin, "").Status)
	r := h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), ""), "console-paused")
	require.Equal(t, http.StatusForbidden, r.Status, string(r.Body))

	r = h.do("GET", "/admin/v1/sales", h.admin, "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	var list struct {
		Sales []map[string]any `json:"sales"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &list))
	require.NotEmpty(t, list.Sales)
	var listed map[string]any
	for i, s := range list.Sales {
		if i > 0 {
			require.Less(t, s["sale_id"], list.Sales[i-1]["sale_id"], "newest first")
		}
		if int64(s["sale_id"].(float64)) == sale.ID {
			listed = s
		}
	}
	require.NotNil(t, listed, "the sale is listed")
	require.Equal(t, "paused", listed["control"])
	require.Equal(t, "redis", listed["mode"])
	require.Equal(t, float64(5), listed["stock_total"])
	require.Contains(t, listed, "waitlist_length")

	r = h.do("GET", "/admin/v1/sales/"+sid, h.admin, "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	var detail struct {
		Sale        map[string]any     `json:"sale"`
		Orders      map[string]int64   `json:"orders"`
		Refunds     int64              `json:"refunds"`
		Report      json.RawMessage    `json:"report"`
		ReportError string             `json:"report_error"`
		Funnel      []wire.FunnelCount `json:"funnel"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &detail))
	require.Equal(t, "paused", detail.Sale["control"])
	require.Equal(t, float64(3), detail.Sale["stock_left"], "two of five units held")
	var orders int64
	for _, n := range detail.Orders {
		orders += n
	}
	require.Equal(t, int64(2), orders, "%v", detail.Orders)
	require.Zero(t, detail.Refunds)
	require.Equal(t, "null", string(detail.Report), "no Temporal: no report")
	require.Contains(t, detail.ReportError, "temporal")
	counts := map[string]float64{}
	for _, f := range detail.Funnel {
		counts[f.Layer+" "+f.Outcome] = f.Count
	}
	require.GreaterOrEqual(t, counts["sale_cache pass"], float64(2), "%v", detail.Funnel)
	require.GreaterOrEqual(t, counts["sale_cache paused"], float64(1), "%v", detail.Funnel)

	require.Equal(t, http.StatusNotFound, h.do("GET", "/admin/v1/sales/999999999999", h.admin, "").Status)
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/admin/v1/sales", "", "").Status)
	require.Equal(t, http.StatusForbidden, h.do("GET", "/admin/v1/sales/"+sid, h.MustToken(testenv.UniqueUser(), ""), "").Status)
}

// TestConsolePage: the console's page and modules are served with the
// page's own-origin policy; a path outside them is 404.
func TestConsolePage(t *testing.T) {
	h := MustHarness(t)
	r := h.do("GET", "/console", "", "")
	require.Equal(t, http.StatusOK, r.Status)
	require.Contains(t, r.Header.Get("Content-Type"), "text/html")
	require.Contains(t, r.Header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Contains(t, string(r.Body), `src="/console/console.js"`)
	for _, f := range []string{"console.js", "api.js", "console.css"} {
		r = h.do("GET", "/console/"+f, "", "")
		require.Equal(t, http.StatusOK, r.Status, f)
		require.NotEmpty(t, r.Body, f)
	}
	require.True(t, strings.HasPrefix(h.do("GET", "/console/api.js", "", "").Header.Get("Content-Type"), "text/javascript"))
	require.Equal(t, http.StatusNotFound, h.do("GET", "/console/missing.js", "", "").Status)
	require.Equal(t, http.StatusNotFound, h.do("GET", "/console/..%2fopenapi.yaml", "", "").Status)
}
