package auth

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/authtoken"
)

// signed signs claims HS256 with secret, the library's way.
func signed(t *testing.T, secret []byte, claims jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	require.NoError(t, err)
	return tok
}

// The quick path takes the project's own tokens, and accepts only what the
// library accepts, with the same principal and exp; whatever it declines
// the library decides.
func TestVerifyOwnQuickAcceptsOnlyWhatTheLibraryAccepts(t *testing.T) {
	secret := []byte("quick-secret-of-thirty-two-bytes")
	now := time.Now()
	exp := now.Add(time.Hour).Unix()
	own, err := authtoken.Mint(secret, 42, authtoken.RoleUser, time.Hour)
	require.NoError(t, err)
	admin, err := authtoken.Mint(secret, 7, authtoken.RoleAdmin, time.Hour)
	require.NoError(t, err)
	other, err := authtoken.Mint([]byte("another-secret"), 42, "", time.Hour)
	require.NoError(t, err)
	header, rest, _ := strings.Cut(own, ".")
	payload, sig, _ := strings.Cut(rest, ".")
	// The library's decoder stops after the object; the quick path's
	// Unmarshal refuses what follows it and leaves the token to the library.
	trailing := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"42","exp":` + strconv.FormatInt(exp, 10) + `}x`))

	cases := map[string]struct {
		raw   string
		quick bool // the quick path decides it
	}{
		"own user token":      {own, true},
		"own admin token":     {admin, true},
		"another key":         {other, false},
		"tampered signature":  {tamper(own), false},
		"a fourth segment":    {own + ".x", false},
		"padded signature":    {header + "." + payload + "." + sig + "=", false},
		"expired":             {signed(t, secret, jwt.MapClaims{"sub": "42", "exp": now.Add(-time.Minute).Unix()}), false},
		"no exp":              {signed(t, secret, jwt.MapClaims{"sub": "42"}), false},
		"exp a string":        {signed(t, secret, jwt.MapClaims{"sub": "42", "exp": "9999999999"}), false},
		"not valid before":    {signed(t, secret, jwt.MapClaims{"sub": "42", "exp": exp, "nbf": now.Add(time.Minute).Unix()}), false},
		"valid since":         {signed(t, secret, jwt.MapClaims{"sub": "42", "exp": exp, "nbf": now.Add(-time.Minute).Unix()}), true},
		"sub a number":        {signed(t, secret, jwt.MapClaims{"sub": 42, "exp": exp}), false},
		"sub not an id":       {signed(t, secret, jwt.MapClaims{"sub": "0", "exp": exp}), false},
		"SUB in capitals":     {signed(t, secret, jwt.MapClaims{"SUB": "42", "exp": exp}), false},
		"unknown role":        {signed(t, secret, jwt.MapClaims{"sub": "42", "exp": exp, "role": "root"}), false},
		"trailing claim data": {resign(t, secret, header+"."+trailing), false},
		"alg none":            {"eyJhbGciOiJub25lIn0.eyJzdWIiOiI0MiJ9.", false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			qp, qexp, ok := verifyOwnQuick(secret, c.raw, time.Now())
			lp, lexp, lerr := verifyByLibrary(secret, c.raw)
			require.Equal(t, c.quick, ok, "quick path")
			if ok {
				require.NoError(t, lerr, "accepted by the quick path, refused by the library")
				require.Equal(t, lp, qp)
				require.True(t, lexp.Equal(qexp))
			}
			p, vexp, err := verifyToken(secret, c.raw)
			require.Equal(t, lerr == nil, err == nil, "verifyToken decides as the library")
			if err == nil {
				require.Equal(t, lp, p)
				require.True(t, lexp.Equal(vexp))
			}
		})
	}
}

// resign appends the HS256 signature of signing (header.claims) under secret.
func resign(t *testing.T, secret []byte, signing string) string {
	t.Helper()
	sig, err := jwt.SigningMethodHS256.Sign(signing, secret)
	require.NoError(t, err)
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// BenchmarkVerifyOwnQuick compares, in one run, verifyToken (the quick
// path) with the library's parse on distinct own tokens, as a flash
// sale's first requests bring them; cpu-ns/op is the process's CPU time
// per call.
func BenchmarkVerifyOwnQuick(b *testing.B) {
	secret := []byte("bench-secret-of-thirty-two-bytes")
	toks := make([]string, 1<<12)
	for i := range toks {
		toks[i] = mint(b, secret, int64(i+1)<<20, time.Hour)
	}
	for _, bc := range []struct {
		name   string
		verify func([]byte, string) (Principal, time.Time, error)
	}{{"quick", verifyToken}, {"library", verifyByLibrary}} {
		b.Run(bc.name, func(b *testing.B) {
			i := 0
			b.ReportAllocs()
			cpu0 := processCPU(b)
			for b.Loop() {
				if _, _, err := bc.verify(secret, toks[i%len(toks)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
