package api

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
)

// TestReserveAcceptedJSONIsTheEncoders: the 202's body written by hand is
// byte for byte encoding/json's, and a string needing escaping goes to
// the encoder.
func TestReserveAcceptedJSONIsTheEncoders(t *testing.T) {
	key := []byte("test-key")
	for _, c := range []struct {
		token, requestID string
		saleID           int64
	}{
		{domain.DeriveToken(key, 42, 7, "req-000000001"), "req-000000001", 42},
		{domain.DeriveToken(key, 9_007_199_254_740_993, 1, "A_b-9xyz"), "A_b-9xyz", 9_007_199_254_740_993},
		{"tok.en", "12345678", 1},
	} {
		got, ok := acceptedJSON(c.token, c.saleID, c.requestID)
		require.True(t, ok, c.token)
		want, err := json.Marshal(domain.Accepted{Token: c.token, Status: domain.StatusQueued, SaleID: c.saleID, RequestID: c.requestID})
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
	}
	for _, v := range []string{`a"b`, `a\b`, "a\nb", "a<b", "a&b", "é"} {
		_, ok := acceptedJSON(v, 1, "12345678")
		assert.False(t, ok, v)
		_, ok = acceptedJSON("token", 1, v)
		assert.False(t, ok, v)
	}
}
