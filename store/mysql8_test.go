package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"vitess.io/vitess/go/vt/sqlparser"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/test/testsale"
)

// mysql8Parser parses MySQL 8.0's grammar (vitess's parser of it).
func mysql8Parser(t *testing.T) *sqlparser.Parser {
	t.Helper()
	p, err := sqlparser.New(sqlparser.Options{MySQLServerVersion: "8.0.36"})
	require.NoError(t, err)
	return p
}

// The parser is MySQL's, not MariaDB's: it refuses the MariaDB-only forms
// the store sends MariaDB.
func TestMySQL8ParserRefusesMariaDBForms(t *testing.T) {
	p := mysql8Parser(t)
	for _, q := range []string{
		"SET STATEMENT innodb_lock_wait_timeout = 1 FOR UPDATE stock_buckets SET stock = stock - 1 WHERE sale_id = 1",
		"BEGIN NOT ATOMIC DECLARE parts TEXT DEFAULT ''; START TRANSACTION; COMMIT; END",
	} {
		_, err := p.ParseStrictDDL(q)
		require.Error(t, err, q)
	}
}

// The store speaking MySQL 8 (run here on MariaDB, which takes MySQL 8's
// forms too) keeps every rule, and every statement it sends on the way
// parses as MySQL 8.0: the Redis holds (in groups, a replay, a refused
// holder), orders placed from a hold's unit and from a bucket picked (a
// lock wait bound), paid, cancelled, a queued hold ended, the reads by
// token and by user, a sync's read, the database path, a snapshot.
func TestMySQL8StatementsKeepTheRulesAndParse(t *testing.T) {
	st, rec := speakingMySQL8(t)
	sale := testenv.MustSale(t, st, 6, func(s *domain.Sale) { s.Buckets = 2 })
	user := testenv.UniqueUser()

	// A hold with its unit, its replay, and the holder's second hold.
	hold := domain.RedisHoldInput(domain.DeriveToken([]byte("test-key"), sale.ID, user, "my8-a"), sale.ID, user, "my8-a")
	r, err := st.RecordRedisHold(ctx(t), hold, sale.ModeEpoch, 1, true)
	require.NoError(t, err)
	require.True(t, r.Promised())
	r, err = st.RecordRedisHold(ctx(t), hold, sale.ModeEpoch, 0, true)
	require.NoError(t, err)
	require.True(t, r.Promised(), "a replay answers as the first record")
	second := domain.RedisHoldInput(domain.DeriveToken([]byte("test-key"), sale.ID, user, "my8-b"), sale.ID, user, "my8-b")
	r, err = st.RecordRedisHold(ctx(t), second, sale.ModeEpoch, 2, true)
	require.NoError(t, err)
	require.Equal(t, domain.ErrAlreadyHolds, r.Refused)
	require.Equal(t, hold.Token, r.Holder.Token)

	placed, err := st.PlaceOrder(ctx(t), hold.Token)
	require.NoError(t, err)
	require.Equal(t, domain.StatusPendingPayment, placed.Status)
	paid, err := st.MarkPaid(ctx(t), hold.Token, "pay-my8")
	require.NoError(t, err)
	require.Equal(t, domain.StatusPaid, paid.Status)

	// A hold recorded without its unit: its order picks a bucket, bounded.
	other := mustLegacyQueued(t, st, sale, testenv.UniqueUser(), "my8-c")
	placed, err = st.PlaceOrderWanting(ctx(t), other.Token, 1)
	require.NoError(t, err)
	require.Equal(t, domain.StatusPendingPayment, placed.Status)
	released, err := st.ReleaseOrder(ctx(t), other.Token, domain.StatusCancelled)
	require.NoError(t, err)
	require.Equal(t, domain.StatusCancelled, released.Status)
	queued := mustLegacyQueued(t, st, sale, testenv.UniqueUser(), "my8-d")
	ended, err := st.EndQueued(ctx(t), queued.Token, domain.StatusCancelled, "")
	require.NoError(t, err)
	require.Equal(t, domain.StatusCancelled, ended.Status)

	mine, err := st.ListReservations(ctx(t), user, sale.ID, 10)
	require.NoError(t, err)
	require.Len(t, mine, 2)
	known, err := st.RecordedTokens(ctx(t), []string{hold.Token, "no-such-token"})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{hold.Token: true}, known)
	gone, err := st.EndedReservations(ctx(t), []string{hold.Token, second.Token, other.Token})
	require.NoError(t, err)
	require.Len(t, gone, 2)
	for tok, want := range map[string]struct {
		status      domain.ReservationStatus
		anotherLive bool
	}{
		hold.Token:   {domain.StatusPaid, false},
		second.Token: {domain.StatusFailed, true}, // its user paid the first hold
		other.Token:  {domain.StatusCancelled, false},
	} {
		ts, err := st.ReadTokenSync(ctx(t), tok)
		require.NoError(t, err)
		require.Equal(t, want.status, ts.Reservation.Status)
		require.Equal(t, want.anotherLive, ts.AnotherLive, "another live reservation of the user, %s", want.status)
		require.Equal(t, domain.ModeRedis, ts.Mode)
	}

	mysql8DatabasePath(t, st, sale)
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 6-1-3, left, "one paid, three on the database path; the cancelled unit came back")

	joined := requireMySQL8(t, rec)
	for _, want := range []string{"SKIP LOCKED", "SET SESSION innodb_lock_wait_timeout", "SAVEPOINT seckill_part", "reservation_keys"} {
		require.Contains(t, joined, want, "the flows above send %s", want)
	}
}

