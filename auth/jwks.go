package auth

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// IdentityProvider verifies user tokens by the keys of an identity
// provider's JWKS URL. It never grants the admin role: admin tokens come
// from SECKILL_ADMIN_JWT_SECRET or from the operators' provider
// (AdminProvider), with an issuer and audience of their own.
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
	keys, opts, err := fetchKeys(ctx, url, issuer, audience, timeout)
	if err != nil {
		return nil, fmt.Errorf("identity provider: %w", err)
	}
	return &IdentityProvider{keys: keys, userClaim: claims.User, roleClaim: claims.Role, opts: opts}, nil
}

// fetchKeys is the JWKS of url, refreshed until ctx ends, and the parser
// options every provider token is held to.
func fetchKeys(ctx context.Context, url, issuer, audience string, timeout time.Duration) (jwt.Keyfunc, []jwt.ParserOption, error) {
	fail := false
	k, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{url}, keyfunc.Override{
		HTTPTimeout:               timeout,
		NoErrorReturnFirstHTTPReq: &fail,
		RefreshInterval:           time.Hour,
		RefreshUnknownKID:         rate.NewLimiter(rate.Every(refreshUnknown), 1),
		RateLimitWaitMax:          5 * time.Millisecond,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("fetch JWKS %s: %w", url, err)
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{"RS256", "ES256", "EdDSA"}), jwt.WithExpirationRequired()}
	if issuer != "" {
		opts = append(opts, jwt.WithIssuer(issuer))
	}
	if audience != "" {
		opts = append(opts, jwt.WithAudience(audience))
	}
	return k.Keyfunc, opts, nil
}

const refreshUnknown = 10 * time.Second

// verify reads a user token; admin, when set, is the operators' role: a
// token carrying it counts as claiming admin, which the caller refuses.
func (idp *IdentityProvider) verify(raw string, admin *RoleGrant) (Principal, time.Time, error) {
	role := idp.role
	if admin != nil {
		role = func(claims jwt.MapClaims) (bool, bool) {
			if admin.in(claims) {
				return true, true
			}
			return idp.role(claims)
		}
	}
	return parseToken(raw, idp.keys, idp.userClaim, role, idp.opts...)
}

// role reads the provider's role claim, a string or a list of strings:
// "admin" among them marks an admin token (which the caller refuses: the
// provider does not sign admin tokens here); any other value is a user.
func (idp *IdentityProvider) role(claims jwt.MapClaims) (admin, ok bool) {
	return hasRole(claims[idp.roleClaim], "admin"), true
}

// hasRole reports whether a role claim, a string or a list of strings,
// holds want.
func hasRole(claim any, want string) bool {
	switch v := claim.(type) {
	case string:
		return v == want
	case []any:
		for _, r := range v {
			if r == want {
				return true
			}
		}
	}
	return false
}

// RoleGrant is the claim of an operator's token that grants admin, and the
// value in it (the claim a string or a list of strings).
type RoleGrant struct{ Claim, Value string }

func (g *RoleGrant) in(claims jwt.MapClaims) bool { return hasRole(claims[g.Claim], g.Value) }

// AdminProvider verifies operators' admin tokens by an identity provider's
// JWKS, under an issuer and audience of their own: each operator signs in
// as themselves, is revoked at the provider, and is named by the token's
// sub (any string) in the logs and the admin audit.
type AdminProvider struct {
	keys  jwt.Keyfunc
	grant RoleGrant
	opts  []jwt.ParserOption
}

// maxSubject bounds an operator's sub, as the audit's column does.
const maxSubject = 255

// NewAdminProvider fetches the operators' JWKS as NewIdentityProvider
// does. The issuer, the audience and the grant are required: without them
// a user token of the same provider could administer.
func NewAdminProvider(ctx context.Context, url, issuer, audience string, grant RoleGrant, timeout time.Duration) (*AdminProvider, error) {
	if issuer == "" || audience == "" || grant.Claim == "" || grant.Value == "" {
		return nil, errors.New("admin identity provider: issuer, audience, role claim and role are required")
	}
	keys, opts, err := fetchKeys(ctx, url, issuer, audience, timeout)
	if err != nil {
		return nil, fmt.Errorf("admin identity provider: %w", err)
	}
	return &AdminProvider{keys: keys, grant: grant, opts: opts}, nil
}

// roleGrant is the role that makes an operator; nil without a provider.
func (a *AdminProvider) roleGrant() *RoleGrant {
	if a == nil {
		return nil
	}
	return &a.grant
}

// verify reads an operator's token: sub a non-empty string, exp required,
// the grant's role among its roles (else ErrNotAdmin).
func (a *AdminProvider) verify(raw string) (Principal, time.Time, error) {
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(raw, claims, a.keys, a.opts...); err != nil {
		return Principal{}, time.Time{}, errBadToken
	}
	sub, _ := claims["sub"].(string)
	if sub == "" || len(sub) > maxSubject || !utf8.ValidString(sub) {
		return Principal{}, time.Time{}, errBadToken
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return Principal{}, time.Time{}, errBadToken
	}
	if !a.grant.in(claims) {
		return Principal{}, time.Time{}, ErrNotAdmin
	}
	return Principal{Admin: true, Subject: sub}, exp.Time, nil
}
