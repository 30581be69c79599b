package store_test

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/dbfault"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// Every write whose answer is lost, after the server applied it or before
// it was sent, is read back or retried under its key before it is decided:
// each test below loses one answer with dbfault against the real MariaDB
// and checks the effect happened exactly once and the caller was told so.

// faultStore is a store whose answers the returned layer loses on demand.
func faultStore(t *testing.T) (*store.Store, *dbfault.Layer) {
	t.Helper()
	layer := &dbfault.Layer{}
	return testenv.MustStore(t, store.WithConnectorLayer(layer.Wrap)), layer
}

// rowsOf counts the rows of table matching where.
func rowsOf(t *testing.T, st *store.Store, table, where string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM "+table+" WHERE "+where, args...).Scan(&n))
	return n
}

func stockOf(t *testing.T, st *store.Store, saleID int64) int64 {
	t.Helper()
	n, err := st.DBStock(ctx(t), saleID)
	require.NoError(t, err)
	return n
}

func TestClassifyNamesEachFault(t *testing.T) {
	for _, c := range []struct {
		err  error
		want store.Fault
	}{
		{&mysql.MySQLError{Number: 1213}, store.FaultRefused},
		{&mysql.MySQLError{Number: 1205}, store.FaultRefused},
		{&mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}, store.FaultNodeUnusable},
		{&mysql.MySQLError{Number: 1290}, store.FaultNodeUnusable},
		{&mysql.MySQLError{Number: 1792}, store.FaultNodeUnusable},
		{&mysql.MySQLError{Number: 1836}, store.FaultNodeUnusable},
		{driver.ErrBadConn, store.FaultNodeUnusable},
		{&mysql.MySQLError{Number: 2013}, store.FaultUnknown},
		{&mysql.MySQLError{Number: 2006}, store.FaultUnknown},
		{&mysql.MySQLError{Number: 1927}, store.FaultUnknown},
		{fmt.Errorf("commit: %w", mysql.ErrInvalidConn), store.FaultUnknown},
		{context.DeadlineExceeded, store.FaultUnknown},
		{&mysql.MySQLError{Number: 1062}, store.FaultNone},
		{domain.ErrSoldOut, store.FaultNone},
		{nil, store.FaultNone},
	} {
		assert.Equal(t, c.want, store.Classify(c.err), "%v", c.err)
	}
	assert.False(t, store.IsRetryable(context.DeadlineExceeded), "the caller's deadline ends its retries")
	assert.True(t, store.IsRetryable(mysql.ErrInvalidConn))
}

// The server's own answers: a write in a read-only transaction (as on a
// read-only node after a failover) is a node unusable, and the driver
// drops that connection; a lost answer is unknown.
func TestClassifyTheServersAnswers(t *testing.T) {
	st, layer := faultStore(t)
	sale := testenv.MustSale(t, st, 1)
	conn, err := st.DB.Conn(ctx(t))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx(t), "START TRANSACTION READ ONLY")
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx(t), "UPDATE sales SET title = title WHERE id = ?", sale.ID)
	require.Equal(t, store.FaultNodeUnusable, store.Classify(err), "%v", err)
	require.Error(t, conn.PingContext(ctx(t)), "the connection is dropped")

	layer.Lose(dbfault.Containing("redis_stock_seen"), dbfault.AfterApply, 1)
	err = st.RecordRedisStock(ctx(t), sale.ID, 7, time.Now())
	require.Equal(t, store.FaultUnknown, store.Classify(err), "%v", err)
	got, err := st.GetSale(ctx(t), sale.ID)
	require.NoError(t, err)
	require.NotNil(t, got, "the store answers on a new connection")
}

