package api

import (
	"crypto/rand"
	"crypto/rsa"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
)

func mustRSAKey(tb testing.TB) *rsa.PrivateKey {
	tb.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(tb, err)
	return k
}

// FuzzReservationRequest: whatever the body, the parser either accepts a
// valid request id or answers invalid_request; it never panics.
func FuzzReservationRequest(f *testing.F) {
	for _, s := range []string{`{"request_id":"abcdefgh"}`, `{"request_id":"abcdefgh","quantity":1}`, `{"quantity":2}`, `[]`, ``, `{"request_id":"a"}{}`,
		`{"REQUEST_ID":"abcdefgh"}`, `{"request_id":"abcdefgh","request_id":"abcdefgi"}`, `{"request_id":"abcdefgh","Quantity":1}`,
		`{"request_id":"abcdefgh","pass":"v1.2.3.4.abc_-"}`, `{"request_id":"abcdefgh","quantity":1,"pass":"v1.x"}`,
		`{"request_id":"abcdefgh","pass":"a\u0022b"}`, `{"request_id":"abcdefgh","pass":""}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rid, _, err := ParseReservationRequest(body)
		if err != nil {
			if domain.ErrorCode(err) != domain.EInvalid {
				t.Fatalf("error code %q for %q", domain.ErrorCode(err), body)
			}
			return
		}
		if !domain.ValidRequestID(rid) {
			t.Fatalf("accepted invalid request id %q from %q", rid, body)
		}
		// The fast path never decides other than the strict decoder.
		if id, pass, ok := parseCanonicalReservation(body); ok {
			strict, strictPass, err := parseReservationStrict(body)
			if err != nil || strict != id || strictPass != pass {
				t.Fatalf("fast path %q %q, strict %q %q (%v) for %q", id, pass, strict, strictPass, err, body)
			}
		}
	})
}
