package auth

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/authtoken"
)

// verifications counts a Verifier's verifications: of own tokens, and of
// the others (the cache's misses).
type verifications struct{ own, check atomic.Int64 }

// Load is the verifications of either kind.
func (c *verifications) Load() int64 { return c.own.Load() + c.check.Load() }

// countedVerifier is a Verifier whose verifications are counted.
func countedVerifier(t testing.TB, secrets Secrets, max int) (*Verifier, *verifications) {
	v, err := NewVerifier(secrets, max)
	require.NoError(t, err)
	var n verifications
	own, check := v.own, v.check
	v.own = func(raw string, now time.Time) (Principal, time.Time, error) {
		n.own.Add(1)
		return own(raw, now)
	}
	v.check = func(raw string, now time.Time) (Principal, time.Time, error) {
		n.check.Add(1)
		return check(raw, now)
	}
	return v, &n
}

func mint(t testing.TB, secret []byte, user int64, ttl time.Duration) string {
	tok, err := authtoken.Mint(secret, user, authtoken.RoleUser, ttl)
	require.NoError(t, err)
	return tok
}

// tamper changes one character of tok's signature. Not the last: its low
// bits are base64 padding, which a lenient decoder ignores.
func tamper(tok string) string {
	i := len(tok) - 5
	c := byte('A')
	if tok[i] == 'A' {
		c = 'B'
	}
	return tok[:i] + string(c) + tok[i+1:]
}

func TestVerifierCachesOnlyWhatVerified(t *testing.T) {
	idp := newTestProvider(t)
	tok := idp.user(t, 42, time.Hour, nil)
	v, checks := countedVerifier(t, Secrets{IdP: idp.users}, 16)
	now := time.Now()

	for range 3 {
		p, err := v.Verify(tok, now)
		require.NoError(t, err)
		require.EqualValues(t, 42, p.UserID)
		require.False(t, p.Admin)
		require.False(t, p.Expires.IsZero())
	}
	require.EqualValues(t, 1, checks.Load(), "the repeats are answered from the cache")

	// A token one byte away from the cached one is verified anew and
	// refused, each time: a refusal is not remembered either.
	bad := tamper(tok)
	for i := range 2 {
		_, err := v.Verify(bad, now)
		require.ErrorIs(t, err, errBadToken)
		require.EqualValues(t, 2+i, checks.Load())
	}
	// So is one whose claims were changed under the old signature.
	parts := strings.Split(tok, ".")
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	other := strings.Replace(string(claims), `"sub":"42"`, `"sub":"43"`, 1)
	require.NotEqual(t, string(claims), other)
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(other)) + "." + parts[2]
	_, err = v.Verify(forged, now)
	require.ErrorIs(t, err, errBadToken)
	require.Equal(t, 1, v.cache.len())
}

func TestVerifierKeepsATokenUntilItsExp(t *testing.T) {
	idp := newTestProvider(t)
	tok := idp.user(t, 7, 30*time.Second, nil)
	v, checks := countedVerifier(t, Secrets{IdP: idp.users}, 16)
	now := time.Now()
	p, err := v.Verify(tok, now)
	require.NoError(t, err)
	exp := p.Expires

	_, err = v.Verify(tok, exp.Add(-time.Nanosecond))
	require.NoError(t, err)
	require.EqualValues(t, 1, checks.Load(), "a nanosecond before exp: from the cache")

	_, err = v.Verify(tok, exp)
	require.ErrorIs(t, err, errBadToken, "at exp the token is refused")
	require.EqualValues(t, 2, checks.Load(), "at exp the entry is not used")
}

func TestVerifierKeepsNoTokenPastMaxCacheAge(t *testing.T) {
	idp := newTestProvider(t)
	tok := idp.user(t, 7, time.Hour, nil)
	v, checks := countedVerifier(t, Secrets{IdP: idp.users}, 16)
	now := time.Now()
	_, err := v.Verify(tok, now)
	require.NoError(t, err)

	_, err = v.Verify(tok, now.Add(MaxCacheAge-time.Nanosecond))
	require.NoError(t, err)
	require.EqualValues(t, 1, checks.Load())

	// A token valid for an hour is verified again after MaxCacheAge, then
	// remembered anew.
	later := now.Add(MaxCacheAge)
	_, err = v.Verify(tok, later)
	require.NoError(t, err)
	require.EqualValues(t, 2, checks.Load())
	_, err = v.Verify(tok, later.Add(time.Second))
	require.NoError(t, err)
	require.EqualValues(t, 2, checks.Load())
}