// A real deadlock: AdjustStock, waiting for the buckets with the sale row
// locked, is the victim of a heavier transaction that locked the buckets
// and then wants the sale row. It is rolled back, retried, and applied
// once.
func TestDeadlockVictimIsRetried(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 64, func(s *domain.Sale) { s.Buckets = 64 })
	var before int64
	require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_DEADLOCKS'").Scan(&before))

	heavy, err := st.DB.DB.BeginTx(ctx(t), nil)
	require.NoError(t, err)
	defer func() { _ = heavy.Rollback() }()
	_, err = heavy.ExecContext(ctx(t), "UPDATE stock_buckets SET db_quota = 0 WHERE sale_id = ?", sale.ID)
	require.NoError(t, err)

	ref := fmt.Sprintf("deadlock-%d", sale.ID)
	done := make(chan error, 1)
	go func() { done <- st.AdjustStock(ctx(t), sale.ID, 5, ref) }()
	require.Eventually(t, func() bool {
		var waiting int
		err := st.DB.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ?",
			fmt.Sprintf("SELECT bucket_no, stock FROM stock_buckets WHERE sale_id = %d %%FOR UPDATE", sale.ID)).Scan(&waiting)
		return err == nil && waiting > 0
	}, 30*time.Second, 10*time.Millisecond, "AdjustStock waits for the buckets")
	_, err = heavy.ExecContext(ctx(t), "UPDATE sales SET title = CONCAT(title, '') WHERE id = ?", sale.ID)
	require.NoError(t, err, "the lighter AdjustStock was the victim")
	require.NoError(t, heavy.Rollback())
	require.NoError(t, <-done)

	var after int64
	require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_DEADLOCKS'").Scan(&after))
	require.Greater(t, after, before, "a deadlock happened")
	require.EqualValues(t, 64+5, stockOf(t, st, sale.ID), "applied once")
	require.Equal(t, 1, rowsOf(t, st, "stock_ledger", "token = ? AND operation = 'adjust'", ref))
}

// A Redis hold's record before its 202, its answer lost in each of its
// ways to the database: the hold is recorded once, with one unit, and
// promised; a group's own row, read back, is no sign of a Redis back in
// time.
func TestLostAnswersOfAHoldRecord(t *testing.T) {
	st, layer := faultStore(t)
	for i, c := range []struct {
		name  string
		seq   bool // numbered by Redis: a new hold, recorded in a group
		unit  bool
		match string
		when  dbfault.When
	}{
		{"group committed", true, true, "SAVEPOINT seckill_part", dbfault.AfterApply},
		{"group never sent", true, true, "SAVEPOINT seckill_part", dbfault.BeforeSend},
		{"script committed", false, true, "START TRANSACTION", dbfault.AfterApply},
		{"script never sent", false, true, "START TRANSACTION", dbfault.BeforeSend},
		{"transaction committed", true, false, dbfault.CommitQuery, dbfault.AfterApply},
		{"transaction never committed", true, false, dbfault.CommitQuery, dbfault.BeforeSend},
	} {
		t.Run(c.name, func(t *testing.T) {
			sale := testenv.MustSale(t, st, 3)
			in := redisHold(sale, testenv.UniqueUser(), fmt.Sprintf("lost-hold-%d", i))
			var seq int64
			if c.seq {
				seq = 1
			}
			if c.match == dbfault.CommitQuery {
				layer.Lose(dbfault.Containing(c.match), c.when, 1)
			} else {
				layer.Lose(dbfault.Containing(c.match, in.Token), c.when, 1)
			}
			lost := layer.Lost()
			rec, err := st.RecordRedisHold(ctx(t), in, sale.ModeEpoch, seq, c.unit)
			require.NoError(t, err)
			require.Equal(t, lost+1, layer.Lost(), "the answer was lost")
			require.True(t, rec.Promised(), "%+v", rec)
			require.False(t, rec.WentBack, "its own row is no Redis back in time")
			require.Equal(t, 1, rowsOf(t, st, "reservations", "token = ?", in.Token))
			want := 0
			if c.unit {
				want = 1
			}
			require.Equal(t, want, rowsOf(t, st, "stock_ledger", "token = ? AND operation = 'deduct'", in.Token))
			require.EqualValues(t, 3-want, stockOf(t, st, sale.ID))

			again, err := st.RecordRedisHold(ctx(t), in, sale.ModeEpoch, 0, c.unit)
			require.NoError(t, err)
			require.True(t, again.Promised(), "a replay gets the same answer")
		})
	}
}

// A payment to refund, its insert's answer lost: one refund, and the
// answer names it.
func TestLostAnswerOfARefund(t *testing.T) {
	st, layer := faultStore(t)
	sale := testenv.MustSale(t, st, 2)
	user := testenv.UniqueUser()
	in := mustQueued(t, st, sale, user, "lost-refund-1")
	for _, when := range []dbfault.When{dbfault.AfterApply, dbfault.BeforeSend} {
		ref := fmt.Sprintf("pay-lost-%d", when)
		layer.Lose(dbfault.Containing("INSERT IGNORE", "refunds", ref), when, 1)
		r, err := st.RecordRefund(ctx(t), store.Refund{Token: in.Token, SaleID: sale.ID, UserID: user, PaymentRef: ref, AmountCents: 999, Reason: "reservation_expired"})
		require.NoError(t, err)
		require.NotZero(t, r.ID)
		require.Equal(t, 1, rowsOf(t, st, "refunds", "token = ? AND payment_ref = ?", in.Token, ref))
	}
	require.Equal(t, 2, layer.Lost())
}

