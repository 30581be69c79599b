package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/altcha"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// withChallenge makes a sale require a challenge solved at difficulty.
func withChallenge(difficulty int64) testenv.SaleOption {
	return func(s *domain.Sale) { s.ChallengeDifficulty = difficulty }
}

// mustPass fetches a challenge for user, solves it and redeems it.
func (h *harness) mustPass(saleID int64, token string) (pass, payload string) {
	h.tb.Helper()
	path := "/api/v1/sales/" + strconv.FormatInt(saleID, 10) + "/challenge"
	r := h.do(http.MethodGet, path, token, "")
	require.Equal(h.tb, http.StatusOK, r.Status, string(r.Body))
	var ch altcha.Challenge
	require.NoError(h.tb, json.Unmarshal(r.Body, &ch))
	sol, err := altcha.Solve(ch)
	require.NoError(h.tb, err)
	payload, err = sol.Payload()
	require.NoError(h.tb, err)
	r = h.do(http.MethodPost, path, token, `{"payload":"`+payload+`"}`)
	require.Equal(h.tb, http.StatusOK, r.Status, string(r.Body))
	v := r.json(h.tb)
	require.NotEmpty(h.tb, v["expires_at"])
	return v["pass"].(string), payload
}

func (h *harness) reserveWithPass(saleID int64, token, requestID, pass string) response {
	h.tb.Helper()
	return h.do(http.MethodPost, "/api/v1/sales/"+strconv.FormatInt(saleID, 10)+"/reservations", token,
		`{"request_id":"`+requestID+`","pass":"`+pass+`"}`)
}

// A sale with a challenge takes a reservation only with a pass of the
// same user and sale; a solution is redeemed once; an exempted user
// needs none.
func TestChallengeGatesReservations(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(10, withChallenge(2000))
	other := h.MustWarmSale(10, withChallenge(2000))
	open := h.MustWarmSale(10)
	u1, u2, u3 := testenv.UniqueUser(), testenv.UniqueUser(), testenv.UniqueUser()
	t1, t2, t3 := h.MustToken(u1, ""), h.MustToken(u2, ""), h.MustToken(u3, "")

	v := h.do(http.MethodGet, "/api/v1/sales/"+strconv.FormatInt(sale.ID, 10), "", "").json(t)
	require.EqualValues(t, 2000, v["challenge_difficulty"])
	require.Equal(t, false, v["restricted"])
	require.Equal(t, http.StatusNotFound, h.do(http.MethodGet, "/api/v1/sales/"+strconv.FormatInt(open.ID, 10)+"/challenge", t1, "").Status)

	r := h.reserve(sale.ID, t1, "gate-req-1")
	require.Equal(t, http.StatusForbidden, r.Status, string(r.Body))
	require.Equal(t, domain.EChallengeRequired, r.errCode(t))
	require.Equal(t, int64(10), h.redisInt(redisgateway.SaleKeys(sale.ID).Stock), "a refusal changes nothing")

	pass, payload := h.mustPass(sale.ID, t1)
	for name, bad := range map[string]string{
		"another user's":  pass,
		"tampered":        strings.Replace(pass, "."+strconv.FormatInt(u1, 10)+".", "."+strconv.FormatInt(u2, 10)+".", 1),
		"not a pass":      "v1.1.2.3.abc",
		"another sale's":  h.freshPass(other.ID, t2),
		"empty signature": pass[:strings.LastIndexByte(pass, '.')+1],
	} {
		r := h.reserveWithPass(sale.ID, t2, "gate-req-2", bad)
		require.Equal(t, http.StatusForbidden, r.Status, name)
		require.Equal(t, domain.EChallengeRequired, r.errCode(t), name)
	}
	r = h.reserveWithPass(sale.ID, t1, "gate-req-1", pass)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))

	path := "/api/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/challenge"
	r = h.do(http.MethodPost, path, t1, `{"payload":"`+payload+`"}`)
	require.Equal(t, http.StatusBadRequest, r.Status, "a solution is redeemed once")
	require.Equal(t, domain.EChallengeFailed, r.errCode(t))
	r = h.do(http.MethodPost, path, t2, `{"payload":"`+payload+`"}`)
	require.Equal(t, http.StatusBadRequest, r.Status, "another user's solution")
	require.Equal(t, domain.EChallengeFailed, r.errCode(t))
	r = h.do(http.MethodPost, path, t2, `{"payload":"bm90IGpzb24="}`)
	require.Equal(t, domain.EChallengeFailed, r.errCode(t))
	r = h.do(http.MethodPost, path, t2, `{"payload":1}`)
	require.Equal(t, domain.EInvalid, r.errCode(t))

	// An exempted user reserves without a pass, until the exemption ends.
	exemption := "/admin/v1/challenge-exemptions/" + strconv.FormatInt(u3, 10)
	require.Equal(t, http.StatusNoContent, h.do(http.MethodPut, exemption, h.admin, "").Status)
	require.Equal(t, http.StatusForbidden, h.do(http.MethodPut, exemption, t3, "").Status)
	require.Equal(t, http.StatusAccepted, h.reserve(sale.ID, t3, "gate-req-3").Status)
	require.Equal(t, http.StatusNoContent, h.do(http.MethodDelete, exemption, h.admin, "").Status)
	r = h.reserve(other.ID, t3, "gate-req-4")
	require.Equal(t, domain.EChallengeRequired, r.errCode(t))
	require.Equal(t, int64(8), h.redisInt(redisgateway.SaleKeys(sale.ID).Stock))
}