// A rotation restarts the API with the new secrets, that is a new
// Verifier: nothing the old one verified is trusted by it, not even by the
// same token's cache key. During the rotation an own token of the previous
// secret verifies; after it, it is refused.
func TestRotationStartsFromAnEmptyCache(t *testing.T) {
	oldSecret, newSecret := []byte("secret-before-the-rotation"), []byte("secret-after-the-rotation")
	idp := newTestProvider(t)
	own, theirs := mint(t, oldSecret, 9, time.Hour), idp.user(t, 9, time.Hour, nil)
	now := time.Now()

	before, _ := countedVerifier(t, Secrets{User: [][]byte{oldSecret}, IdP: idp.users}, 16)
	for _, tok := range []string{own, theirs} {
		_, err := before.Verify(tok, now)
		require.NoError(t, err)
	}

	during, checks := countedVerifier(t, Secrets{User: [][]byte{newSecret, oldSecret}, IdP: idp.users}, 16)
	require.NotEqual(t, before.cache.key(theirs), during.cache.key(theirs), "each verifier salts its keys")
	for _, tok := range []string{own, theirs} {
		p, err := during.Verify(tok, now)
		require.NoError(t, err)
		require.EqualValues(t, 9, p.UserID)
	}
	require.EqualValues(t, 1, checks.own.Load(), "verified under the previous secret")
	require.EqualValues(t, 1, checks.check.Load(), "verified, not taken from another cache")

	after, _ := countedVerifier(t, Secrets{User: [][]byte{newSecret}, IdP: idp.users}, 16)
	_, err := after.Verify(own, now)
	require.ErrorIs(t, err, errBadToken, "the dropped secret's token is refused")
}

func TestVerifierCacheIsBounded(t *testing.T) {
	idp := newTestProvider(t)
	const max = 100
	v, checks := countedVerifier(t, Secrets{IdP: idp.users}, max)
	now := time.Now()
	for i := int64(1); i <= 2000; i++ {
		tok := idp.user(t, i, time.Hour, nil)
		_, err := v.Verify(tok, now)
		require.NoError(t, err)
		require.LessOrEqual(t, v.cache.len(), max)
		// The newest token is always kept.
		n := checks.Load()
		_, err = v.Verify(tok, now)
		require.NoError(t, err)
		require.Equal(t, n, checks.Load())
	}
	require.Equal(t, max, v.cache.len(), "2000 tokens fill every shard")
}

func TestVerifierWithoutCache(t *testing.T) {
	secret := []byte("cache-test-secret")
	idp := newTestProvider(t)
	v, checks := countedVerifier(t, Secrets{User: [][]byte{secret}, IdP: idp.users}, 0)
	require.Nil(t, v.cache)
	for _, tok := range []string{mint(t, secret, 3, time.Hour), idp.user(t, 3, time.Hour, nil)} {
		n := checks.Load()
		for range 3 {
			p, err := v.Verify(tok, time.Now())
			require.NoError(t, err)
			require.EqualValues(t, 3, p.UserID)
		}
		require.EqualValues(t, n+3, checks.Load())
		_, err := v.Verify(tamper(tok), time.Now())
		require.ErrorIs(t, err, errBadToken)
	}
}

// A full shard drops the entry it took in first; an entry verified again
// keeps its place.
func TestFullShardEvictsFirstIn(t *testing.T) {
	c := &tokenCache{shards: []tokenShard{{entries: map[tokenKey]cachedToken{}, max: 3}}}
	now := time.Now()
	p := Principal{UserID: 1, Expires: now.Add(time.Hour)}
	keys := make([]tokenKey, 6)
	for i := range keys {
		keys[i] = c.key(fmt.Sprint("token-", i))
	}
	held := func(want ...int) {
		t.Helper()
		for i := range keys {
			_, ok := c.get(&keys[i], now)
			require.Equal(t, slices.Contains(want, i), ok, "entry %d", i)
		}
		require.Equal(t, len(want), c.len())
	}
	for i := range 3 {
		c.put(&keys[i], p, now)
	}
	c.put(&keys[0], p, now)
	held(0, 1, 2)
	c.put(&keys[3], p, now)
	held(1, 2, 3)
	c.put(&keys[4], p, now)
	c.put(&keys[5], p, now)
	held(3, 4, 5)
	c.put(&keys[0], p, now)
	held(0, 4, 5)
}

func TestTokenShardsKeepOffEachOthersCacheLines(t *testing.T) {
	require.Zero(t, unsafe.Sizeof(tokenShard{})%64)
}

// Many goroutines verifying repeated and distinct tokens, own and an
// identity provider's, through a cache smaller than their set each get
// their own token's user (run with -race).
func TestVerifierConcurrentUse(t *testing.T) {
	secret := []byte("cache-test-secret")
	idp := newTestProvider(t)
	toks := make([]string, 300)
	for i := range toks {
		if i%2 == 0 {
			toks[i] = mint(t, secret, int64(i+1), time.Hour)
		} else {
			toks[i] = idp.user(t, int64(i+1), time.Hour, nil)
		}
	}
	v, _ := countedVerifier(t, Secrets{User: [][]byte{secret}, IdP: idp.users}, 64)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := range 500 {
				j := (g*7 + i*(g+1)) % len(toks)
				raw := toks[j]
				if i%5 == 0 {
					raw = tamper(raw)
				}
				p, err := v.Verify(raw, time.Now())
				switch {
				case i%5 == 0 && err == nil:
					errs <- fmt.Errorf("tampered token %d verified", j)
					return
				case i%5 != 0 && (err != nil || p.UserID != int64(j+1)):
					errs <- fmt.Errorf("token %d: user %d, %v", j, p.UserID, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.LessOrEqual(t, v.cache.len(), 64)
}