// An admin write under an Idempotency-Key, each of its writes' answers
// lost: the claim is owned by its claimer, the answer stored, the sale
// created once and the stock adjusted once.
func TestLostAnswersOfAdminWrites(t *testing.T) {
	st, layer := faultStore(t)
	scope, body := hashOf(fmt.Sprintf("lost-claim-%d", testenv.UniqueUser())), hashOf("body")
	layer.Lose(dbfault.Containing("INSERT INTO idempotency_keys"), dbfault.AfterApply, 1)
	c, err := st.ClaimKey(ctx(t), scope, body, time.Hour)
	require.NoError(t, err)
	require.True(t, c.Owned, "the claim whose answer was lost is its claimer's")
	other, err := st.ClaimKey(ctx(t), scope, body, time.Hour)
	require.NoError(t, err)
	require.Equal(t, store.KeyClaim{}, other, "and no one else's")

	title := fmt.Sprintf("lost-create-%d", testenv.UniqueUser())
	sale := &domain.Sale{GoodsID: 1, Title: title, PriceCents: 100, StockTotal: 10, Buckets: 2,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour), PaymentWindowSeconds: 60}
	ref := "idem-" + title
	layer.Lose(dbfault.Containing(dbfault.CommitQuery), dbfault.AfterApply, 1)
	require.NoError(t, st.CreateSaleOnce(ctx(t), sale, ref))
	require.Equal(t, 1, rowsOf(t, st, "sales", "title = ?", title), "created once")
	var created int64
	require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT sale_id FROM stock_ledger WHERE token = ? AND operation = 'create'", ref).Scan(&created))
	require.Equal(t, created, sale.ID, "the answer names the sale created")

	for i, when := range []dbfault.When{dbfault.AfterApply, dbfault.BeforeSend} {
		adjust := fmt.Sprintf("%s-adjust-%d", ref, i)
		layer.Lose(dbfault.Containing(dbfault.CommitQuery), when, 1)
		require.NoError(t, st.AdjustStock(ctx(t), sale.ID, 4, adjust))
		require.EqualValues(t, 14+4*i, stockOf(t, st, sale.ID), "adjusted once")
		require.Equal(t, 1, rowsOf(t, st, "stock_redis_pending", "ref = ?", adjust))
	}

	layer.Lose(dbfault.Containing("UPDATE idempotency_keys SET status"), dbfault.AfterApply, 1)
	require.NoError(t, st.FinishKey(ctx(t), scope, 201, []byte(`{"id":1}`)))
	c, err = st.ClaimKey(ctx(t), scope, body, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 201, c.Status, "the answer was stored")
	require.Equal(t, 5, layer.Lost())
}

// The database path's reservation, its answer lost after the commit or
// before it was sent: as a transaction (the sale's first, which opens the quota), a script (alone)
// and a group's part. One reservation, one order, one unit, and the caller
// gets the reservation as its own (not a replay: its workflow is still to
// start).
func TestLostAnswersOfTheDatabasePath(t *testing.T) {
	st, layer := faultStore(t)
	base := testenv.UniqueUser() * 1000
	for w, when := range []dbfault.When{dbfault.AfterApply, dbfault.BeforeSend} {
		sale := mustDatabaseSale(t, st, 10, 2)
		for i, c := range []struct {
			name    string
			match   func(token string) func(string) bool
			reserve func(context.Context, domain.OrderInput) (*domain.Reservation, bool, error)
		}{
			{"transaction", func(string) func(string) bool { return dbfault.Containing(dbfault.CommitQuery) }, st.ReserveInDB},
			{"script", func(tok string) func(string) bool { return dbfault.Containing("START TRANSACTION", tok) }, st.ReserveInDBAlone},
			{"group", func(tok string) func(string) bool { return dbfault.Containing("SAVEPOINT seckill_part", tok) }, st.ReserveInDB},
		} {
			in := dbInput(sale, base+int64(10*w+i), fmt.Sprintf("lost-db-%04d", 10*w+i))
			lost := layer.Lost()
			layer.Lose(c.match(in.Token), when, 1)
			res, replay, err := c.reserve(ctx(t), in)
			require.NoError(t, err, c.name)
			require.False(t, replay, c.name)
			require.Equal(t, in.Token, res.Token)
			require.Equal(t, domain.StatusPendingPayment, res.Status)
			require.Equal(t, lost+1, layer.Lost(), "%s: the answer was lost", c.name)
			require.Equal(t, 1, rowsOf(t, st, "reservations", "token = ?", in.Token))
			require.Equal(t, 1, rowsOf(t, st, "orders", "token = ?", in.Token))
			require.Equal(t, 1, rowsOf(t, st, "stock_ledger", "token = ? AND operation = 'deduct'", in.Token))
			require.Equal(t, 1, rowsOf(t, st, "outbox", "token = ?", in.Token))
			require.EqualValues(t, 10-(i+1), stockOf(t, st, sale.ID))
		}
	}
}

