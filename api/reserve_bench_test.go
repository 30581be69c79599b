package api

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/authtoken"
)

// BenchmarkReserveSoldOutMark: the whole admission of a reservation
// request answered in process by the sold-out mark (no Redis call).
func BenchmarkReserveSoldOutMark(b *testing.B) {
	h := MustHarness(b, func(c *config.Config) { c.GlobalRPS, c.PerAddrRPS, c.PerUserRPS = 1e9, 1e9, 1e9 })
	sale := h.MustWarmSale(1)
	require.Equal(b, 202, h.reserve(sale.ID, h.MustToken(7, authtoken.RoleUser), "req-00000001").Status)
	tok := h.MustToken(8, authtoken.RoleUser)
	require.Equal(b, 410, h.reserve(sale.ID, tok, "req-00000002").Status)
	time.Sleep(500 * time.Millisecond) // the mark is set asynchronously
	handler := h.app.Handler()
	path := "/api/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/reservations"
	body := []byte(`{"request_id":"req-00000003"}`)
	var fctx fasthttp.RequestCtx
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		fctx.Request.Reset()
		fctx.Response.Reset()
		fctx.Request.Header.SetMethod("POST")
		fctx.Request.SetRequestURI(path)
		fctx.Request.Header.Set("Authorization", "Bearer "+tok)
		fctx.Request.Header.SetContentType("application/json")
		fctx.Request.SetBody(body)
		handler(&fctx)
		if fctx.Response.StatusCode() != 410 {
			b.Fatalf("status %d: %s", fctx.Response.StatusCode(), fctx.Response.Body())
		}
	}
}
