package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"
)

// MaxCacheAge bounds how long a verified token is answered from the cache
// whatever its exp: an identity provider's revoked key stops verifying
// within it of the JWKS refresh that drops the key.
const MaxCacheAge = time.Minute

const (
	maxShards = 64
	// hashBuf is the token length hashed without a heap allocation: an
	// identity provider's RS256 tokens are up to a kilobyte.
	hashBuf = 1024
)

// tokenKey is a salted SHA-256 of a token. The cache never holds the
// token: a memory dump yields no token to replay, and a 256-bit hash leaves
// no collision to find for a forged token to hit a verified one's entry.
// The salt, random per Verifier, keeps one process's keys meaningless to
// another and spreads tokens over the shards unpredictably.
type tokenKey [sha256.Size]byte

type cachedToken struct {
	p        Principal
	deadline int64 // Unix nanoseconds: the token's exp or MaxCacheAge after it was verified, whichever is first
}

// tokenCache remembers verified tokens, bounded in number, in shards each
// under its own lock, so a burst of distinct users' misses does not queue
// behind one lock. It holds at most its max entries in all.
type tokenCache struct {
	salt   [32]byte
	mask   uint8
	shards []tokenShard
}

// tokenShard evicts first in, first out: order holds each key of entries
// once, in a ring whose oldest is at next once it is full. The oldest
// entry's MaxCacheAge ends first, and eviction takes no scan of the map.
type tokenShard struct {
	mu      sync.RWMutex
	entries map[tokenKey]cachedToken
	order   []tokenKey
	next    int
	max     int
	_       [56]byte // pads the shard to two cache lines: neighbouring shards' locks stay off one line
}

// newTokenCache remembers up to max tokens; max 0 gives nil, which
// remembers none.
func newTokenCache(max int) (*tokenCache, error) {
	if max <= 0 {
		return nil, nil
	}
	n := 1
	for n*2 <= min(max, maxShards) {
		n *= 2
	}
	c := &tokenCache{mask: uint8(n - 1), shards: make([]tokenShard, n)}
	if _, err := rand.Read(c.salt[:]); err != nil {
		return nil, fmt.Errorf("token cache: salt: %w", err)
	}
	for i := range c.shards {
		c.shards[i].max = max / n
		if i < max%n {
			c.shards[i].max++
		}
		c.shards[i].entries = make(map[tokenKey]cachedToken)
	}
	return c, nil
}

// key hashes raw with the salt, on the stack for tokens up to hashBuf.
func (c *tokenCache) key(raw string) tokenKey {
	var buf [hashBuf]byte
	b := append(buf[:0], c.salt[:]...)
	return sha256.Sum256(append(b, raw...))
}

func (c *tokenCache) shard(k *tokenKey) *tokenShard {
	return &c.shards[k[0]&c.mask]
}

// get answers the principal of k if it was verified and its deadline is
// after now.
func (c *tokenCache) get(k *tokenKey, now time.Time) (Principal, bool) {
	s := c.shard(k)
	s.mu.RLock()
	e, ok := s.entries[*k]
	s.mu.RUnlock()
	if !ok || now.UnixNano() >= e.deadline {
		return Principal{}, false
	}
	return e.p, true
}

// put remembers that k verified as p, until p.Expires or MaxCacheAge from
// now, whichever is first. A full shard drops the entry it took in first.
func (c *tokenCache) put(k *tokenKey, p Principal, now time.Time) {
	deadline := min(p.Expires.UnixNano(), now.Add(MaxCacheAge).UnixNano())
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[*k]; !ok {
		if len(s.order) < s.max {
			s.order = append(s.order, *k)
		} else {
			delete(s.entries, s.order[s.next])
			s.order[s.next] = *k
			s.next = (s.next + 1) % s.max
		}
	}
	s.entries[*k] = cachedToken{p: p, deadline: deadline}
}

// len counts the entries held, for tests.
func (c *tokenCache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.entries)
		s.mu.RUnlock()
	}
	return n
}
