package auth

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/authtoken"
)

// FuzzVerifyToken: only tokens signed HS256 with the secret, with exp and a
// positive sub, are accepted.
func FuzzVerifyToken(f *testing.F) {
	secret := []byte("fuzz-secret")
	good, err := authtoken.Mint(secret, 42, "", time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiI0MiJ9.")
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := VerifyToken(secret, raw)
		if err != nil {
			return
		}
		if p.UserID <= 0 {
			t.Fatalf("accepted non-positive user %d", p.UserID)
		}
		if raw != good {
			// Any other accepted token must verify again under the same rules.
			if _, err := VerifyToken([]byte("another"), raw); err == nil {
				t.Fatalf("token accepted under two keys: %q", raw)
			}
		}
	})
}