// The answers of many holds recorded at once, in groups, lost now and
// then: every hold is promised once and the units add up.
func TestLostGroupAnswersUnderConcurrency(t *testing.T) {
	st, layer := faultStore(t)
	const stock, holds = 40, 40
	sale := testenv.MustSale(t, st, stock, func(s *domain.Sale) { s.Buckets = 4 })
	base := testenv.UniqueUser() * 1000
	layer.Lose(dbfault.Containing("SAVEPOINT seckill_part"), dbfault.AfterApply, 2)
	var wg sync.WaitGroup
	errs := make(chan error, holds)
	for i := range holds {
		if i%10 == 0 {
			wg.Wait() // in waves, so that more than two groups go
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := redisHold(sale, base+int64(i), fmt.Sprintf("lost-group-%04d", i))
			rec, err := st.RecordRedisHold(ctx(t), in, sale.ModeEpoch, int64(i+1), true)
			switch {
			case err != nil:
				errs <- err
			case !rec.Promised() || rec.WentBack:
				errs <- fmt.Errorf("hold %d: %+v", i, rec)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Equal(t, 2, layer.Lost())
	require.Equal(t, holds, rowsOf(t, st, "reservations", "sale_id = ?", sale.ID))
	require.Equal(t, holds, rowsOf(t, st, "stock_ledger", "sale_id = ? AND operation = 'deduct'", sale.ID))
	require.EqualValues(t, stock-holds, stockOf(t, st, sale.ID))
}

// The gate's operator writes and a user's appeal, each answer lost after
// the commit: the allowlist answers what it holds, the appeal is filed
// once and resolved once, and each caller is told it succeeded.
func TestLostAnswersOfGateWrites(t *testing.T) {
	st, layer := faultStore(t)
	sale := testenv.MustSale(t, st, 1)
	user := testenv.UniqueUser()

	layer.Lose(dbfault.Containing(dbfault.CommitQuery), dbfault.AfterApply, 1)
	restricted, listed, err := st.UpdateAllowlist(ctx(t), sale.ID, store.AllowlistChange{Add: []int64{user, user + 1}})
	require.NoError(t, err)
	require.True(t, restricted)
	require.EqualValues(t, 2, listed)
	var version int64
	require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT allowlist_version FROM sales WHERE id = ?", sale.ID).Scan(&version))
	require.EqualValues(t, 1, version, "applied once")

	a := &domain.Appeal{UserID: user, SaleID: sale.ID, Reason: "challenge", Message: "let me in"}
	layer.Lose(dbfault.Containing("INSERT INTO", "appeals"), dbfault.AfterApply, 1)
	require.NoError(t, st.FileAppeal(ctx(t), a), "the appeal whose answer was lost is the user's own")
	require.NotZero(t, a.ID)
	require.Equal(t, 1, rowsOf(t, st, "appeals", "user_id = ? AND sale_id = ?", user, sale.ID))
	again := &domain.Appeal{UserID: user, SaleID: sale.ID, Reason: "challenge", Message: "let me in"}
	require.Equal(t, domain.EAppealExists, domain.ErrorCode(st.FileAppeal(ctx(t), again)), "a second one is refused")

	layer.Lose(dbfault.Containing(dbfault.CommitQuery), dbfault.AfterApply, 1)
	resolved, err := st.ResolveAppeal(ctx(t), a.ID, domain.ActionReject, 7)
	require.NoError(t, err, "the resolution whose answer was lost is answered as done")
	require.Equal(t, domain.AppealRejected, resolved.State)
	_, err = st.ResolveAppeal(ctx(t), a.ID, domain.ActionReject, 7)
	require.Equal(t, domain.EConflict, domain.ErrorCode(err), "a later resolution is refused")
	require.Equal(t, 3, layer.Lost())
}

// A node that takes no writes (a Galera node outside the primary
// component answers 1047 on the same connection until it rejoins) costs
// its connection: the pool drops it and the write's retry dials again. A
// deadlock victim's connection is kept.
func TestANodeTakingNoWritesIsDroppedFromThePool(t *testing.T) {
	st, layer := faultStore(t)
	sale := testenv.MustSale(t, st, 1)
	st.DB.DB.SetMaxOpenConns(1) // one connection: the one the write met is the one asked
	connection := func() int64 {
		var id int64
		require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT CONNECTION_ID()").Scan(&id))
		return id
	}
	first := connection()

	notReady := &mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}
	layer.Answer(dbfault.Containing("UPDATE", "sales", "control"), notReady, 1)
	got, err := st.SetSaleControl(ctx(t), sale.ID, domain.ControlPaused)
	require.NoError(t, err, "retried on a new connection")
	require.Equal(t, domain.ControlPaused, got.Control)
	second := connection()
	require.NotEqual(t, first, second, "the connection that met the node was dropped")

	layer.Answer(dbfault.Containing("UPDATE", "sales", "control"), &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}, 1)
	got, err = st.SetSaleControl(ctx(t), sale.ID, domain.ControlActive)
	require.NoError(t, err, "a refused write is retried")
	require.Equal(t, domain.ControlActive, got.Control)
	require.Equal(t, second, connection(), "a deadlock victim's connection is kept")
	require.Equal(t, 2, layer.Lost())
}

// The worker's marks: a take of "Redis went back" whose answer was lost is
// answered taken (a rebuild too many, never one missed), a start enqueued
// whose answer was lost is enqueued once.
func TestLostAnswersOfTheWorkersMarks(t *testing.T) {
	st, layer := faultStore(t)
	sale := testenv.MustSale(t, st, 1)
	layer.Lose(dbfault.Containing("redis_went_back_at = NOW(3)"), dbfault.AfterApply, 1)
	require.NoError(t, st.MarkRedisWentBack(ctx(t), sale.ID))
	layer.Lose(dbfault.Containing("redis_went_back_at = NULL"), dbfault.AfterApply, 1)
	took, err := st.TakeRedisWentBack(ctx(t), sale.ID)
	require.NoError(t, err)
	require.True(t, took, "a take whose answer was lost rebuilds")
	got, err := st.GetSale(ctx(t), sale.ID)
	require.NoError(t, err)
	require.False(t, got.RedisWentBack, "the mark is taken")
	took, err = st.TakeRedisWentBack(ctx(t), sale.ID)
	require.NoError(t, err)
	require.False(t, took, "and taken once")

	in := mustQueued(t, st, sale, testenv.UniqueUser(), "lost-outbox-1")
	dispatchedAtEnd(t, st, sale.ID)
	layer.Lose(dbfault.Containing("INSERT IGNORE INTO outbox", in.Token), dbfault.AfterApply, 1)
	require.NoError(t, st.EnqueueStart(ctx(t), in.Token, sale.ID))
	require.Equal(t, 1, rowsOf(t, st, "outbox", "token = ?", in.Token))
	require.Equal(t, 3, layer.Lost())
}

// A sale's mode changes, each answer lost: the switch to the database
// path is read back; a resync's start is its caller's (it gets the new
// epoch and rebuilds; a second start finds the sale moving already), and
// so is its return to Redis.
func TestLostAnswersOfModeChanges(t *testing.T) {
	st, layer := faultStore(t)
	sale := testenv.MustSale(t, st, 2)
	require.NoError(t, st.RecordRedisStock(ctx(t), sale.ID, 2, time.Now()))
	layer.Lose(dbfault.Containing("UPDATE sales SET mode", "db_sell_after"), dbfault.AfterApply, 1)
	switched, err := st.SwitchToDatabase(ctx(t), sale.ID, 0)
	require.NoError(t, err, "the switch whose answer was lost is read back")
	require.Equal(t, domain.ModeDatabase, switched.Mode)
	require.EqualValues(t, 2, switched.ModeEpoch, "switched once")
	dispatchedAtEnd(t, st, sale.ID)
	layer.Lose(dbfault.Containing("UPDATE sales SET mode", "mode_epoch = mode_epoch + 1"), dbfault.AfterApply, 1)
	epoch, err := st.BeginResync(ctx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, 2, layer.Lost())
	got, err := st.GetSale(ctx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeResync, got.Mode)
	require.Equal(t, got.ModeEpoch, epoch)
	require.EqualValues(t, 3, epoch, "moved once")
	_, err = st.BeginResync(ctx(t), sale.ID)
	require.ErrorIs(t, err, domain.ErrSaleResyncing)

	layer.Lose(dbfault.Containing("UPDATE sales SET mode", "db_quota = NULL"), dbfault.AfterApply, 1)
	require.NoError(t, st.FinishResync(ctx(t), sale.ID, epoch), "the return whose answer was lost is its caller's")
	require.Equal(t, 3, layer.Lost())
	got, err = st.GetSale(ctx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeRedis, got.Mode)
	require.Error(t, st.FinishResync(ctx(t), sale.ID, epoch-1), "a stale epoch is refused")
}
