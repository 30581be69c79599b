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
	// evictSample is how many entries of a full shard are looked at to
	// choose the one to evict: the expired ones go, else the one whose
	// deadline comes first (the oldest, for tokens living past MaxCacheAge).
	evictSample = 8
	// hashBuf is the token length hashed without a heap allocation: the
	// project's own tokens are about 150 bytes, an identity provider's
	// RS256 tokens up to a kilobyte.
	hashBuf = 1024
)

// tokenKey is a salted SHA-256 of a token. The cache never holds the
// token: a memory dump yields neither a token to replay nor, without the
// salt, a way to test a guessed one; a 256-bit hash leaves no collision to
// find for a forged token to hit a verified one's entry.
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

type tokenShard struct {
	mu      sync.RWMutex
	entries map[tokenKey]cachedToken
	max     int
	_       [24]byte // pads the shard to 64 bytes: neighbouring shards' locks stay off one cache line
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
// now, whichever is first. A full shard first drops an entry.
func (c *tokenCache) put(k *tokenKey, p Principal, now time.Time) {
	deadline := min(p.Expires.UnixNano(), now.Add(MaxCacheAge).UnixNano())
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[*k]; !ok && len(s.entries) >= s.max {
		s.evict(now.UnixNano())
	}
	s.entries[*k] = cachedToken{p: p, deadline: deadline}
}

// evict drops the expired entries among a sample of the shard's (map
// iteration starts at a random place), or else the sampled entry whose
// deadline is first. The caller holds the lock.
func (s *tokenShard) evict(now int64) {
	var (
		victim   tokenKey
		earliest int64
		found    bool
		dropped  bool
		seen     int
	)
	for k, e := range s.entries {
		if e.deadline <= now {
			delete(s.entries, k)
			dropped = true
		} else if !found || e.deadline < earliest {
			victim, earliest, found = k, e.deadline, true
		}
		if seen++; seen == evictSample {
			break
		}
	}
	if !dropped && found {
		delete(s.entries, victim)
	}
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