// freshPass is a valid pass of a sale for the user of token.
func (h *harness) freshPass(saleID int64, token string) string {
	pass, _ := h.mustPass(saleID, token)
	return pass
}

// A restricted sale takes reservations of listed users only; listing is
// idempotent; lifting the restriction opens the sale; 100,000 ids fit in
// one call on the admin listener.
func TestAllowlistRestrictsASale(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) { c.AdminAddr = "127.0.0.1:0" })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = h.server.ServeAdmin(ln) }()
	t.Cleanup(func() { _ = h.server.Admin.Shutdown() })
	admin := h.MustToken(1, authtoken.RoleAdmin)
	sale := testenv.MustSale(t, h.st, 10)
	adminBase := "http://" + ln.Addr().String() + "/admin/v1/sales/" + strconv.FormatInt(sale.ID, 10)
	code, v := post(t, adminBase+"/warmup", admin, "")
	require.Equal(t, http.StatusOK, code, v)
	t.Cleanup(func() {
		_ = h.st.MarkFinished(context.Background(), sale.ID)
		_ = h.rdb.Del(context.Background(), redisgateway.SaleKeys(sale.ID).All()...).Err()
	})
	listed, outsider := testenv.UniqueUser(), testenv.UniqueUser()
	path := adminBase + "/allowlist"

	body := fmt.Sprintf(`{"add":[%d]}`, listed)
	for range 2 {
		code, v := post(t, path, admin, body)
		require.Equal(t, http.StatusOK, code, v)
		require.Equal(t, true, v["restricted"])
		require.EqualValues(t, 1, v["listed"])
	}
	r := h.reserve(sale.ID, h.MustToken(outsider, ""), "allow-req-1")
	require.Equal(t, http.StatusForbidden, r.Status, string(r.Body))
	require.Equal(t, domain.ENotEligible, r.errCode(t))
	require.Equal(t, int64(10), h.redisInt(redisgateway.SaleKeys(sale.ID).Stock))
	require.Equal(t, http.StatusAccepted, h.reserve(sale.ID, h.MustToken(listed, ""), "allow-req-2").Status)

	ids := make([]string, 100_000)
	base := testenv.UniqueUser() * 1_000_000
	for i := range ids {
		ids[i] = strconv.FormatInt(base+int64(i), 10)
	}
	code, v = post(t, path, admin, `{"add":[`+strings.Join(ids, ",")+`]}`)
	require.Equal(t, http.StatusOK, code, v)
	require.EqualValues(t, 100_001, v["listed"])
	require.Equal(t, http.StatusAccepted, h.reserve(sale.ID, h.MustToken(base+99_999, ""), "allow-req-3").Status)

	code, v = post(t, path, admin, `{"add":[-1]}`)
	require.Equal(t, http.StatusBadRequest, code, v)
	code, v = post(t, path, admin, fmt.Sprintf(`{"remove":[%d],"restricted":false}`, base))
	require.Equal(t, http.StatusOK, code, v)
	require.Equal(t, false, v["restricted"])
	require.EqualValues(t, 100_000, v["listed"])
	require.Equal(t, http.StatusAccepted, h.reserve(sale.ID, h.MustToken(outsider, ""), "allow-req-4").Status)
	sv := h.do(http.MethodGet, "/api/v1/sales/"+strconv.FormatInt(sale.ID, 10), "", "").json(t)
	require.Equal(t, false, sv["restricted"])
}

