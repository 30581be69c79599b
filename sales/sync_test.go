package sales_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
)

// SyncToken, the Redis step of every order step, reads the database in one
// statement (the reservation, its sale's mode and, for a release, the
// user's other live reservations) and calls Redis once (the step and the
// status record in one script), for an advance and a release alike; Redis
// ends as the database says.
func TestSyncTokenSendsOneStatementAndOneRedisCommand(t *testing.T) {
	f := mustFixture(t, 8)
	st, stmts := testenv.MustRecordedStore(t)
	rdb, cmds := testenv.MustRecordedRedis(t)
	client := redisgateway.NewClient(rdb)
	sync := func(tok string) (sent, called []string) {
		t.Helper()
		stmts.Take()
		cmds.Take()
		_, err := sales.SyncToken(f.ctx, st, client, tok)
		require.NoError(t, err)
		for _, c := range cmds.Take() {
			// The change feed's note is the client's background write.
			if !strings.Contains(c, redisgateway.ChangesKey) {
				called = append(called, c)
			}
		}
		return stmts.Take(), called
	}
	requireOne := func(step string, sent, called []string) {
		t.Helper()
		require.Len(t, sent, 1, "%s: statements %q", step, sent)
		require.Len(t, called, 1, "%s: Redis commands %q", step, called)
		require.True(t, strings.HasPrefix(called[0], "evalsha "), "%s: %q", step, called[0])
	}
	// The first round has Redis load the scripts (EVALSHA, then EVAL).
	for round := range 2 {
		user, other := testenv.UniqueUser(), testenv.UniqueUser()
		tok, cancelled := f.redisHold(user, false), f.redisHold(other, false)
		_, err := f.st.PlaceOrder(f.ctx, tok)
		require.NoError(t, err)
		sent, called := sync(tok)
		f.requireStatus(tok, domain.TokenOrdered, user, domain.StatusPendingPayment)
		_, err = f.st.MarkPaid(f.ctx, tok, fmt.Sprintf("pay-%d", round))
		require.NoError(t, err)
		paySent, payCalled := sync(tok)
		f.requireStatus(tok, domain.TokenPaid, user, domain.StatusPaid)
		_, err = f.st.EndQueued(f.ctx, cancelled, domain.StatusCancelled, "user")
		require.NoError(t, err)
		relSent, relCalled := sync(cancelled)
		f.requireStatus(cancelled, domain.TokenReleased, other, domain.StatusCancelled)
		require.False(t, f.rdb.SIsMember(f.ctx, f.keys.Buyers, other).Val(), "the released user's buyer mark goes")
		if round == 0 {
			continue
		}
		requireOne("ordered", sent, called)
		requireOne("paid", paySent, payCalled)
		requireOne("released", relSent, relCalled)
	}
}

// requireStatus checks the token's Redis state and its status record.
func (f *fixture) requireStatus(token, state string, user int64, status domain.ReservationStatus) {
	f.t.Helper()
	got, err := f.client.ReadStatus(f.ctx, f.sale.ID, token)
	require.NoError(f.t, err)
	require.Equal(f.t, state, got.TokenState, "token state")
	require.Equal(f.t, user, got.Owner)
	require.NotNil(f.t, got.Record, "status record")
	require.Equal(f.t, string(status), got.Record.Status)
	require.Equal(f.t, sales.StatusSeq(status), got.Record.Seq)
	require.Equal(f.t, user, got.Record.UserID)
}
