package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/auth"
)

// A principal verified on a request's headers is taken once, by the same
// request's guard: for the same Authorization header, the same kind of
// route, before it expires; anything else verifies the token again.
func TestHeaderPrincipalIsTakenOnlyByItsOwnRequest(t *testing.T) {
	now := time.Now()
	p := auth.Principal{UserID: 42, Expires: now.Add(time.Hour)}
	var h, other fasthttp.RequestHeader
	const authz = "Bearer token-of-user-42"
	cases := map[string]struct {
		header        *fasthttp.RequestHeader
		authorization string
		admin         bool
		now           time.Time
		ok            bool
	}{
		"its own request":              {&h, authz, false, now, true},
		"another request's header":     {&other, authz, false, now, false},
		"another Authorization header": {&h, authz + "x", false, now, false},
		"a prefix of the header":       {&h, authz[:len(authz)-1], false, now, false},
		"an admin route":               {&h, authz, true, now, false},
		"after the token's exp":        {&h, authz, false, p.Expires, false},
	}
	var store headerPrincipals
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			store.put(&h, []byte(authz), false, p)
			got, ok := store.take(c.header, c.authorization, c.admin, c.now)
			require.Equal(t, c.ok, ok)
			if ok {
				require.Equal(t, p, got)
				_, again := store.take(&h, authz, false, now)
				require.False(t, again, "taken twice")
			}
			store.drop(&h)
			require.Zero(t, store.n.Load())
		})
	}
	t.Run("dropped", func(t *testing.T) {
		store.put(&h, []byte(authz), false, p)
		store.drop(&h)
		_, ok := store.take(&h, authz, false, now)
		require.False(t, ok)
	})
	t.Run("replaced by the next request's headers", func(t *testing.T) {
		store.put(&h, []byte(authz), false, p)
		store.put(&h, []byte("Bearer next"), false, auth.Principal{UserID: 7, Expires: p.Expires})
		_, ok := store.take(&h, authz, false, now)
		require.False(t, ok)
		require.Zero(t, store.n.Load())
	})
}
