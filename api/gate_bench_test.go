package api

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
)

// gateCase is one reservation request replayed through the app's handler.
type gateCase struct {
	name   string
	path   string
	body   []byte
	status int
	spent  time.Duration
}

// BenchmarkGateCost: what the gate adds to the reservation path, as ratios
// to the same path without it, interleaved in one run (each iteration
// sends one request of every case, so drift charges all alike):
// sold-out with a required challenge (a pass checked), sold-out on a
// restricted sale (a listed user), and in stock (a replay the script
// answers) with a pass. Reported as <case>_vs_plain (1.0: free).
func BenchmarkGateCost(b *testing.B) {
	h := MustHarness(b, func(c *config.Config) { c.GlobalRPS, c.PerAddrRPS, c.PerUserRPS = 1e9, 1e9, 1e9 })
	user := testenv.UniqueUser()
	tok := h.MustToken(user, "")
	soldOut := func(opts ...testenv.SaleOption) *domain.Sale {
		sale := h.MustWarmSale(1, opts...)
		filler := h.MustToken(testenv.UniqueUser(), "")
		pass := ""
		if sale.ChallengeDifficulty > 0 {
			pass = h.freshPass(sale.ID, filler)
		}
		require.Equal(b, 202, h.reserveWithPass(sale.ID, filler, "gate-bench-1", pass).Status)
		return sale
	}
	plainOut, challengeOut, listedOut := soldOut(), soldOut(withChallenge(10)), soldOut()
	r := h.do("POST", fmt.Sprintf("/admin/v1/sales/%d/allowlist", listedOut.ID), h.admin, fmt.Sprintf(`{"add":[%d]}`, user))
	require.Equal(b, 200, r.Status, string(r.Body))
	plainIn, challengeIn := h.MustWarmSale(1_000), h.MustWarmSale(1_000, withChallenge(10))
	outPass, inPass := h.freshPass(challengeOut.ID, tok), h.freshPass(challengeIn.ID, tok)
	require.Equal(b, 202, h.reserve(plainIn.ID, tok, "gate-bench-in").Status)
	require.Equal(b, 202, h.reserveWithPass(challengeIn.ID, tok, "gate-bench-in", inPass).Status)
	time.Sleep(1500 * time.Millisecond) // sold-out marks and the allowlist reach the cache

	reqPath := func(id int64) string { return "/api/v1/sales/" + strconv.FormatInt(id, 10) + "/reservations" }
	cases := []*gateCase{
		{name: "soldout_plain", path: reqPath(plainOut.ID), body: []byte(`{"request_id":"gate-bench-2"}`), status: 410},
		{name: "soldout_challenge", path: reqPath(challengeOut.ID), body: []byte(`{"request_id":"gate-bench-2","pass":"` + outPass + `"}`), status: 410},
		{name: "soldout_allowlist", path: reqPath(listedOut.ID), body: []byte(`{"request_id":"gate-bench-2"}`), status: 410},
		{name: "instock_plain", path: reqPath(plainIn.ID), body: []byte(`{"request_id":"gate-bench-in"}`), status: 202},
		{name: "instock_challenge", path: reqPath(challengeIn.ID), body: []byte(`{"request_id":"gate-bench-in","pass":"` + inPass + `"}`), status: 202},
	}
	handler := h.app.Handler()
	var fctx fasthttp.RequestCtx
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for j := range cases {
			c := cases[(i+j)%len(cases)] // each case first in turn
			fctx.Request.Reset()
			fctx.Response.Reset()
			fctx.Request.Header.SetMethod("POST")
			fctx.Request.SetRequestURI(c.path)
			fctx.Request.Header.Set("Authorization", "Bearer "+tok)
			fctx.Request.Header.SetContentType("application/json")
			fctx.Request.SetBody(c.body)
			start := time.Now()
			handler(&fctx)
			c.spent += time.Since(start)
			if fctx.Response.StatusCode() != c.status {
				b.Fatalf("%s: status %d: %s", c.name, fctx.Response.StatusCode(), fctx.Response.Body())
			}
		}
	}
	b.StopTimer()
	ratio := func(c, base *gateCase) float64 { return float64(base.spent) / float64(c.spent) }
	b.ReportMetric(ratio(cases[1], cases[0]), "soldout_challenge_vs_plain")
	b.ReportMetric(ratio(cases[2], cases[0]), "soldout_allowlist_vs_plain")
	b.ReportMetric(ratio(cases[4], cases[3]), "instock_challenge_vs_plain")
	b.ReportMetric(float64(cases[0].spent.Nanoseconds())/float64(b.N), "soldout_plain_ns")
	b.ReportMetric(float64(cases[3].spent.Nanoseconds())/float64(b.N), "instock_plain_ns")
	b.ReportMetric(float64(cases[1].spent.Nanoseconds())/float64(b.N), "soldout_challenge_ns")
	b.ReportMetric(float64(cases[2].spent.Nanoseconds())/float64(b.N), "soldout_allowlist_ns")
}
