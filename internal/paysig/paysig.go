// Package paysig is the payment provider's webhook signature, shared by
// the API that checks it and the tools that sign test payments: the
// X-Signature header is "sha256=" + hex HMAC-SHA256 of "<X-Timestamp>.<body>".
package paysig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// Prefix starts the X-Signature header's value.
const Prefix = "sha256="

// Sign is the X-Signature header's value of body sent at ts.
func Sign(secret []byte, ts string, body []byte) string {
	return Prefix + hex.EncodeToString(Sum(secret, ts, body))
}

// Sum is the signature's HMAC, to compare (hmac.Equal) with the header's
// decoded bytes.
func Sum(secret []byte, ts string, body []byte) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}
