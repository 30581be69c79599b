package auth

import (
	"encoding/base64"
	"encoding/json"
	"maps"
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
// library accepts, with the same principal and exp, and refuses only what
// the library refuses; whatever it leaves undecided the library decides.
func TestVerifyOwnQuickDecidesOnlyAsTheLibrary(t *testing.T) {
	secret := []byte("quick-secret-of-thirty-two-bytes")
	key := newOwnKey(secret)
	for name, c := range quickCases(t, secret, time.Now()) {
		t.Run(name, func(t *testing.T) {
			qp, qexp, v := key.verifyQuick(c.raw, time.Now())
			lp, lexp, lerr := verifyByLibrary(secret, c.raw)
			require.Equal(t, c.want, v, "quick path")
			switch v {
			case accepted:
				require.NoError(t, lerr, "accepted by the quick path, refused by the library")
				require.Equal(t, lp, qp)
				require.True(t, lexp.Equal(qexp))
			case refused:
				require.Error(t, lerr, "refused by the quick path, accepted by the library")
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

// quickCase is a token and the quick path's verdict on it.
type quickCase struct {
	raw  string
	want verdict
}

// quickCases are own tokens, near misses and others, signed with secret.
func quickCases(t *testing.T, secret []byte, now time.Time) map[string]quickCase {
	exp := now.Add(time.Hour).Unix()
	mintAs := func(user int64, role string) string {
		tok, err := authtoken.Mint(secret, user, role, time.Hour)
		require.NoError(t, err)
		return tok
	}
	own := mintAs(42, authtoken.RoleUser)
	other, err := authtoken.Mint([]byte("another-secret"), 42, "", time.Hour)
	require.NoError(t, err)
	header, rest, _ := strings.Cut(own, ".")
	payload, sig, _ := strings.Cut(rest, ".")
	// The library's decoder stops after the object; the quick path's
	// Unmarshal refuses what follows it and leaves the token to the library.
	trailing := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"42","exp":` + strconv.FormatInt(exp, 10) + `}x`))
	claims := func(json string) string {
		return resign(t, secret, header+"."+base64.RawURLEncoding.EncodeToString([]byte(json)))
	}
	expText := strconv.FormatInt(exp, 10)

	return map[string]quickCase{
		"own user token":          {own, accepted},
		"own admin token":         {mintAs(7, authtoken.RoleAdmin), accepted},
		"own token without role":  {mintAs(7, ""), accepted},
		"largest canonical id":    {mintAs(999_999_999_999_999_999, ""), accepted},
		"id of 19 digits":         {mintAs(1_000_000_000_000_000_000, ""), accepted},
		"another key":             {other, refused},
		"tampered signature":      {tamper(own), refused},
		"a fourth segment":        {own + ".x", undecided},
		"padded signature":        {header + "." + payload + "." + sig + "=", undecided},
		"signature too short":     {header + "." + payload + "." + sig[:42], undecided},
		"expired":                 {signed(t, secret, jwt.MapClaims{"sub": "42", "exp": now.Add(-time.Minute).Unix()}), undecided},
		"no exp":                  {signed(t, secret, jwt.MapClaims{"sub": "42"}), undecided},
		"exp a string":            {signed(t, secret, jwt.MapClaims{"sub": "42", "exp": "9999999999"}), undecided},
		"exp with a fraction":     {claims(`{"exp":` + expText + `.5,"sub":"42"}`), accepted},
		"exp with leading zero":   {claims(`{"exp":0` + expText + `,"sub":"42"}`), undecided},
		"exp of 16 digits":        {claims(`{"exp":1000000000000000,"sub":"42"}`), accepted},
		"not valid before":        {signed(t, secret, jwt.MapClaims{"sub": "42", "exp": exp, "nbf": now.Add(time.Minute).Unix()}), undecided},
		"valid since":             {signed(t, secret, jwt.MapClaims{"sub": "42", "exp": exp, "nbf": now.Add(-time.Minute).Unix()}), accepted},
		"sub a number":            {signed(t, secret, jwt.MapClaims{"sub": 42, "exp": exp}), undecided},
		"sub not an id":           {signed(t, secret, jwt.MapClaims{"sub": "0", "exp": exp}), undecided},
		"sub with leading zero":   {claims(`{"exp":` + expText + `,"sub":"042"}`), undecided},
		"sub escaped":             {claims(`{"exp":` + expText + `,"sub":"\u0034\u0032"}`), accepted},
		"sub twice":               {claims(`{"exp":` + expText + `,"sub":"42","sub":"43"}`), accepted},
		"role in capitals":        {claims(`{"exp":` + expText + `,"role":"ADMIN","sub":"42"}`), undecided},
		"spaces":                  {claims(`{"exp": ` + expText + `, "sub": "42"}`), accepted},
		"SUB in capitals":         {signed(t, secret, jwt.MapClaims{"SUB": "42", "exp": exp}), undecided},
		"unknown role":            {signed(t, secret, jwt.MapClaims{"sub": "42", "exp": exp, "role": "root"}), undecided},
		"trailing claim data":     {resign(t, secret, header+"."+trailing), undecided},
		"trailing after object":   {claims(`{"exp":` + expText + `,"sub":"42"} `), accepted},
		"alg none":                {"eyJhbGciOiJub25lIn0.eyJzdWIiOiI0MiJ9.", undecided},
		"claims not base64":       {resign(t, secret, header+".e30*"), undecided},
		"claims over the scratch": {claims(`{"exp":` + expText + `,"sub":"42","pad":"` + strings.Repeat("x", quickMax) + `"}`), undecided},
	}
}

// The canonical reading gives what the general one gives, for the shapes
// authtoken mints and the near misses it must leave to it.
func TestCanonicalClaimsReadAsJSON(t *testing.T) {
	for _, body := range []string{
		`{"exp":1765040000,"sub":"42"}`,
		`{"exp":1765040000,"role":"user","sub":"42"}`,
		`{"exp":1765040000,"role":"admin","sub":"7"}`,
		`{"exp":999999999999999,"sub":"999999999999999999"}`,
	} {
		id, admin, exp, ok := canonicalClaims([]byte(body))
		require.True(t, ok, body)
		var claims jwt.MapClaims
		require.NoError(t, json.Unmarshal([]byte(body), &claims))
		p, jexp, err := principalOf(claims, "sub", roleOfOwnToken)
		require.NoError(t, err)
		require.Equal(t, Principal{UserID: id, Admin: admin}, p, body)
		require.True(t, jexp.Equal(time.Unix(exp, 0)), body)
	}
	for _, body := range []string{
		`{"exp":1765040000,"sub":"42"} `, `{"exp":1765040000,"sub":"42"`, `{"exp":1765040000,"sub":42}`,
		`{"exp":1765040000,"role":"root","sub":"42"}`, `{"exp":1765040000.0,"sub":"42"}`, `{"exp":-1,"sub":"42"}`,
		`{"exp":1765040000,"sub":"4\u0032"}`, `{"exp":1765040000,"sub":""}`, `{"sub":"42","exp":1765040000}`,
		`{"exp":1000000000000000,"sub":"42"}`, `{"exp":1765040000,"sub":"1000000000000000000"}`,
	} {
		_, _, _, ok := canonicalClaims([]byte(body))
		require.False(t, ok, body)
	}
}

// resign appends the HS256 signature of signing (header.claims) under secret.
func resign(t *testing.T, secret []byte, signing string) string {
	t.Helper()
	sig, err := jwt.SigningMethodHS256.Sign(signing, secret)
	require.NoError(t, err)
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// BenchmarkVerifyOwnQuick compares, in one run, a verifier's key (the
// quick path) with the library's parse on distinct own tokens, as a flash
// sale's first requests bring them; cpu-ns/op is the process's CPU time
// per call.
func BenchmarkVerifyOwnQuick(b *testing.B) {
	secret := []byte("bench-secret-of-thirty-two-bytes")
	toks := make([]string, 1<<12)
	for i := range toks {
		toks[i] = mint(b, secret, int64(i+1)<<20, time.Hour)
	}
	key := newOwnKey(secret)
	for _, bc := range []struct {
		name   string
		verify func([]byte, string) (Principal, time.Time, error)
	}{
		{"quick", func(_ []byte, raw string) (Principal, time.Time, error) { return key.verify(raw, time.Now()) }},
		{"library", verifyByLibrary},
	} {
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

// keys.check leaves out the own keys only for tokens they refuse: a header
// naming another alg, or one the library cannot read, read as it does.
func TestCheckSkipsOwnKeysOnlyForWhatTheyRefuse(t *testing.T) {
	secret := []byte("quick-secret-of-thirty-two-bytes")
	now := time.Now()
	claims := base64.RawURLEncoding.EncodeToString([]byte(`{"exp":` + strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + `,"sub":"42"}`))
	withHeader := func(h string) string {
		return resign(t, secret, base64.RawURLEncoding.EncodeToString([]byte(h))+"."+claims)
	}
	accepted := map[string]string{
		"keys reordered":        withHeader(`{"typ":"JWT","alg":"HS256"}`),
		"alg twice, HS256 last": withHeader(`{"alg":"RS256","alg":"HS256"}`),
		"ALG in capitals too":   withHeader(`{"alg":"HS256","ALG":"RS256"}`),
		"with a kid":            withHeader(`{"alg":"HS256","kid":"k"}`),
	}
	toks := map[string]string{
		"alg twice, RS256 last": withHeader(`{"alg":"HS256","alg":"RS256"}`),
		"ALG only":              withHeader(`{"ALG":"HS256"}`),
		"alg in lower case":     withHeader(`{"alg":"hs256"}`),
		"alg a number":          withHeader(`{"alg":256}`),
		"alg none":              withHeader(`{"alg":"none"}`),
		"header not JSON":       withHeader(`alg=HS256`),
		"header not base64":     resign(t, secret, "e30*."+claims),
		"one segment":           "eyJhbGciOiJIUzI1NiJ9",
		"empty":                 "",
	}
	maps.Copy(toks, accepted)
	for name, c := range quickCases(t, secret, now) {
		toks["quick case: "+name] = c.raw
	}
	k := Secrets{User: [][]byte{secret}}.keys()
	for name, raw := range toks {
		op, oexp, oerr := k.checkOwn(raw, now)
		p, exp, err := k.check(raw, now)
		require.Equal(t, oerr == nil, err == nil, name)
		require.Equal(t, op, p, name)
		require.True(t, oexp.Equal(exp), name)
		if _, ok := accepted[name]; ok {
			require.NoError(t, err, name)
		}
	}
}
