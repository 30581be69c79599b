package keyedmac

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
)

// Tickets hashes pairs of numbers under a key derived from the fleet's
// token key and a purpose: every instance draws the same ticket for a
// user, and no user can predict or choose theirs.
type Tickets struct {
	macs *Pool
}

// NewTickets draws under a key derived from tokenKey and purpose.
func NewTickets(tokenKey []byte, purpose string) *Tickets {
	return &Tickets{macs: NewPool(Derive(tokenKey, purpose))}
}

// Draw is the top 53 bits of HMAC("a|b"): uniform in [0, 2^53), so a
// float64 holds it exactly.
func (t *Tickets) Draw(a, b int64) uint64 {
	var msg [48]byte
	m := strconv.AppendInt(msg[:0], a, 10)
	m = append(m, '|')
	m = strconv.AppendInt(m, b, 10)
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(t.macs.Sum(sum[:0], m)) >> 11
}
