package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/uptrace/bun"

	"github.com/seckill/seckill/domain"
)

type reservationRow struct {
	bun.BaseModel `bun:"table:reservations"`

	Token       string     `bun:"token,pk"`
	SaleID      int64      `bun:"sale_id"`
	UserID      int64      `bun:"user_id"`
	RequestID   string     `bun:"request_id"`
	Path        string     `bun:"path"`
	Status      string     `bun:"status"`
	OrderNo     *string    `bun:"order_no"`
	AmountCents int64      `bun:"amount_cents"`
	PayBy       *time.Time `bun:"pay_by"`
	PaymentRef  *string    `bun:"payment_ref"`
	FailReason  *string    `bun:"fail_reason"`
	CreatedAt   time.Time  `bun:"created_at"`
	UpdatedAt   time.Time  `bun:"updated_at"`
	// UnitBucket is where the hold's unit was taken when it was recorded
	// (RecordRedisHold); nil when its order takes one.
	UnitBucket *int   `bun:"unit_bucket"`
	RedisSeq   *int64 `bun:"redis_seq"`
	LiveUser   *int64 `bun:"live_user,scanonly"`
}

func (r *reservationRow) domain() *domain.Reservation {
	out := &domain.Reservation{
		Token:       r.Token,
		SaleID:      r.SaleID,
		UserID:      r.UserID,
		RequestID:   r.RequestID,
		Path:        domain.ReservationPath(r.Path),
		Status:      domain.ReservationStatus(r.Status),
		AmountCents: r.AmountCents,
		CreatedAt:   r.CreatedAt.UTC(),
		UpdatedAt:   r.UpdatedAt.UTC(),
	}
	if r.OrderNo != nil {
		out.OrderNo = *r.OrderNo
	}
	if r.PaymentRef != nil {
		out.PaymentRef = *r.PaymentRef
	}
	if r.FailReason != nil {
		out.FailReason = *r.FailReason
	}
	if r.PayBy != nil {
		t := r.PayBy.UTC()
		out.PayBy = &t
	}
	return out
}

// querier is what both *bun.DB and bun.Tx offer.
type querier interface {
	NewSelect() *bun.SelectQuery
}

// tokenUser is the user (so the partition) of the reservation whose
// token is the argument: reservations are partitioned by user_id, and a
// token's row is found in its one partition by (token, user_id).
const tokenUser = "(SELECT user_id FROM reservation_keys WHERE token = ?)"

// reservationByToken selects the reservation of token into row.
func reservationByToken(q querier, row *reservationRow, token string) *bun.SelectQuery {
	return q.NewSelect().Model(row).Where("token = ? AND user_id = "+tokenUser, token, token)
}

func getReservation(ctx context.Context, q querier, token string, forUpdate bool) (*reservationRow, error) {
	row := new(reservationRow)
	sel := reservationByToken(q, row, token)
	if forUpdate {
		sel = sel.For("UPDATE")
	}
	err := sel.Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return row, nil
}

// updateReservation is every transition's transaction: it locks the
// reservation row, lets fn check it and write the change (mirroring it on
// res), and returns the reservation as fn left it; an error from fn rolls
// everything back. op names the transition in errors.
func (s *Store) updateReservation(ctx context.Context, op, token string, fn func(ctx context.Context, tx bun.Tx, res *reservationRow) error) (*domain.Reservation, error) {
	var out *domain.Reservation
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		res, err := getReservation(ctx, tx, token, true)
		if err != nil {
			return fmt.Errorf("lock reservation: %w", err)
		}
		if err := fn(ctx, tx, res); err != nil {
			return err
		}
		out = res.domain()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, token, err)
	}
	return out, nil
}