// speakingMySQL8 is a store speaking MySQL 8 whose statements rec records.
func speakingMySQL8(t *testing.T) (*store.Store, *testenv.Statements) {
	t.Helper()
	st := testenv.MustStore(t)
	rec := testenv.Record(st)
	st.SpeakMySQL8()
	require.Equal(t, store.MySQL8, st.Dialect())
	return st, rec
}

// The statements of the upkeep and admin paths parse as MySQL 8.0 too:
// the observers' and waitlist's upserts, the gate, the idempotency keys,
// stock additions, the blacklist, refunds, the audit, reports and the
// sale's marks.
func TestMySQL8UpkeepStatementsParse(t *testing.T) {
	st, rec := speakingMySQL8(t)
	sale := testenv.MustSale(t, st, 5)
	u := testenv.UniqueUser()
	c := ctx(t)
	for range 2 {
		require.NoError(t, st.PublishRedisView(c, fmt.Sprintf("my8-%d", u), "api", true))
		require.NoError(t, testsale.ErrOf(st.RecordWaitlistJoin(c, sale.ID, store.WaitJoin{UserID: u, Joined: 1})))
	}
	joins, err := st.WaitingJoins(c, sale.ID)
	require.NoError(t, err)
	require.Len(t, joins, 1)
	require.NoError(t, st.ForgetWaitlistJoin(c, sale.ID, u, 1))
	_, _, err = st.UpdateAllowlist(c, sale.ID, store.AllowlistChange{Add: []int64{u}})
	require.NoError(t, err)
	ids, _, err := st.Allowlist(c, sale.ID)
	require.NoError(t, err)
	require.Equal(t, []int64{u}, ids)
	require.NoError(t, st.SetExempt(c, u, true))
	require.NoError(t, st.SetExempt(c, u, false))
	challenge := fmt.Sprintf("%064d", u)
	first, err := st.RedeemChallenge(c, challenge, time.Now().Add(time.Minute))
	require.NoError(t, err)
	again, err := st.RedeemChallenge(c, challenge, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, []bool{first, again})
	scope := []byte(fmt.Sprintf("%032d", u))
	claim, err := st.ClaimKey(c, scope, scope, time.Minute)
	require.NoError(t, err)
	require.True(t, claim.Owned)
	require.NoError(t, st.FinishKey(c, scope, 200, []byte("{}")))
	ref := fmt.Sprintf("my8-add-%d", u)
	require.NoError(t, st.AdjustStock(c, sale.ID, 2, ref))
	_, err = st.PendingAdditions(c, sale.ID, 10)
	require.NoError(t, err)
	require.NoError(t, st.AdditionApplied(c, ref))
	require.NoError(t, st.SetBlacklisted(c, u, true))
	require.NoError(t, st.SetBlacklisted(c, u, false))
	_, err = st.RecordRefund(c, store.Refund{Token: ref, SaleID: sale.ID, UserID: u, PaymentRef: "my8", AmountCents: 1, Reason: "test"})
	require.NoError(t, err)
	require.NoError(t, st.RecordAdminWrite(c, store.AdminWrite{Operator: "secret:1", Action: "test", SaleID: &sale.ID, Summary: "test", Status: 200, RequestID: ref, At: time.Now().UTC()}))
	require.NoError(t, st.SaveReport(c, sale.ID, true, false, []byte(`{"consistent":true}`)))
	_, err = st.LatestReport(c, sale.ID)
	require.NoError(t, err)
	require.NoError(t, st.MarkWarmed(c, sale.ID))
	_, err = st.SetSaleControl(c, sale.ID, domain.ControlPaused)
	require.NoError(t, err)
	_, _, err = st.RedisCounters(c, sale.ID)
	require.NoError(t, err)
	requireMySQL8(t, rec)
}

// mysql8DatabasePath sells three units on the database path, in groups and
// alone, and reads what a snapshot and the outbox read.
func mysql8DatabasePath(t *testing.T, st *store.Store, sale *domain.Sale) {
	t.Helper()
	require.NoError(t, st.RecordRedisStock(ctx(t), sale.ID, 4, time.Now()))
	_, err := st.SwitchToDatabase(ctx(t), sale.ID, 0)
	require.NoError(t, err)
	for i := range 2 {
		res, _, err := st.ReserveInDB(ctx(t), dbInput(sale, testenv.UniqueUser(), fmt.Sprintf("my8-db-%d", i)))
		require.NoError(t, err)
		require.Equal(t, domain.StatusPendingPayment, res.Status)
	}
	res, _, err := st.ReserveInDBAlone(ctx(t), dbInput(sale, testenv.UniqueUser(), "my8-db-alone"))
	require.NoError(t, err)
	require.Equal(t, domain.StatusPendingPayment, res.Status)
	_, err = st.PendingOutbox(ctx(t), 0, 10)
	require.NoError(t, err)
	_, err = st.ReadSnapshot(ctx(t), sale.ID)
	require.NoError(t, err)
}

// requireMySQL8 checks every statement rec saw parses as MySQL 8.0, and
// returns them, one a line.
func requireMySQL8(t *testing.T, rec *testenv.Statements) string {
	t.Helper()
	queries := rec.All()
	require.NotEmpty(t, queries)
	t.Logf("%d statements sent", len(queries))
	p := mysql8Parser(t)
	for _, q := range queries {
		require.NotContains(t, q, "NOT ATOMIC", "a MariaDB compound statement sent")
		// bun's own reading of the server's version adds RETURNING to a
		// model's insert on MariaDB (this server) and, on MySQL, reads
		// the insert id instead.
		q = strings.TrimSuffix(q, " RETURNING `id`")
		_, err := p.ParseStrictDDL(q)
		require.NoError(t, err, "not MySQL 8.0: %s", q)
	}
	return strings.Join(queries, "\n")
}
