package api

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/paysig"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// TestSecretRotation: during a rotation the JWT and webhook verifiers accept
// the current and the previous secret, and nothing else.
func TestSecretRotation(t *testing.T) {
	oldJWT, newJWT := []byte(strings.Repeat("o", 32)), []byte(strings.Repeat("n", 32))
	oldPay, newPay := []byte(strings.Repeat("p", 32)), []byte(strings.Repeat("q", 32))
	h := MustHarness(t, func(c *config.Config) {
		c.JWTSecret, c.JWTSecretPrevious = newJWT, oldJWT
		c.PaymentSecret, c.PaymentSecretPrevious = newPay, oldPay
	})
	user := testenv.UniqueUser()
	for name, tc := range map[string]struct {
		secret []byte
		status int
	}{
		"current":  {newJWT, 200},
		"previous": {oldJWT, 200},
		"another":  {[]byte(strings.Repeat("x", 32)), 401},
	} {
		tok, err := authtoken.Mint(tc.secret, user, authtoken.RoleUser, time.Hour)
		require.NoError(t, err)
		r := h.do("GET", "/api/v1/me/reservations", tok, "")
		require.Equal(t, tc.status, r.Status, "%s: %s", name, r.Body)
	}

	// A well-formed signature under either payment secret passes; the
	// token is of no reservation, so the answer after the signature is 404.
	sale := testenv.MustSale(t, h.st, 1)
	body := payBody(domain.DeriveToken(h.cfg.TokenKey, sale.ID, user, "rotation-x"), "prov-rot", 1)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	for name, tc := range map[string]struct {
		secret []byte
		status int
	}{
		"current":  {newPay, http.StatusNotFound},
		"previous": {oldPay, http.StatusNotFound},
		"another":  {[]byte(strings.Repeat("y", 32)), http.StatusUnauthorized},
	} {
		r := h.webhook(body, ts, paysig.Sign(tc.secret, ts, []byte(body)))
		require.Equal(t, tc.status, r.Status, "%s: %s", name, r.Body)
	}

	// Without a previous secret, the old one is refused.
	single := MustHarness(t, func(c *config.Config) { c.JWTSecret = newJWT })
	tok, err := authtoken.Mint(oldJWT, user, authtoken.RoleUser, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 401, single.do("GET", "/api/v1/me/reservations", tok, "").Status)
}