// RecordReservation records a reservation as QUEUED, or leaves the row that
// is there; either way it returns where the reservation stands now. A
// Redis hold is decided as RecordRedisHold decides it (its unit taken, or
// the row FAILED with the refusal), without its 202's guard: no answer
// waits on it.
func (s *Store) RecordReservation(ctx context.Context, in domain.OrderInput) (*domain.Reservation, error) {
	if !in.NoRedisHold() {
		res, err := s.GetReservation(ctx, in.Token)
		if !errors.Is(err, ErrNotFound) {
			return res, err
		}
		if _, err := s.recordHoldTx(ctx, in, nil, 0, true, false); err != nil {
			return nil, fmt.Errorf("record reservation %s: %w", in.Token, err)
		}
		return s.GetReservation(ctx, in.Token)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	_, err := s.DB.ExecContext(ctx, `INSERT IGNORE INTO reservations
		(token, sale_id, user_id, request_id, path, status, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		in.Token, in.SaleID, in.UserID, in.RequestID, string(in.Path), string(domain.StatusQueued), now, now)
	if err != nil {
		return nil, fmt.Errorf("record reservation %s: %w", in.Token, err)
	}
	return s.GetReservation(ctx, in.Token)
}

// HoldsAnotherLive reports whether the user has a live reservation of the
// sale (queued, pending payment or paid) other than token: its release
// must keep the user's buyer mark.
func (s *Store) HoldsAnotherLive(ctx context.Context, saleID, userID int64, token string) (bool, error) {
	var n int
	err := s.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM reservations
		WHERE user_id = ? AND sale_id = ? AND token <> ? AND status IN (?, ?, ?)`,
		userID, saleID, token, string(domain.StatusQueued), string(domain.StatusPendingPayment), string(domain.StatusPaid)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("other live reservations of user %d in sale %d: %w", userID, saleID, err)
	}
	return n > 0, nil
}

// GetReservation reads one reservation; ErrNotFound when there is none.
func (s *Store) GetReservation(ctx context.Context, token string) (*domain.Reservation, error) {
	row, err := getReservation(ctx, s.DB, token, false)
	if err != nil {
		return nil, fmt.Errorf("get reservation %s: %w", token, err)
	}
	return row.domain(), nil
}

// RecordedTokens answers which of the tokens the database has recorded.
func (s *Store) RecordedTokens(ctx context.Context, tokens []string) (map[string]bool, error) {
	out := make(map[string]bool, len(tokens))
	if len(tokens) == 0 {
		return out, nil
	}
	var found []string
	err := s.DB.NewSelect().Table("reservation_keys").Column("token").Where("token IN (?)", bun.List(tokens)).Scan(ctx, &found)
	if err != nil {
		return nil, fmt.Errorf("recorded tokens (%d asked): %w", len(tokens), err)
	}
	for _, t := range found {
		out[t] = true
	}
	return out, nil
}

// EndedReservations reads, of the tokens given, the reservations that
// ended without a unit (expired, cancelled, failed): their owner, request
// id and status. A token not in the answer is live, paid or unknown.
func (s *Store) EndedReservations(ctx context.Context, tokens []string) (map[string]*domain.Reservation, error) {
	out := make(map[string]*domain.Reservation, len(tokens))
	if len(tokens) == 0 {
		return out, nil
	}
	var rows []reservationRow
	err := s.DB.NewRaw(`SELECT r.token, r.sale_id, r.user_id, r.request_id, r.status
		FROM reservation_keys k JOIN reservations r ON r.token = k.token AND r.user_id = k.user_id
		WHERE k.token IN (?) AND r.status IN (?)`, bun.List(tokens),
		bun.List(endedStatuses)).
		Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("ended reservations (%d asked): %w", len(tokens), err)
	}
	for i := range rows {
		out[rows[i].Token] = rows[i].domain()
	}
	return out, nil
}

