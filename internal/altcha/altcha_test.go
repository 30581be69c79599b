package altcha

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var key = []byte("crosscheck-hmac-key")

func TestRoundTripAndEveryTamperingFails(t *testing.T) {
	now := time.Now()
	c, err := NewChallenge(key, 5000, now.Add(time.Minute), map[string]string{"sale": "7", "user": "42"})
	require.NoError(t, err)
	require.Equal(t, Algorithm, c.Algorithm)
	require.True(t, strings.HasSuffix(c.Salt, "&"), "the salt ends with the splice guard")
	sol, err := Solve(c)
	require.NoError(t, err)
	payload, err := sol.Payload()
	require.NoError(t, err)
	params, got, err := Verify(key, payload, now)
	require.NoError(t, err)
	require.Equal(t, "7", params.Get("sale"))
	require.Equal(t, "42", params.Get("user"))
	require.Equal(t, c.Challenge, got.Challenge)

	tamper := func(f func(*Solution)) string {
		s := sol
		f(&s)
		p, err := s.Payload()
		require.NoError(t, err)
		return p
	}
	for name, tc := range map[string]struct {
		payload string
		key     []byte
		now     time.Time
		want    error
	}{
		"number":         {tamper(func(s *Solution) { s.Number++ }), key, now, ErrMismatch},
		"signature":      {tamper(func(s *Solution) { s.Signature = strings.Repeat("0", 64) }), key, now, ErrMismatch},
		"user in salt":   {tamper(func(s *Solution) { s.Salt = strings.Replace(s.Salt, "user=42", "user=43", 1) }), key, now, ErrMismatch},
		"wrong key":      {payload, []byte("another key"), now, ErrMismatch},
		"expired":        {payload, key, now.Add(2 * time.Minute), ErrExpired},
		"not base64":     {"%%%", key, now, ErrMalformed},
		"not JSON":       {base64.StdEncoding.EncodeToString([]byte("[1")), key, now, ErrMalformed},
		"algorithm":      {tamper(func(s *Solution) { s.Algorithm = "SHA-1" }), key, now, ErrMalformed},
		"bad expires":    {tamper(func(s *Solution) { s.Salt = "abc?expires=soon&" }), key, now, ErrMalformed},
		"negative":       {tamper(func(s *Solution) { s.Number = -1 }), key, now, ErrMalformed},
		"challenge text": {tamper(func(s *Solution) { s.Challenge = strings.ToUpper(s.Challenge) }), key, now, ErrMismatch},
	} {
		_, _, err := Verify(tc.key, tc.payload, tc.now)
		require.ErrorIs(t, err, tc.want, name)
	}
	for _, bad := range []int64{0, -1, MaxNumber + 1} {
		_, err := NewChallenge(key, bad, now, nil)
		require.Error(t, err, bad)
	}
}

// The reference library (altcha-lib, npm) and this package agree both
// ways: each solves and verifies the other's challenges.
func TestAgreesWithTheReferenceLibrary(t *testing.T) {
	expires := time.Now().Add(5 * time.Minute)
	// Go makes, the library solves and verifies, Go verifies its solution.
	c, err := NewChallenge(key, 20000, expires, map[string]string{"sale": "3", "user": "9"})
	require.NoError(t, err)
	var solved struct{ Payload string }
	node(t, map[string]any{"op": "solve", "challenge": c}, &solved)
	var verified struct{ OK bool }
	node(t, map[string]any{"op": "verify", "key": string(key), "payload": solved.Payload}, &verified)
	require.True(t, verified.OK, "altcha-lib verifies its solution of a Go challenge")
	params, _, err := Verify(key, solved.Payload, time.Now())
	require.NoError(t, err)
	require.Equal(t, "9", params.Get("user"))

	// The library makes, Go solves and verifies, the library verifies Go's.
	var lib Challenge
	node(t, map[string]any{"op": "create", "key": string(key), "maxnumber": 20000, "expires": expires.Unix(),
		"params": map[string]string{"sale": "3", "user": "9"}}, &lib)
	sol, err := Solve(lib)
	require.NoError(t, err)
	payload, err := sol.Payload()
	require.NoError(t, err)
	params, _, err = Verify(key, payload, time.Now())
	require.NoError(t, err)
	require.Equal(t, "3", params.Get("sale"))
	require.Equal(t, strconv.FormatInt(expires.Unix(), 10), params.Get("expires"))
	node(t, map[string]any{"op": "verify", "key": string(key), "payload": payload}, &verified)
	require.True(t, verified.OK, "altcha-lib verifies Go's solution")

	// And both refuse a tampered one.
	sol.Number++
	payload, err = sol.Payload()
	require.NoError(t, err)
	node(t, map[string]any{"op": "verify", "key": string(key), "payload": payload}, &verified)
	require.False(t, verified.OK)
	_, _, err = Verify(key, payload, time.Now())
	require.ErrorIs(t, err, ErrMismatch)
}

// node runs testdata/node/crosscheck.mjs with req on stdin.
func node(t *testing.T, req, out any) {
	t.Helper()
	dir := filepath.Join("testdata", "node")
	_, err := os.Stat(filepath.Join(dir, "node_modules", "altcha-lib"))
	require.NoError(t, err, "altcha-lib is not installed: run `npm ci --prefix internal/altcha/testdata/node` (go tool task test does)")
	bin, err := exec.LookPath("node")
	require.NoError(t, err, "node is not installed (go tool task test installs Debian's nodejs)")
	in, err := json.Marshal(req)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "crosscheck.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	require.NoError(t, json.Unmarshal(b, out), string(b))
}
