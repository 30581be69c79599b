package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
)

// A pass made before a token-key rotation verifies on instances that hold
// the old key as the previous one, and on no others; passes are bound to
// their user, sale and expiry either way.
func TestPassesSurviveATokenKeyRotation(t *testing.T) {
	oldKey, newKey := []byte("the-token-key-before-the-rotation"), []byte("the-token-key-after-the-rotation!")
	before := New(nil, oldKey, nil)
	during := New(nil, newKey, oldKey)
	after := New(nil, newKey, nil)
	sale := &domain.Sale{ID: 7, ChallengeDifficulty: 1000}
	now := time.Now()
	exp := now.Add(PassTTL)

	old := before.mintPass(7, 42, exp)
	require.NoError(t, before.CheckPass(sale, 42, old, now))
	require.NoError(t, during.CheckPass(sale, 42, old, now), "the previous key still verifies")
	require.Equal(t, domain.EChallengeRequired, domain.ErrorCode(after.CheckPass(sale, 42, old, now)), "not once it is dropped")

	fresh := during.mintPass(7, 42, exp)
	require.NoError(t, after.CheckPass(sale, 42, fresh, now), "new passes are made under the new key")
	require.Equal(t, domain.EChallengeRequired, domain.ErrorCode(before.CheckPass(sale, 42, fresh, now)))

	for name, bad := range map[string]error{
		"another user": during.CheckPass(sale, 43, old, now),
		"another sale": during.CheckPass(&domain.Sale{ID: 8, ChallengeDifficulty: 1000}, 42, old, now),
		"expired":      during.CheckPass(sale, 42, old, exp.Add(time.Second)),
		"no pass":      during.CheckPass(sale, 42, "", now),
	} {
		require.Equal(t, domain.EChallengeRequired, domain.ErrorCode(bad), name)
	}
	require.NoError(t, during.CheckPass(&domain.Sale{ID: 9}, 42, "", now), "a sale without a challenge needs no pass")
}