// FindReservation finds a reservation by its replay key.
func (s *Store) FindReservation(ctx context.Context, saleID, userID int64, requestID string) (*domain.Reservation, error) {
	row := new(reservationRow)
	err := s.DB.NewSelect().Model(row).Where("sale_id = ? AND user_id = ? AND request_id = ?", saleID, userID, requestID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("find reservation: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("find reservation: %w", err)
	}
	return row.domain(), nil
}

// ListReservations lists a user's reservations, newest first, of one sale
// when saleID > 0: from the user's one partition.
func (s *Store) ListReservations(ctx context.Context, userID, saleID int64, limit int) ([]*domain.Reservation, error) {
	return listReservations(ctx, s.DB, userID, saleID, limit, time.Time{})
}

// listReservations is ListReservations on db, of the rows created at or
// after since (any, when since is zero).
func listReservations(ctx context.Context, db querier, userID, saleID int64, limit int, since time.Time) ([]*domain.Reservation, error) {
	var rows []reservationRow
	if err := listQuery(db, &rows, userID, saleID, limit, since).Scan(ctx); err != nil {
		return nil, fmt.Errorf("list reservations of user %d: %w", userID, err)
	}
	out := make([]*domain.Reservation, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, nil
}

// listQuery selects a user's reservations from the user's one partition,
// newest first, of one sale when saleID > 0, created at or after since
// (any, when since is zero).
func listQuery(db querier, rows *[]reservationRow, userID, saleID int64, limit int, since time.Time) *bun.SelectQuery {
	q := db.NewSelect().Model(rows).Where("user_id = ?", userID)
	if saleID > 0 {
		q = q.Where("sale_id = ?", saleID)
	}
	if !since.IsZero() {
		q = q.Where("created_at >= ?", since.UTC())
	}
	return q.Order("created_at DESC", "token DESC").Limit(int64(limit))
}

// CountReservations counts a sale's reservations by status.
func (s *Store) CountReservations(ctx context.Context, saleID int64) (map[domain.ReservationStatus]int64, error) {
	var rows []struct {
		Status string `bun:"status"`
		N      int64  `bun:"n"`
	}
	if err := s.DB.NewRaw("SELECT status, COUNT(*) AS n FROM reservations WHERE sale_id = ? GROUP BY status", saleID).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("count reservations of sale %d: %w", saleID, err)
	}
	out := map[domain.ReservationStatus]int64{}
	for _, r := range rows {
		out[domain.ReservationStatus(r.Status)] = r.N
	}
	return out, nil
}

// PlaceOrder turns a QUEUED reservation into a PENDING_PAYMENT order in one
// transaction: the reservation moves on, the order is inserted (the unique
// live_user key refuses a second live order of the user), the ledger row
// written, and, last, one unit deducted from a bucket with a conditional
// update checked by affected rows. Rerun on a reservation that is no
// longer QUEUED it changes nothing and returns where the reservation
// stands. It makes two round trips: a read of the reservation with its
// sale and a bucket with a unit (no lock), and the transaction sent whole
// (placeOrderScript). When that bucket ran out meanwhile, or the
// reservation moved on, it places the order statement by statement
// (placeOrderTx).
func (s *Store) PlaceOrder(ctx context.Context, token string) (*domain.Reservation, error) {
	return s.placeOrder(ctx, token, nil)
}

// placeOrder is PlaceOrder; a test may name the bucket the order wants
// (want) in place of the one the read picks.
func (s *Store) placeOrder(ctx context.Context, token string, want *int) (*domain.Reservation, error) {
	var read struct {
		reservationRow
		PriceCents           int64         `bun:"price_cents"`
		PaymentWindowSeconds int           `bun:"payment_window_seconds"`
		Buckets              int           `bun:"buckets"`
		OpenBucket           sql.NullInt64 `bun:"open_bucket"`
	}
	err := s.DB.NewRaw("SELECT r.*, r.unit_bucket, sales.price_cents, sales.payment_window_seconds, sales.buckets, "+openBucketColumn(false)+` AS open_bucket
		FROM reservations r JOIN sales ON sales.id = r.sale_id WHERE r.token = ? AND r.user_id = `+tokenUser, token, token).Scan(ctx, &read)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("place order %s: read: %w", token, err)
	}
	res := &read.reservationRow
	if res.Status != string(domain.StatusQueued) {
		return res.domain(), nil
	}
	if res.UnitBucket != nil {
		return s.placeHeldOrder(ctx, res, read.PriceCents, read.PaymentWindowSeconds, read.Buckets)
	}
	bucket := pickedBucket(read.OpenBucket)
	if want != nil {
		bucket = *want
	}
	if bucket < 0 {
		return s.placeOrderTx(ctx, token)
	}
	o := orderFor(token, res.SaleID, res.UserID, read.PriceCents, read.PaymentWindowSeconds, read.Buckets)
	switch err := placeOrderScript(ctx, s.DB, o, bucket); {
	case err == nil:
		o.placed(res)
		return res.domain(), nil
	case errors.Is(err, errStalePick), errors.Is(err, errNotQueued):
		return s.placeOrderTx(ctx, token)
	default:
		return nil, fmt.Errorf("place order %s: %w", token, err)
	}
}

// placeHeldOrder places the order of a hold that took its unit when it was
// recorded (RecordRedisHold): the reservation's move, the order on the
// hold's bucket, and no deduction (the ledger has the hold's). One round
// trip; a reservation no longer QUEUED by then is read again under lock.
func (s *Store) placeHeldOrder(ctx context.Context, res *reservationRow, priceCents int64, windowSeconds, buckets int) (*domain.Reservation, error) {
	o := orderFor(res.Token, res.SaleID, res.UserID, priceCents, windowSeconds, buckets)
	var sc script
	sc.add(placeOrderRows(o, *res.UnitBucket)[:2]...)
	switch err := sc.run(ctx, s.DB); {
	case err == nil:
		o.placed(res)
		return res.domain(), nil
	case errors.Is(err, errNotQueued):
		return s.placeOrderTx(ctx, res.Token)
	default:
		return nil, fmt.Errorf("place order %s: %w", res.Token, err)
	}
}

