package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"strconv"
	"sync"
)

// tickets hashes pairs of numbers under a key derived from the fleet's
// token key and a purpose: every instance draws the same ticket for a
// user, and no user can predict or choose theirs.
type tickets struct {
	macs sync.Pool // keyed HMACs: Reset is cheap, hmac.New is not
}

func newTickets(tokenKey []byte, purpose string) *tickets {
	mac := hmac.New(sha256.New, tokenKey)
	mac.Write([]byte(purpose))
	key := mac.Sum(nil)
	return &tickets{macs: sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// draw is the top 53 bits of HMAC("a|b"): uniform in [0, 2^53), so a
// float64 holds it exactly.
func (t *tickets) draw(a, b int64) uint64 {
	mac := t.macs.Get().(hash.Hash)
	defer t.macs.Put(mac)
	mac.Reset()
	var msg [48]byte
	m := strconv.AppendInt(msg[:0], a, 10)
	m = append(m, '|')
	m = strconv.AppendInt(m, b, 10)
	mac.Write(m)
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(mac.Sum(sum[:0])) >> 11
}