// post sends a raw JSON body to a full URL.
func post(tb testing.TB, url, token, body string) (int, map[string]any) {
	tb.Helper()
	var b any
	if body != "" {
		b = json.RawMessage(body)
	}
	code, v, err := testenv.DoWithToken(http.MethodPost, url, token, b)
	require.NoError(tb, err)
	return code, v
}

// One open appeal per user and sale; operators list them oldest first and
// resolve them, the action taking effect at once.
func TestAppeals(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(10, withChallenge(2000))
	user := testenv.UniqueUser()
	tok := h.MustToken(user, "")
	require.Equal(t, http.StatusNoContent, h.do(http.MethodPut, "/admin/v1/blacklist/"+strconv.FormatInt(user, 10), h.admin, "").Status)
	r := h.reserveWithPass(sale.ID, tok, "appeal-r-1", h.freshPass(sale.ID, tok))
	require.Equal(t, domain.EBlacklisted, r.errCode(t), "the blacklist is checked after the gate")

	body := fmt.Sprintf(`{"sale_id":%d,"reason":"blacklisted","message":"I am a real buyer"}`, sale.ID)
	r = h.do(http.MethodPost, "/api/v1/appeals", tok, body)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	v := r.json(t)
	require.Equal(t, "open", v["state"])
	id := int64(v["appeal_id"].(float64))
	r = h.do(http.MethodPost, "/api/v1/appeals", tok, body)
	require.Equal(t, http.StatusConflict, r.Status)
	require.Equal(t, domain.EAppealExists, r.errCode(t))
	for _, bad := range []string{
		fmt.Sprintf(`{"sale_id":%d,"reason":"other","message":"x"}`, sale.ID),
		fmt.Sprintf(`{"sale_id":%d,"reason":"challenge","message":""}`, sale.ID),
		fmt.Sprintf(`{"sale_id":%d,"reason":"challenge","message":"%s"}`, sale.ID, strings.Repeat("é", 501)),
		`{"reason":"challenge","message":"x"}`,
	} {
		require.Equal(t, domain.EInvalid, h.do(http.MethodPost, "/api/v1/appeals", tok, bad).errCode(t), bad)
	}

	list := h.do(http.MethodGet, "/admin/v1/appeals?state=open", h.admin, "")
	require.Equal(t, http.StatusOK, list.Status)
	require.Contains(t, string(list.Body), fmt.Sprintf(`"appeal_id":%d`, id))
	require.Equal(t, domain.EInvalid, h.do(http.MethodGet, "/admin/v1/appeals?state=maybe", h.admin, "").errCode(t))

	resolve := "/admin/v1/appeals/" + strconv.FormatInt(id, 10) + "/resolve"
	require.Equal(t, domain.EInvalid, h.do(http.MethodPost, resolve, h.admin, `{"action":"pardon"}`).errCode(t))
	r = h.do(http.MethodPost, resolve, h.admin, `{"action":"unblacklist"}`)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Equal(t, "resolved", r.json(t)["state"])
	require.Equal(t, http.StatusConflict, h.do(http.MethodPost, resolve, h.admin, `{"action":"reject"}`).Status)
	pass, _ := h.mustPass(sale.ID, tok)
	require.Equal(t, http.StatusAccepted, h.reserveWithPass(sale.ID, tok, "appeal-r-2", pass).Status, "unblacklisted at once")

	// A closed appeal lets the user file another; "exempt" lifts the
	// challenge for them.
	body = fmt.Sprintf(`{"sale_id":%d,"reason":"challenge","message":"screen reader user"}`, sale.ID)
	r = h.do(http.MethodPost, "/api/v1/appeals", tok, body)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	second := int64(r.json(t)["appeal_id"].(float64))
	r = h.do(http.MethodPost, "/admin/v1/appeals/"+strconv.FormatInt(second, 10)+"/resolve", h.admin, `{"action":"exempt"}`)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	other := h.MustWarmSale(10, withChallenge(2000))
	require.Equal(t, http.StatusAccepted, h.reserve(other.ID, tok, "appeal-r-3").Status, "exempted at once")
	require.Equal(t, http.StatusNotFound, h.do(http.MethodPost, "/admin/v1/appeals/999999999999/resolve", h.admin, `{"action":"reject"}`).Status)
}