// errNotQueued: the reservation PlaceOrder read QUEUED was not by the time
// its script placed the order.
var errNotQueued = errors.New("the reservation is no longer queued")

// placeOrderScript is PlaceOrder's transaction in one round trip: the
// reservation's move to PENDING_PAYMENT (first, so its row lock is taken
// before the order's, as in every path), the order, the ledger row, and
// last the unit from bucket. errStalePick when bucket has no unit left,
// errNotQueued when the reservation is not QUEUED: either rolled it back
// whole.
func placeOrderScript(ctx context.Context, db bun.IDB, o newOrder, bucket int) error {
	var sc script
	sc.add(placeOrderRows(o, bucket)...)
	sc.add(o.takePicked(bucket))
	return sc.run(ctx, db)
}

// placeOrderRows are the rows of a placed order, in the order written: the
// reservation's move from QUEUED to PENDING_PAYMENT (no row: errNotQueued;
// first, so its row lock is taken before the order's, as in every path),
// the order, the ledger row. bucket is where the unit is to come from (-1:
// not known yet; takeUnit sets it). A hold that took its unit when it was
// recorded writes the first two only.
func placeOrderRows(o newOrder, bucket int) []step {
	return []step{
		{stmt: stmt{"UPDATE reservations SET status = ?, order_no = ?, amount_cents = ?, pay_by = ?, updated_at = ? WHERE token = ? AND user_id = ? AND status = ?", []any{
			string(domain.StatusPendingPayment), o.OrderNo, o.AmountCents, o.PayBy, o.Now, o.Token, o.UserID, string(domain.StatusQueued)}},
			what: "update reservation", none: errNotQueued},
		insertOrder(o, bucket),
		deductLedger(o, bucket),
	}
}

// placeOrderTx is PlaceOrder's transaction when the bucket picked is no
// use: it locks the reservation, writes the rows placeOrderScript writes
// statement by statement, and takes the unit from any bucket with one not
// held by another transaction (takeUnit, deductBucket).
func (s *Store) placeOrderTx(ctx context.Context, token string) (*domain.Reservation, error) {
	return s.updateReservation(ctx, "place order", token, func(ctx context.Context, tx bun.Tx, res *reservationRow) error {
		if res.Status != string(domain.StatusQueued) {
			return nil
		}
		var sale struct {
			PriceCents           int64 `bun:"price_cents"`
			PaymentWindowSeconds int   `bun:"payment_window_seconds"`
			Buckets              int   `bun:"buckets"`
		}
		if err := tx.NewRaw("SELECT price_cents, payment_window_seconds, buckets FROM sales WHERE id = ?",
			res.SaleID).Scan(ctx, &sale); err != nil {
			return fmt.Errorf("read sale: %w", err)
		}
		o := orderFor(token, res.SaleID, res.UserID, sale.PriceCents, sale.PaymentWindowSeconds, sale.Buckets)
		if res.UnitBucket != nil {
			// The hold took its unit when it was recorded.
			if err := runSteps(ctx, tx, placeOrderRows(o, *res.UnitBucket)[:2]); err != nil {
				return err
			}
			o.placed(res)
			return nil
		}
		if err := runSteps(ctx, tx, placeOrderRows(o, -1)); err != nil {
			return err
		}
		if err := takeUnit(ctx, tx, o); err != nil {
			return err
		}
		o.placed(res)
		return nil
	})
}

// newOrder is what an order path writes.
type newOrder struct {
	OrderNo     string
	Token       string
	SaleID      int64
	UserID      int64
	AmountCents int64
	PayBy       time.Time
	Buckets     int
	Now         time.Time
	// Quota: the unit is the database path's, so it also takes one unit
	// of the bucket's share of that path's quota (openQuota).
	Quota bool
}

// orderFor is the order a reservation of token places now, paid for by
// the end of the sale's payment window.
func orderFor(token string, saleID, userID, priceCents int64, windowSeconds, buckets int) newOrder {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return newOrder{
		OrderNo: ulid.Make().String(), Token: token, SaleID: saleID, UserID: userID, AmountCents: priceCents,
		PayBy: now.Add(time.Duration(windowSeconds) * time.Second), Buckets: buckets, Now: now,
	}
}

// placed mirrors on res what placing the order wrote.
func (o newOrder) placed(res *reservationRow) {
	res.Status, res.OrderNo, res.AmountCents, res.PayBy, res.UpdatedAt = string(domain.StatusPendingPayment), &o.OrderNo, o.AmountCents, &o.PayBy, o.Now
}

