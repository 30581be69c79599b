package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// gateCase is one reservation request replayed through the app's handler.
type gateCase struct {
	name   string
	path   string
	body   []byte
	status int
	spent  time.Duration
}

// serve sends the case's request through handler, adding its time to spent.
func (c *gateCase) serve(b *testing.B, handler fasthttp.RequestHandler, fctx *fasthttp.RequestCtx, tok string) {
	fctx.Request.Reset()
	fctx.Response.Reset()
	fctx.Request.Header.SetMethod("POST")
	fctx.Request.SetRequestURI(c.path)
	fctx.Request.Header.Set("Authorization", "Bearer "+tok)
	fctx.Request.Header.SetContentType("application/json")
	fctx.Request.SetBody(c.body)
	start := time.Now()
	handler(fctx)
	c.spent += time.Since(start)
	if fctx.Response.StatusCode() != c.status {
		b.Fatalf("%s: status %d: %s", c.name, fctx.Response.StatusCode(), fctx.Response.Body())
	}
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
			cases[(i+j)%len(cases)].serve(b, handler, &fctx, tok) // each case first in turn
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

// BenchmarkOverloadDrawCost: the overload draw's share of the cheapest
// whole request (a sold-out refusal through the app's handler), measured
// interleaved in one run: the draw while the path is calm (an atomic add)
// and while overloaded (each user's HMAC ticket for the second), beside
// the ticket computed with a fresh HMAC each time (hmac.New per call, as
// before the pool). Reported as draw_<state>_vs_request (0.05: 5% of a
// request).
func BenchmarkOverloadDrawCost(b *testing.B) {
	h := MustHarness(b, func(c *config.Config) { c.GlobalRPS, c.PerAddrRPS, c.PerUserRPS = 1e9, 1e9, 1e9 })
	tok := h.MustToken(testenv.UniqueUser(), "")
	sale := h.MustWarmSale(1)
	require.Equal(b, 202, h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), ""), "draw-bench-1").Status)
	time.Sleep(1500 * time.Millisecond) // the sold-out mark reaches the cache
	request := &gateCase{name: "soldout", status: 410,
		path: "/api/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/reservations", body: []byte(`{"request_id":"draw-bench-2"}`)}
	calm := ratelimit.NewDraw([]byte("bench key"), 1e9)
	overloaded := ratelimit.NewDraw([]byte("bench key"), 1)
	// The last second asked twice the rate: overloaded from now on (every
	// later second asks more than the rate of 1 too).
	last := time.Now().Add(-time.Second)
	overloaded.Admit(1, last)
	overloaded.Admit(2, last)
	handler := h.app.Handler()
	var fctx fasthttp.RequestCtx
	unpooledKey := []byte("bench key")
	unpooled := func(userID, sec int64) float64 {
		mac := hmac.New(sha256.New, unpooledKey)
		mac.Write([]byte(strconv.FormatInt(userID, 10) + "|" + strconv.FormatInt(sec, 10)))
		return float64(binary.BigEndian.Uint64(mac.Sum(nil))>>11) / (1 << 53)
	}
	var calmSpent, overSpent, unpooledSpent time.Duration
	admitted := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		request.serve(b, handler, &fctx, tok)
		start := time.Now()
		calm.Admit(int64(i), start)
		now := time.Now()
		calmSpent += now.Sub(start)
		if overloaded.Admit(int64(i), now) {
			admitted++
		}
		then := time.Now()
		overSpent += then.Sub(now)
		if unpooled(int64(i), then.Unix()) < 0 {
			b.Fatal("a ticket below 0")
		}
		unpooledSpent += time.Since(then)
	}
	b.StopTimer()
	b.ReportMetric(float64(calmSpent)/float64(request.spent), "draw_calm_vs_request")
	b.ReportMetric(float64(overSpent)/float64(request.spent), "draw_overloaded_vs_request")
	b.ReportMetric(float64(unpooledSpent)/float64(request.spent), "ticket_unpooled_vs_request")
	b.ReportMetric(float64(request.spent.Nanoseconds())/float64(b.N), "request_ns")
	b.ReportMetric(float64(admitted)/float64(b.N), "overloaded_admitted_share")
}
