// Package keyedmac derives keys of their own per purpose from the fleet's
// token key and keeps keyed HMAC-SHA256 states for the hot path's reuse.
package keyedmac

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// Derive is HMAC-SHA256(key, purpose): one key per purpose from one fleet
// key, so a MAC made for one use is no good for another.
func Derive(key []byte, purpose string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(purpose))
	return mac.Sum(nil)
}

// Pool keeps HMAC-SHA256 states under one key: hmac.New hashes the key's
// pads and allocates each time, Reset restores the keyed state.
type Pool struct {
	macs sync.Pool
}

// NewPool is a pool of states under key.
func NewPool(key []byte) *Pool {
	p := &Pool{}
	p.macs.New = func() any { return hmac.New(sha256.New, key) }
	return p
}

// Sum appends the MAC of msg to b.
func (p *Pool) Sum(b, msg []byte) []byte {
	mac := p.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write(msg)
	b = mac.Sum(b)
	p.macs.Put(mac)
	return b
}