// insertOrder inserts the order, PENDING_PAYMENT, with the bucket its unit
// is to come from. The unique live_user key refuses a second live order of
// the user: domain.ErrAlreadyHolds.
func insertOrder(o newOrder, bucket int) step {
	return step{stmt: stmt{"INSERT INTO orders (" + orderColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", []any{
		o.OrderNo, o.Token, o.SaleID, o.UserID, o.AmountCents, string(domain.StatusPendingPayment), bucket, o.PayBy, o.Now, o.Now}},
		what: "insert order", dup: domain.ErrAlreadyHolds}
}

// deductLedger writes the ledger's deduct row of the order's unit, from
// bucket (takeUnit moves it if the unit comes from another).
func deductLedger(o newOrder, bucket int) step {
	return step{stmt: stmt{`INSERT INTO stock_ledger (token, operation, sale_id, bucket_no, delta, created_at)
		VALUES (?, 'deduct', ?, ?, -1, ?)`, []any{o.Token, o.SaleID, bucket, o.Now}}, what: "ledger deduct"}
}

// takePicked takes the order's unit from bucket, the one its read picked,
// waiting for its row at most wantLockWait: a script's last step. No row
// (the bucket ran out since the read): errStalePick.
func (o newOrder) takePicked(bucket int) step {
	return step{stmt: takeFromStmt(o.SaleID, bucket, o.Quota), what: "deduct bucket", none: errStalePick, lockWait: o.wantLockWait()}
}

// orderColumns are the columns insertOrder and insertOrderIfDatabase write.
const orderColumns = "order_no, token, sale_id, user_id, amount_cents, status, bucket_no, pay_by, created_at, updated_at"

// openBucketColumn is a subquery on a row of sales that names a bucket
// with a unit (and, with quota, a unit of the database path's quota): the
// first from a random bucket on, wrapping around; NULL when none has. It
// reads without locking: the order's transaction takes the unit from that
// bucket last (the last step of its script), so the bucket's row lock is
// held for no round trip of the client's.
func openBucketColumn(quota bool) string {
	has := "b.stock >= 1"
	if quota {
		has += " AND b.db_quota >= 1"
	}
	// A random number reduced modulo the sale's bucket count (at most 1,024).
	start := strconv.Itoa(rand.IntN(1 << 30))
	return `COALESCE(
		(SELECT b.bucket_no FROM stock_buckets b WHERE b.sale_id = sales.id AND b.bucket_no >= ` + start + ` MOD sales.buckets AND ` + has + ` ORDER BY b.bucket_no LIMIT 1),
		(SELECT b.bucket_no FROM stock_buckets b WHERE b.sale_id = sales.id AND ` + has + ` ORDER BY b.bucket_no LIMIT 1))`
}

// pickedBucket is openBucketColumn's answer, -1 for none.
func pickedBucket(b sql.NullInt64) int {
	if !b.Valid {
		return -1
	}
	return int(b.Int64)
}

// takeUnit takes the order's unit from any bucket with one that no other
// transaction holds (deductBucket), as its transaction's last statements
// before the commit, and moves the order's bucket and its ledger row's
// there (written naming none, -1). It is the way of an order whose picked
// bucket was no use: ran out, or held past wantLockWait, or none picked
// (the scripts take theirs from the bucket picked). domain.ErrSoldOut when no
// bucket has a unit: the caller rolls back.
func takeUnit(ctx context.Context, tx bun.Tx, o newOrder) error {
	bucket, err := deductBucket(ctx, tx, o.SaleID, o.Buckets, o.Quota)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE orders SET bucket_no = ? WHERE order_no = ? AND user_id = ?", bucket, o.OrderNo, o.UserID); err != nil {
		return fmt.Errorf("record bucket: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE stock_ledger SET bucket_no = ? WHERE token = ? AND operation = 'deduct'", bucket, o.Token); err != nil {
		return fmt.Errorf("record ledger bucket: %w", err)
	}
	return nil
}

// wantLockWait bounds, in seconds, a script's wait for the bucket it
// picked, when the sale has other buckets: another order holds it for no
// more than a round trip, unless that transaction stalled before its
// commit (its process stopped), and then the orders that want the bucket
// give up after this long, having written nothing (MySQL's lock wait
// timeout, which IsRetryable), and are retried.
const wantLockWait = 1

// wantLockWait is the order's bound on its wait for the bucket it picked.
// With one bucket there is no other to take: it waits as long as it takes
// (0; a long queue on it would time out, for nothing).
func (o newOrder) wantLockWait() int {
	if o.Buckets <= 1 {
		return 0
	}
	return wantLockWait
}

