package paysig

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The header is the documented HMAC (a known vector computed with
// `printf '1700000000.{}' | openssl dgst -sha256 -hmac secret`).
func TestSignIsTheDocumentedHMAC(t *testing.T) {
	require.Equal(t, "sha256=b8569b78799ff9e3cbff0fc2d63a33a2b57f3282abd07c37ae5e8e7d79a5f163", Sign([]byte("secret"), "1700000000", []byte("{}")))
}
