package auth

import (
	"context"
	"fmt"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// IdentityProvider verifies user tokens by the keys of an identity
// provider's JWKS URL. It never grants the admin role: admin tokens come
// only from SECKILL_ADMIN_JWT_SECRET.
type IdentityProvider struct {
	keys      jwt.Keyfunc
	userClaim string
	roleClaim string
	opts      []jwt.ParserOption
}

// IdentityClaims names the claims an identity provider's tokens carry the
// user id (a positive integer as a decimal string) and the role in.
type IdentityClaims struct{ User, Role string }

// NewIdentityProvider fetches the JWKS once and keeps refreshing it until
// ctx ends. A JWKS that cannot be fetched at start is an error: the API
// refuses to start rather than run answering every user 401 while looking
// healthy to its probes. A token signed by an unknown key id triggers a
// refresh at most every refreshUnknown (the request that triggers it waits
// for the fetch); other requests never wait for the rate limit beyond a few
// milliseconds (the key is then unknown: 401).
func NewIdentityProvider(ctx context.Context, url, issuer, audience string, claims IdentityClaims, timeout time.Duration) (*IdentityProvider, error) {
	fail := false
	k, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{url}, keyfunc.Override{
		HTTPTimeout:               timeout,
		NoErrorReturnFirstHTTPReq: &fail,
		RefreshInterval:           time.Hour,
		RefreshUnknownKID:         rate.NewLimiter(rate.Every(refreshUnknown), 1),
		RateLimitWaitMax:          5 * time.Millisecond,
	})
	if err != nil {
		return nil, fmt.Errorf("identity provider: fetch JWKS %s: %w", url, err)
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{"RS256", "ES256", "EdDSA"}), jwt.WithExpirationRequired()}
	if issuer != "" {
		opts = append(opts, jwt.WithIssuer(issuer))
	}
	if audience != "" {
		opts = append(opts, jwt.WithAudience(audience))
	}
	return &IdentityProvider{keys: k.Keyfunc, userClaim: claims.User, roleClaim: claims.Role, opts: opts}, nil
}

const refreshUnknown = 10 * time.Second

func (idp *IdentityProvider) verify(raw string) (Principal, time.Time, error) {
	return parseToken(raw, idp.keys, idp.userClaim, idp.role, idp.opts...)
}

// role reads the provider's role claim, a string or a list of strings:
// "admin" among them marks an admin token (which the caller refuses: the
// provider does not sign admin tokens here); any other value is a user.
func (idp *IdentityProvider) role(claims jwt.MapClaims) (admin, ok bool) {
	switch v := claims[idp.roleClaim].(type) {
	case string:
		return v == "admin", true
	case []any:
		for _, r := range v {
			if r == "admin" {
				return true, true
			}
		}
	}
	return false, true
}