// takeFrom takes one unit from bucket (with quota, one unit of its share of
// the database path's quota too) by a conditional UPDATE checked by
// affected rows: the defence that makes a unit impossible to take twice.
// False when the bucket has none.
func takeFrom(ctx context.Context, tx bun.Tx, saleID int64, bucket int, quota bool) (bool, error) {
	n, err := takeFromStmt(saleID, bucket, quota).exec(ctx, tx)
	if err != nil {
		return false, fmt.Errorf("deduct bucket: %w", err)
	}
	return n == 1, nil
}

// takeFromStmt is takeFrom's statement.
func takeFromStmt(saleID int64, bucket int, quota bool) stmt {
	return stmt{takeFromQuery(quota, "?"), []any{saleID, bucket}}
}

// takeFromQuery is takeFrom's statement with the bucket's number given by
// bucket (an expression: "?" for an argument), after the sale's id.
func takeFromQuery(quota bool, bucket string) string {
	has, set := "stock >= 1", "stock = stock - 1"
	if quota {
		has, set = "stock >= 1 AND db_quota >= 1", "stock = stock - 1, db_quota = db_quota - 1"
	}
	return "UPDATE stock_buckets SET " + set + " WHERE sale_id = ? AND bucket_no = " + bucket + " AND " + has
}

// deductBucket takes one unit from a bucket of the sale, for takeUnit. It
// starts at a random bucket and skips buckets other transactions hold
// (SELECT ... FOR UPDATE SKIP LOCKED), so concurrent orders spread over the
// buckets instead of queueing on one row lock. Only when every bucket with
// stock is held does it wait, and then for one row at a time by its key: a locking scan
// here would let two transactions each hold a row the other waits for. The
// conditional UPDATE, checked by affected rows, is what makes a unit
// impossible to take twice. With quota (the database path) a bucket must
// also have a unit of that path's quota left, and gives it up with the
// stock: the quota is spread over the buckets, so concurrent reservations
// do not queue on one row for it. domain.ErrSoldOut then means no bucket has both.
func deductBucket(ctx context.Context, tx bun.Tx, saleID int64, buckets int, quota bool) (int, error) {
	start := 0
	if buckets > 1 {
		start = rand.IntN(buckets)
	}
	has := "stock >= 1"
	if quota {
		has += " AND db_quota >= 1"
	}
	take := func(bucket int) (bool, error) { return takeFrom(ctx, tx, saleID, bucket, quota) }
	for _, q := range []string{
		"SELECT bucket_no FROM stock_buckets WHERE sale_id = ? AND bucket_no >= ? AND " + has + " ORDER BY bucket_no LIMIT 1 FOR UPDATE SKIP LOCKED",
		"SELECT bucket_no FROM stock_buckets WHERE sale_id = ? AND bucket_no < ? AND " + has + " ORDER BY bucket_no LIMIT 1 FOR UPDATE SKIP LOCKED",
	} {
		var bucket int
		err := tx.QueryRowContext(ctx, q, saleID, start).Scan(&bucket)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("pick bucket: %w", err)
		}
		ok, err := take(bucket)
		if err != nil || ok {
			return bucket, err
		}
	}
	// Every bucket with stock is held by another transaction (or empty):
	// read the candidates without locking, then wait on them one by one.
	var candidates []int
	rows, err := tx.QueryContext(ctx, "SELECT bucket_no FROM stock_buckets WHERE sale_id = ? AND "+has+" ORDER BY bucket_no", saleID)
	if err != nil {
		return 0, fmt.Errorf("list buckets: %w", err)
	}
	for rows.Next() {
		var b int
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return 0, fmt.Errorf("list buckets: %w", err)
		}
		candidates = append(candidates, b)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, fmt.Errorf("list buckets: %w", err)
	}
	for i := range candidates {
		b := candidates[(i+start)%len(candidates)]
		ok, err := take(b)
		if err != nil {
			return 0, err
		}
		if ok {
			return b, nil
		}
	}
	return 0, domain.ErrSoldOut
}

// MarkPaid records the payment of a PENDING_PAYMENT order. Paying a PAID
// order again with the same payment_ref returns it unchanged; anything else
// is domain.ErrNotPayable.
func (s *Store) MarkPaid(ctx context.Context, token, paymentRef string) (*domain.Reservation, error) {
	return s.updateReservation(ctx, "mark paid", token, func(ctx context.Context, tx bun.Tx, res *reservationRow) error {
		if res.Status == string(domain.StatusPaid) && res.PaymentRef != nil && *res.PaymentRef == paymentRef {
			return nil
		}
		if res.Status != string(domain.StatusPendingPayment) {
			return domain.ErrNotPayable
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		r, err := tx.ExecContext(ctx, "UPDATE orders SET status = ?, payment_ref = ?, updated_at = ? WHERE token = ? AND user_id = ? AND status = ?",
			string(domain.StatusPaid), paymentRef, now, token, res.UserID, string(domain.StatusPendingPayment))
		if err != nil {
			return fmt.Errorf("update order: %w", err)
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return fmt.Errorf("order of %s is not pending payment: %w", token, domain.ErrNotPayable)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE reservations SET status = ?, payment_ref = ?, updated_at = ? WHERE token = ? AND user_id = ?",
			string(domain.StatusPaid), paymentRef, now, token, res.UserID); err != nil {
			return fmt.Errorf("update reservation: %w", err)
		}
		res.Status, res.PaymentRef, res.UpdatedAt = string(domain.StatusPaid), &paymentRef, now
		return nil
	})
}

// ReleaseOrder ends a PENDING_PAYMENT order as EXPIRED or CANCELLED and
// returns its unit to its bucket with a 'restore' ledger row. Rerun after
// it succeeded it changes nothing. Any other status is domain.ErrNotCancellable.
func (s *Store) ReleaseOrder(ctx context.Context, token string, to domain.ReservationStatus) (*domain.Reservation, error) {
	if to != domain.StatusExpired && to != domain.StatusCancelled {
		return nil, fmt.Errorf("release order %s: bad target status %s", token, to)
	}
	return s.updateReservation(ctx, "release order", token, func(ctx context.Context, tx bun.Tx, res *reservationRow) error {
		if res.Status == string(to) {
			return nil
		}
		if res.Status != string(domain.StatusPendingPayment) {
			return domain.ErrNotCancellable
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		var bucket int
		if err := tx.QueryRowContext(ctx, "SELECT bucket_no FROM orders WHERE token = ? AND user_id = ? FOR UPDATE", token, res.UserID).Scan(&bucket); err != nil {
			return fmt.Errorf("lock order: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE orders SET status = ?, updated_at = ? WHERE token = ? AND user_id = ? AND status = ?",
			string(to), now, token, res.UserID, string(domain.StatusPendingPayment)); err != nil {
			return fmt.Errorf("update order: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE reservations SET status = ?, updated_at = ? WHERE token = ? AND user_id = ?", string(to), now, token, res.UserID); err != nil {
			return fmt.Errorf("update reservation: %w", err)
		}
		if err := restoreUnit(ctx, tx, res, bucket, now); err != nil {
			return err
		}
		res.Status, res.UpdatedAt = string(to), now
		return nil
	})
}

// restoreUnit returns res's unit to bucket with a 'restore' ledger row. In
// database mode that path may sell it again (its bucket's share of the
// quota grows by one). The sale row is only read, under a shared lock (a
// mode change waits for this transaction, and it for a mode change), so
// releases do not queue on it; like every path it is taken before a
// bucket. The bucket comes last, so its row lock is held for one round
// trip.
func restoreUnit(ctx context.Context, tx bun.Tx, res *reservationRow, bucket int, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO stock_ledger (token, operation, sale_id, bucket_no, delta, created_at)
		VALUES (?, 'restore', ?, ?, 1, ?)`, res.Token, res.SaleID, bucket, now); err != nil {
		return fmt.Errorf("ledger restore: %w", err)
	}
	var mode string
	if err := tx.QueryRowContext(ctx, "SELECT mode FROM sales WHERE id = ? LOCK IN SHARE MODE", res.SaleID).Scan(&mode); err != nil {
		return fmt.Errorf("restore bucket: read mode: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE stock_buckets SET stock = stock + 1, db_quota = IF(?, db_quota + 1, db_quota) WHERE sale_id = ? AND bucket_no = ?",
		mode == string(domain.ModeDatabase), res.SaleID, bucket); err != nil {
		return fmt.Errorf("restore bucket: %w", err)
	}
	return nil
}

// EndQueued ends a QUEUED reservation that never got an order, as FAILED
// (no stock, already purchased) or CANCELLED (cancelled while queued). A
// hold that took its unit when it was recorded returns it to its bucket
// (restoreUnit). For a hold recorded without one, no bucket's stock moves;
// a unit that exists (not a FAILED no_stock hold's) goes back on sale:
// Redis gets it from the release, and in database mode with the quota open
// a bucket's share grows by one (before the quota opens, openQuota counts
// it). Rerun it changes nothing.
func (s *Store) EndQueued(ctx context.Context, token string, to domain.ReservationStatus, reason string) (*domain.Reservation, error) {
	if to != domain.StatusFailed && to != domain.StatusCancelled {
		return nil, fmt.Errorf("end queued %s: bad target status %s", token, to)
	}
	return s.updateReservation(ctx, "end queued", token, func(ctx context.Context, tx bun.Tx, res *reservationRow) error {
		if res.Status != string(domain.StatusQueued) {
			return nil
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		if _, err := tx.ExecContext(ctx, "UPDATE reservations SET status = ?, fail_reason = ?, updated_at = ? WHERE token = ? AND user_id = ?",
			string(to), reason, now, token, res.UserID); err != nil {
			return fmt.Errorf("update reservation: %w", err)
		}
		switch {
		case res.UnitBucket != nil:
			// The hold took its unit when it was recorded: it goes back.
			if err := restoreUnit(ctx, tx, res, *res.UnitBucket, now); err != nil {
				return err
			}
		case to == domain.StatusCancelled || reason == domain.FailReasonAlreadyPurchased:
			if err := growDatabaseShare(ctx, tx, res.SaleID); err != nil {
				return err
			}
		}
		res.Status, res.UpdatedAt = string(to), now
		return nil
	})
}

// growDatabaseShare gives a unit a queued hold no longer needs to the
// database path, when the sale is in database mode with its quota open:
// the bucket with the most stock beyond its share takes it (a share never
// exceeds its bucket's stock). The sale row is read first, under a shared
// lock, like every path.
func growDatabaseShare(ctx context.Context, tx bun.Tx, saleID int64) error {
	var mode string
	if err := tx.QueryRowContext(ctx, "SELECT mode FROM sales WHERE id = ? LOCK IN SHARE MODE", saleID).Scan(&mode); err != nil {
		return fmt.Errorf("database share: read mode: %w", err)
	}
	if mode != string(domain.ModeDatabase) {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE stock_buckets SET db_quota = db_quota + 1
		WHERE sale_id = ? AND db_quota IS NOT NULL AND db_quota < stock ORDER BY stock - db_quota DESC LIMIT 1`, saleID); err != nil {
		return fmt.Errorf("database share: %w", err)
	}
	return nil
}

// TokenSync is what sales.SyncToken reads of a token, in one statement:
// the reservation, its sale's mode, and whether its user holds another
// live reservation of the sale.
type TokenSync struct {
	Reservation   *domain.Reservation
	Mode          domain.SaleMode
	ModeChangedAt time.Time // zero: never changed
	// AnotherLive is HoldsAnotherLive, read only for an ended reservation
	// (its release keeps the buyer mark then); false for any other.
	AnotherLive bool
}

// ReadTokenSync reads a token's TokenSync; ErrNotFound when the database
// has no reservation of it. The user's other live reservation, if any, is
// the one row the live_user key names (live_user is the user's id exactly
// while the status is live: HoldsAnotherLive's statuses), so an ended
// reservation's release costs one more index probe, not a scan.
func (s *Store) ReadTokenSync(ctx context.Context, token string) (*TokenSync, error) {
	var read struct {
		reservationRow
		SaleMode          string     `bun:"sale_mode"`
		SaleModeChangedAt *time.Time `bun:"sale_mode_changed_at"`
		AnotherLive       bool       `bun:"another_live"`
	}
	err := s.DB.NewRaw(`SELECT r.*, sales.mode AS sale_mode, sales.mode_changed_at AS sale_mode_changed_at,
		o.token IS NOT NULL AS another_live
		FROM reservations r JOIN sales ON sales.id = r.sale_id
		LEFT JOIN reservations o ON r.status IN (?) AND o.sale_id = r.sale_id AND o.live_user = r.user_id
			AND o.user_id = r.user_id AND o.token <> r.token
		WHERE r.token = ? AND r.user_id = `+tokenUser,
		bun.List(endedStatuses), token, token).Scan(ctx, &read)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read token sync %s: %w", token, err)
	}
	return &TokenSync{
		Reservation:   read.reservationRow.domain(),
		Mode:          domain.SaleMode(read.SaleMode),
		ModeChangedAt: utcOrZero(read.SaleModeChangedAt),
		AnotherLive:   read.AnotherLive,
	}, nil
}

// The statuses of a reservation that ended without its unit.
var endedStatuses = []string{string(domain.StatusExpired), string(domain.StatusCancelled), string(domain.StatusFailed)}
