package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill/seckill/domain"
)

// Outcomes of the database reservation path besides success, with
// domain.ErrSaleResyncing (the sale is not, or no longer, in database
// mode) and domain.ErrSaleMoving (a Redis hold sent before the switch may
// still be taken).
var (
	// ErrQuotaExhausted: the database path sold what it may; to the
	// client, sold out (a value of its own, so that tests tell it apart).
	ErrQuotaExhausted = &domain.Error{Code: domain.ESoldOut, Message: "sold out"}
)

// Bounds of the database path's quota.
const (
	// MaxStockSampleAge is the oldest Redis stock sample (worker's
	// recorder, every second) the quota may start from; with an older
	// one the database path sells nothing and the units wait for the
	// resync.
	MaxStockSampleAge = 5 * time.Second
)

// SwitchToDatabase moves a sale from Redis mode to database mode, bumping
// its epoch so that Redis's copy reads as stale. The database path starts
// selling holdOff later on MySQL's clock (db_sell_after): by then every
// Redis reservation sent before every instance learned of the switch has
// passed its deadline, and reserve.lua takes nothing after it. The quota
// is decided then (openQuota). It is a no-op when the sale is already in
// database mode. It returns the sale as it is now.
func (s *Store) SwitchToDatabase(ctx context.Context, saleID int64, holdOff time.Duration) (*domain.Sale, error) {
	return s.SwitchToDatabaseAfterDwell(ctx, saleID, holdOff, 0)
}

// SwitchToDatabaseAfterDwell is SwitchToDatabase for a sale that has been
// in Redis mode for at least minDwell (or never changed mode): a sale just
// back from the database path does not leave Redis again at once. The sale
// returned is still in Redis mode when it has not dwelt long enough.
//
// The switch is guarded by the mode it leaves, so one whose answer was lost
// is sent again (it then changes nothing) and the sale read back.
func (s *Store) SwitchToDatabaseAfterDwell(ctx context.Context, saleID int64, holdOff, minDwell time.Duration) (*domain.Sale, error) {
	now := nowMS()
	err := againIdempotent(ctx, func(ctx context.Context) error {
		_, err := s.DB.ExecContext(ctx, `UPDATE sales SET mode = ?, mode_epoch = mode_epoch + 1, mode_changed_at = ?,
			db_quota = NULL, db_sell_after = NOW(3) + INTERVAL ? MICROSECOND
			WHERE id = ? AND mode = ? AND (mode_changed_at IS NULL OR mode_changed_at <= ?)`,
			string(domain.ModeDatabase), now, holdOff.Microseconds(), saleID, string(domain.ModeRedis), now.Add(-minDwell))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("switch sale %d to database mode: %w", saleID, err)
	}
	return s.GetSale(ctx, saleID)
}

// openQuota decides the database path's quota once its hold-off passed:
// no more than Redis had unsold in a sample at most MaxStockSampleAge older
// than the switch, minus every Redis hold recorded since that sample, plus
// every unit that went back since (a reservation cancelled, expired, or
// failed with its unit kept: a release after the sample is not in it),
// clock skew allowed for on the safe side of each, and no more than the
// buckets hold net of the holds recorded without a unit (none since holds take
// theirs when recorded: RecordRedisHold). What it holds back stays in the
// buckets and goes on sale at the resync.
//
// The quota is recorded on the sale row as opened (sales.db_quota, the
// total) and spread over the buckets (stock_buckets.db_quota, each at most
// the bucket's stock, in proportion to it): a database-path reservation
// takes a unit of its bucket's share with the bucket's stock, so no
// reservation waits for the sale row. The shares add up to the quota, so
// the path never sells more; a Redis hold's order taken from a bucket
// whose stock then falls below its share may leave part of the quota
// unsold, which stays in the buckets for the resync. It takes the sale row
// first and the buckets only when it opened the quota: the many callers
// that find it open by then leave at once. Every path takes the sale row
// before a bucket, so none holds a bucket while it waits for the sale row;
// a deadlock victim is retried all the same, and so is an attempt whose
// outcome is unknown: a quota it opened is open for the retry, which
// leaves it as it is.
func (s *Store) openQuota(ctx context.Context, saleID int64, skew time.Duration) error {
	err := againIdempotent(ctx, func(ctx context.Context) error { return s.openQuotaTx(ctx, saleID, skew) })
	if err != nil {
		return fmt.Errorf("open database path quota of sale %d: %w", saleID, err)
	}
	return nil
}

// openQuotaTx is openQuota's one transaction.
func (s *Store) openQuotaTx(ctx context.Context, saleID int64, skew time.Duration) error {
	return s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sales s SET s.db_quota = GREATEST(0, LEAST(
				IF(s.redis_stock_seen_at IS NOT NULL AND s.redis_stock_seen_at >= s.mode_changed_at - INTERVAL ? MICROSECOND,
					s.redis_stock_seen - (SELECT COUNT(*) FROM reservations r
						WHERE r.sale_id = s.id AND r.path = ? AND r.created_at >= s.redis_stock_seen_at - INTERVAL ? MICROSECOND)
					+ (SELECT COUNT(*) FROM reservations e
						WHERE e.sale_id = s.id AND e.updated_at >= s.redis_stock_seen_at + INTERVAL ? MICROSECOND
						AND (e.status IN (?, ?) OR (e.status = ? AND e.fail_reason IN (?, ?)))),
					0),
				(SELECT COALESCE(SUM(b.stock), 0) FROM stock_buckets b WHERE b.sale_id = s.id)
					- (SELECT COUNT(*) FROM reservations q WHERE q.sale_id = s.id AND q.status = ? AND q.unit_bucket IS NULL)))
			WHERE s.id = ? AND s.mode = ? AND s.db_quota IS NULL AND s.db_sell_after <= NOW(3)`,
			(MaxStockSampleAge + skew).Microseconds(), string(domain.PathRedis), skew.Microseconds(),
			skew.Microseconds(), string(domain.StatusCancelled), string(domain.StatusExpired), string(domain.StatusFailed), domain.FailReasonAlreadyPurchased, domain.FailReasonRefusedHolder,
			string(domain.StatusQueued),
			saleID, string(domain.ModeDatabase))
		if err != nil {
			return fmt.Errorf("decide: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return err // another caller opened it, or the sale is not ready: nothing to spread
		}
		var quota int64
		if err := tx.QueryRowContext(ctx, "SELECT db_quota FROM sales WHERE id = ?", saleID).Scan(&quota); err != nil {
			return fmt.Errorf("read: %w", err)
		}
		var buckets []struct {
			No    int   `bun:"bucket_no"`
			Stock int64 `bun:"stock"`
		}
		if err := tx.NewRaw("SELECT bucket_no, stock FROM stock_buckets WHERE sale_id = ? ORDER BY bucket_no FOR UPDATE", saleID).Scan(ctx, &buckets); err != nil {
			return fmt.Errorf("lock buckets: %w", err)
		}
		stocks := make([]int64, len(buckets))
		for i, b := range buckets {
			stocks[i] = b.Stock
		}
		shares := spreadQuota(quota, stocks)
		q := "UPDATE stock_buckets SET db_quota = CASE bucket_no"
		args := make([]any, 0, 2*len(buckets)+1)
		for i, b := range buckets {
			q += " WHEN ? THEN ?"
			args = append(args, b.No, shares[i])
		}
		q += " ELSE 0 END WHERE sale_id = ?"
		if _, err := tx.ExecContext(ctx, q, append(args, saleID)...); err != nil {
			return fmt.Errorf("spread over the buckets: %w", err)
		}
		return nil
	})
}

// spreadQuota splits quota over buckets holding stocks: each share at most
// its bucket's stock, in proportion to it, the shares adding up to
// min(quota, the stocks' sum).
func spreadQuota(quota int64, stocks []int64) []int64 {
	shares := make([]int64, len(stocks))
	var total int64
	for _, st := range stocks {
		total += max(st, 0)
	}
	quota = min(max(quota, 0), total)
	if quota == 0 {
		return shares
	}
	left := quota
	for i, st := range stocks {
		if st > 0 {
			// quota*st/total without overflow for large stocks.
			shares[i] = int64(float64(quota) * float64(st) / float64(total))
			shares[i] = min(shares[i], st, left)
			left -= shares[i]
		}
	}
	for i := 0; left > 0 && i < len(stocks); i++ {
		more := min(stocks[i]-shares[i], left)
		if more > 0 {
			shares[i] += more
			left -= more
		}
	}
	return shares
}

// ReserveInDB is the database reservation path: in one transaction it
// records the reservation with its replay key and an outbox row, places
// the order if the sale is still in database mode in the epoch it read
// (reading the sale row under a shared lock: a mode change, which takes the
// sale row exclusively, waits for it, or it for the mode change and then
// rolls back), writes the ledger, and last deducts a bucket and a unit of
// that bucket's share of the quota conditionally. A replay of (sale,
// user, request_id) returns the first answer and reserves nothing. The
// order workflow starts afterwards, from the caller or from the outbox
// relay.
//
// It is the path's whole cost in MySQL. Once a reservation of the sale
// succeeded, the next ones go in groups (reserveInDBGroup): a share of one
// round trip each. Any other takes two: one read of the sale (with the
// replay probe and the pick of a bucket), and the transaction sent whole
// (reserveInDBScript). Only when the bucket picked is no use does it retry
// statement by statement (reserveInDBTx).
func (s *Store) ReserveInDB(ctx context.Context, in domain.OrderInput) (res *domain.Reservation, replay bool, err error) {
	return s.ReserveInDBWithSkew(ctx, in, 0)
}

// ReserveInDBWithSkew is ReserveInDB allowing for clock skew between the
// worker that samples Redis's stock and the ones that record holds. Before
// the sale's hold-off has passed it answers domain.ErrSaleMoving.
func (s *Store) ReserveInDBWithSkew(ctx context.Context, in domain.OrderInput, skew time.Duration) (res *domain.Reservation, replay bool, err error) {
	return s.reserveInDB(ctx, in, skew, nil)
}

// reserveInDB is ReserveInDBWithSkew; a test may name the bucket the
// reservation wants (want) in place of the one the read picks.
func (s *Store) reserveInDB(ctx context.Context, in domain.OrderInput, skew time.Duration, wanted *int) (res *domain.Reservation, replay bool, err error) {
	lost := false
	if wanted == nil {
		var res *domain.Reservation
		if res, lost, err = s.reserveInDBGroup(ctx, in); res != nil || err != nil {
			return res, false, err
		}
	}
	res, replay, err = s.reserveInDBAlone(ctx, in, skew, wanted)
	if lost {
		// A reservation the lost group committed is this request's, whose
		// workflow is still to start, not a replay.
		replay = false
	}
	if errors.Is(err, ErrQuotaExhausted) {
		// Sold out: the sale's next reservations are refused by the read
		// alone, not by a group part first.
		s.dbTerms.Delete(in.SaleID)
	}
	return res, replay, err
}

// reserveInDBAlone is the per-reservation path: it decides every case.
func (s *Store) reserveInDBAlone(ctx context.Context, in domain.OrderInput, skew time.Duration, wanted *int) (res *domain.Reservation, replay bool, err error) {
	sale, err := s.readDBSale(ctx, in)
	if err != nil {
		return nil, false, err
	}
	if sale.Prior.Valid {
		return s.replayInDB(ctx, in)
	}
	if err := sale.admits(); err != nil {
		return nil, false, err
	}
	if err := s.ensureQuota(ctx, in.SaleID, skew, &sale); err != nil {
		return nil, false, err
	}
	want := pickedBucket(sale.OpenBucket)
	if wanted != nil {
		want = *wanted
	}
	o, lost, err := s.placeInDB(ctx, in, sale, want)
	switch {
	case errors.Is(err, errReplayRace):
		res, replay, err := s.replayInDB(ctx, in)
		// After an attempt whose answer was lost, the row met is the one
		// that attempt committed: this request's, whose workflow is still
		// to start, not a replay.
		return res, replay && !lost, err
	case err != nil:
		return nil, false, fmt.Errorf("reserve in db: %w", err)
	}
	s.keepTerms(in.SaleID, sale.terms())
	return domain.DatabasePathReservation(in, o.OrderNo, o.AmountCents, o.PayBy, o.Now), false, nil
}

// dbSale is what the database path reads of a sale in one query.
type dbSale struct {
	PriceCents           int64          `bun:"price_cents"`
	PaymentWindowSeconds int            `bun:"payment_window_seconds"`
	Buckets              int            `bun:"buckets"`
	Mode                 string         `bun:"mode"`
	Epoch                int64          `bun:"mode_epoch"`
	Quota                sql.NullInt64  `bun:"db_quota"`
	Selling              bool           `bun:"selling"`
	Control              string         `bun:"control"`
	Window               string         `bun:"window_state"`
	Prior                sql.NullString `bun:"prior"`
	Queued               bool           `bun:"queued"`
	OpenBucket           sql.NullInt64  `bun:"open_bucket"`
}

// readDBSale reads the sale for a reservation. The window and the
// operator's pause are checked on the sale as it is now and on MySQL's
// clock: the API's cached copy may be seconds old (on the Redis path the
// script checks them on Redis's clock). The same read probes the replay
// key (prior): a replay answers what the first request got, whatever the
// sale's state now; and the user's QUEUED reservations (queued): a Redis
// hold recorded but not placed yet has no order, so the orders' one-live-
// order key cannot refuse a second unit for its user.
func (s *Store) readDBSale(ctx context.Context, in domain.OrderInput) (dbSale, error) {
	var sale dbSale
	if err := s.DB.NewRaw(`SELECT price_cents, payment_window_seconds, buckets, mode, mode_epoch, db_quota,
		COALESCE(db_sell_after <= NOW(3), TRUE) AS selling, control,
		CASE WHEN NOW(3) < starts_at THEN 'not_started' WHEN NOW(3) >= ends_at THEN 'ended' ELSE '' END AS window_state,
		(SELECT r.token FROM reservations r WHERE r.sale_id = sales.id AND r.user_id = ? AND r.request_id = ?) AS prior,
		EXISTS (SELECT 1 FROM reservations q WHERE q.sale_id = sales.id AND q.user_id = ? AND q.status = ?) AS queued,
		`+openBucketColumn(true)+` AS open_bucket
		FROM sales WHERE id = ?`, in.UserID, in.RequestID, in.UserID, string(domain.StatusQueued), in.SaleID).Scan(ctx, &sale); err != nil {
		return dbSale{}, fmt.Errorf("reserve in db: read sale: %w", err)
	}
	return sale, nil
}

// admits refuses a reservation the sale's state does not allow.
func (sale *dbSale) admits() error {
	switch {
	case sale.Control == string(domain.ControlStopped) || sale.Window == "ended":
		return domain.ErrSaleEnded
	case sale.Window == "not_started":
		return domain.ErrSaleNotStarted
	case sale.Control == string(domain.ControlPaused):
		return domain.ErrSalePaused
	case sale.Mode != string(domain.ModeDatabase):
		return domain.ErrSaleResyncing
	case sale.Queued:
		return domain.ErrAlreadyHolds
	case !sale.Selling:
		return domain.ErrSaleMoving
	}
	return nil
}

// ensureQuota opens the sale's quota when it is not open yet, and answers
// ErrQuotaExhausted early when nothing is left to sell.
func (s *Store) ensureQuota(ctx context.Context, saleID int64, skew time.Duration, sale *dbSale) error {
	wasOpen := sale.Quota.Valid
	if !sale.Quota.Valid {
		if err := s.openQuota(ctx, saleID, skew); err != nil {
			return fmt.Errorf("reserve in db: %w", err)
		}
		if err := s.DB.QueryRowContext(ctx, "SELECT mode, mode_epoch, db_quota FROM sales WHERE id = ?", saleID).Scan(&sale.Mode, &sale.Epoch, &sale.Quota); err != nil {
			return fmt.Errorf("reserve in db: read quota: %w", err)
		}
		if sale.Mode != string(domain.ModeDatabase) {
			return domain.ErrSaleResyncing // a resync began meanwhile
		}
	}
	if !sale.Quota.Valid || sale.Quota.Int64 < 1 || (wasOpen && !sale.OpenBucket.Valid) {
		// A cheap early answer (no bucket had both stock and a share of the
		// quota in the read that picked one); the conditional update decides.
		return ErrQuotaExhausted
	}
	return nil
}

// placeInDB takes the unit. The first attempt is one script (one round
// trip) taking it from the bucket the read picked. A deadlock victim was
// rolled back whole, so it is retried here, a few times: near sell-out,
// when buckets run empty, the waits on buckets one by one (deductBucket)
// can deadlock with another's; and so is an attempt whose picked bucket
// ran out meanwhile or a stalled transaction held too long. A retry is a
// transaction that takes any bucket free (reserveInDBTx). An attempt
// whose outcome is unknown (lost) is retried too: the reservation's keys
// make the retry meet the row it committed (errReplayRace).
func (s *Store) placeInDB(ctx context.Context, in domain.OrderInput, sale dbSale, want int) (o newOrder, lost bool, err error) {
	for attempt := 1; ; attempt++ {
		o = orderFor(in.Token, in.SaleID, in.UserID, sale.PriceCents, sale.PaymentWindowSeconds, sale.Buckets)
		o.Quota = true
		if attempt == 1 && want >= 0 {
			err = reserveInDBScript(ctx, s.DB, in, o, sale.Epoch, want)
		} else {
			err = s.reserveInDBTx(ctx, in, o, sale.Epoch)
		}
		lost = lost || Classify(err) == FaultUnknown
		retry := IsRetryable(err) || errors.Is(err, errStalePick)
		if err == nil || !retry || attempt == reserveInDBAttempts || ctx.Err() != nil {
			return o, lost, err
		}
		if IsRetryable(err) && !pauseAfter(ctx, attempt, err) {
			return o, lost, err
		}
	}
}

// replayInDB answers a replay of (sale, user, request_id) with the
// reservation the first request made.
func (s *Store) replayInDB(ctx context.Context, in domain.OrderInput) (*domain.Reservation, bool, error) {
	prior, err := s.FindReservation(ctx, in.SaleID, in.UserID, in.RequestID)
	if errors.Is(err, ErrNotFound) {
		// The duplicate was the user's other live reservation
		// (reservations_live_user), not this request's.
		return nil, false, domain.ErrAlreadyHolds
	}
	if err != nil {
		return nil, false, fmt.Errorf("reserve in db: replay: %w", err)
	}
	return prior, true, nil
}

// reserveInDBAttempts bounds ReserveInDB's attempts at its transaction.
const reserveInDBAttempts = 4

// errStalePick: the bucket ReserveInDB's read picked had no unit (or no
// quota) left by the time its script took one.
var errStalePick = errors.New("the picked bucket ran out")

// reserveInDBScript is ReserveInDB's transaction in one round trip (a
// script): the reservation, its outbox row, the order together with the
// check of the sale row, the ledger row, and last the unit from want, the
// bucket ReserveInDB's read saw with a unit of stock and quota. Like every
// path it takes the sale row (shared) before a bucket, and the bucket
// last; a Redis-path order and a database-path reservation of the same
// user at the same moment take the order's unique key in the same order
// too. errStalePick when want has no unit left: the script rolled back
// whole.
func reserveInDBScript(ctx context.Context, db bun.IDB, in domain.OrderInput, o newOrder, epoch int64, want int) error {
	var sc script
	sc.add(dbPathRows(in, o, epoch, want)...)
	sc.add(o.takePicked(want))
	return sc.run(ctx, db)
}

// reserveInDBTx is ReserveInDB's transaction when the bucket picked is no
// use: the rows reserveInDBScript writes, statement by statement, and the
// unit from any bucket with stock and quota not held by another
// transaction (takeUnit, deductBucket).
func (s *Store) reserveInDBTx(ctx context.Context, in domain.OrderInput, o newOrder, epoch int64) error {
	return s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := runSteps(ctx, tx, dbPathRows(in, o, epoch, -1)); err != nil {
			return err
		}
		if err := takeUnit(ctx, tx, o); errors.Is(err, domain.ErrSoldOut) {
			// No bucket has both stock and quota: the quota ran out.
			return ErrQuotaExhausted
		} else if err != nil {
			return err
		}
		return nil
	})
}

// dbPathRows are the rows of a database-path reservation, in the order
// written: the reservation with its order, PENDING_PAYMENT (a duplicate:
// the replay race); its outbox row; the order together with the check of
// the sale row (insertOrderIfDatabase); the ledger row. bucket is where
// the unit is to come from (-1: not known yet; takeUnit sets it).
func dbPathRows(in domain.OrderInput, o newOrder, epoch int64, bucket int) []step {
	return []step{
		{stmt: stmt{`INSERT INTO reservations
			(token, sale_id, user_id, request_id, path, status, order_no, amount_cents, pay_by, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, []any{
			in.Token, in.SaleID, in.UserID, in.RequestID, string(domain.PathDatabase), string(domain.StatusPendingPayment),
			o.OrderNo, o.AmountCents, o.PayBy, o.Now, o.Now}}, what: "insert reservation", dup: errReplayRace},
		{stmt: stmt{"INSERT INTO outbox (token, sale_id, created_at) VALUES (?, ?, ?)", []any{in.Token, in.SaleID, o.Now}}, what: "outbox"},
		insertOrderIfDatabase(o, bucket, epoch),
		deductLedger(o, bucket),
	}
}

var errReplayRace = errors.New("replay raced")

// OutboxEntry is a reservation whose workflow may not have started yet: a
// database-path reservation, or a Redis hold the API ended CANCELLED
// before any workflow had recorded it (EnqueueStart).
type OutboxEntry struct {
	ID     int64
	Token  string
	SaleID int64
	UserID int64
	Req    string
	Path   domain.ReservationPath
}

// Input is the entry's workflow input, by the path that took the unit.
func (e OutboxEntry) Input() domain.OrderInput {
	if e.Path == domain.PathRedis {
		return domain.RedisHoldInput(e.Token, e.SaleID, e.UserID, e.Req)
	}
	return domain.DatabasePathInput(e.Token, e.SaleID, e.UserID, e.Req)
}

// PendingOutbox lists undispatched outbox entries older than minAge.
func (s *Store) PendingOutbox(ctx context.Context, minAge time.Duration, limit int) ([]OutboxEntry, error) {
	var rows []struct {
		ID        int64  `bun:"id"`
		Token     string `bun:"token"`
		SaleID    int64  `bun:"sale_id"`
		UserID    int64  `bun:"user_id"`
		RequestID string `bun:"request_id"`
		Path      string `bun:"path"`
	}
	err := s.DB.NewRaw(`SELECT o.id, o.token, o.sale_id, r.user_id, r.request_id, r.path FROM outbox o
		JOIN reservation_keys k ON k.token = o.token JOIN reservations r ON r.token = k.token AND r.user_id = k.user_id
		WHERE o.dispatched_at IS NULL AND o.created_at <= ? ORDER BY o.id LIMIT ?`,
		time.Now().UTC().Add(-minAge), limit).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("pending outbox: %w", err)
	}
	out := make([]OutboxEntry, len(rows))
	for i, r := range rows {
		out[i] = OutboxEntry{ID: r.ID, Token: r.Token, SaleID: r.SaleID, UserID: r.UserID, Req: r.RequestID, Path: domain.ReservationPath(r.Path)}
	}
	return out, nil
}

// EnqueueStart records that a reservation's workflow must be started, for
// the outbox relay; a second call for the token changes nothing, so it is
// sent again when refused or its answer was lost. Only for
// reservations that have ended (a relay of an older release starts every
// entry as a database-path reservation, which a terminal one tolerates).
func (s *Store) EnqueueStart(ctx context.Context, token string, saleID int64) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	err := againIdempotent(ctx, func(ctx context.Context) error {
		_, err := s.DB.ExecContext(ctx, "INSERT IGNORE INTO outbox (token, sale_id, created_at) VALUES (?, ?, ?)", token, saleID, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("enqueue the start of %s: %w", token, err)
	}
	return nil
}

// MarkDispatched records that the workflows of outbox entries started, in
// one statement.
func (s *Store) MarkDispatched(ctx context.Context, tokens ...string) error {
	if len(tokens) == 0 {
		return nil
	}
	if _, err := s.DB.ExecContext(ctx, "UPDATE outbox SET dispatched_at = ? WHERE token IN (?) AND dispatched_at IS NULL",
		time.Now().UTC().Truncate(time.Millisecond), bun.List(tokens)); err != nil {
		return fmt.Errorf("mark %d outbox entries dispatched (first %s): %w", len(tokens), tokens[0], err)
	}
	return nil
}

// BeginResync moves a sale from database mode to the short "resync" mode
// with a new epoch: neither path sells while Redis is rebuilt, and any
// database-path transaction still running finds the mode changed and rolls
// back. It returns the new epoch, or domain.ErrSaleResyncing when the sale
// is not in database mode (another instance resynchronises it, or already
// did).
//
// A move whose answer was lost is sent again, and then the sale found in
// resync mode is this move's when it carries its mark (mode_changed_at, to
// the millisecond): the caller rebuilds it, rather than leave it unsold
// until the stalled resync is rolled back.
func (s *Store) BeginResync(ctx context.Context, saleID int64) (int64, error) {
	mark := nowMS()
	lost := false
	var moved int64
	err := againIdempotent(ctx, func(ctx context.Context) error {
		res, err := s.DB.ExecContext(ctx, "UPDATE sales SET mode = ?, mode_epoch = mode_epoch + 1, mode_changed_at = ? WHERE id = ? AND mode = ?",
			string(domain.ModeResync), mark, saleID, string(domain.ModeDatabase))
		if err != nil {
			lost = lost || Classify(err) == FaultUnknown
			return err
		}
		moved, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("begin resync of sale %d: %w", saleID, err)
	}
	sale, err := s.GetSale(ctx, saleID)
	if err != nil {
		return 0, fmt.Errorf("begin resync of sale %d: %w", saleID, err)
	}
	ours := lost && sale.Mode == domain.ModeResync && sale.ModeChangedAt.Equal(mark)
	if moved != 1 && !ours {
		return 0, domain.ErrSaleResyncing
	}
	return sale.ModeEpoch, nil
}

// FinishResync returns a resynchronised sale to Redis mode, if its epoch is
// still the one the resync began with. A return whose answer was lost is
// sent again, and a sale then found in Redis mode in that epoch is its.
func (s *Store) FinishResync(ctx context.Context, saleID, epoch int64) error {
	lost := false
	var moved int64
	err := againIdempotent(ctx, func(ctx context.Context) error {
		res, err := s.DB.ExecContext(ctx, "UPDATE sales SET mode = ?, db_quota = NULL, mode_changed_at = ? WHERE id = ? AND mode = ? AND mode_epoch = ?",
			string(domain.ModeRedis), nowMS(), saleID, string(domain.ModeResync), epoch)
		if err != nil {
			lost = lost || Classify(err) == FaultUnknown
			return err
		}
		moved, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("finish resync of sale %d: %w", saleID, err)
	}
	if moved == 1 {
		return nil
	}
	if lost {
		sale, err := s.GetSale(ctx, saleID)
		if err != nil {
			return fmt.Errorf("finish resync of sale %d: %w", saleID, err)
		}
		if sale.Mode == domain.ModeRedis && sale.ModeEpoch == epoch {
			return nil
		}
	}
	return fmt.Errorf("finish resync of sale %d: epoch %d is no longer current", saleID, epoch)
}

// RedisState is what Redis should hold of a sale, computed from the
// database: the stock net of holds (reservations recorded but not yet
// ordered), the buyers (live orders and holds), and every reservation's
// token state and replay key (redisgateway encodes them).
type RedisState struct {
	Stock  int64
	Buyers []int64
	Tokens []RedisToken
	// AddedRefs: the stock additions Stock includes (Snapshot.AddedRefs).
	AddedRefs []string
	// Seq is the highest Redis hold number recorded (maxRedisSeq).
	Seq int64
}

// RedisToken is one reservation as Redis should know it: its token's state
// (domain.Token*), its owner and its request id.
type RedisToken struct {
	Token     string
	State     string
	UserID    int64
	RequestID string
}

// ReadRedisState reads a sale's Redis state from the database in one
// snapshot.
func (s *Store) ReadRedisState(ctx context.Context, saleID int64) (*RedisState, error) {
	st := &RedisState{}
	err := s.DB.RunInTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, func(ctx context.Context, tx bun.Tx) error {
		var dbStock sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT SUM(stock) FROM stock_buckets WHERE sale_id = ?", saleID).Scan(&dbStock); err != nil {
			return fmt.Errorf("buckets: %w", err)
		}
		var rows []struct {
			Token     string `bun:"token"`
			UserID    int64  `bun:"user_id"`
			RequestID string `bun:"request_id"`
			Status    string `bun:"status"`
			HasUnit   bool   `bun:"has_unit"`
		}
		if err := tx.NewRaw("SELECT token, user_id, request_id, status, unit_bucket IS NOT NULL AS has_unit FROM reservations WHERE sale_id = ?", saleID).Scan(ctx, &rows); err != nil {
			return fmt.Errorf("reservations: %w", err)
		}
		seq, err := maxRedisSeq(ctx, tx, saleID)
		if err != nil {
			return err
		}
		st.Seq = seq
		refs, err := addedRefs(ctx, tx, saleID)
		if err != nil {
			return err
		}
		st.AddedRefs = refs
		holds := int64(0)
		buyers := map[int64]bool{}
		for _, r := range rows {
			status := domain.ReservationStatus(r.Status)
			if !status.Valid() {
				return fmt.Errorf("reservation %s has status %q", r.Token, r.Status)
			}
			if status == domain.StatusQueued && !r.HasUnit {
				holds++ // a hold recorded with its unit is out of the buckets already
			}
			if status.HoldsUnit() {
				buyers[r.UserID] = true
			}
			st.Tokens = append(st.Tokens, RedisToken{Token: r.Token, State: status.TokenState(), UserID: r.UserID, RequestID: r.RequestID})
		}
		st.Stock = max(dbStock.Int64-holds, 0)
		for u := range buyers {
			st.Buyers = append(st.Buyers, u)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read redis state of sale %d: %w", saleID, err)
	}
	return st, nil
}

// AbortResync returns a sale whose resync did not finish to database mode
// with a new epoch, so the database path sells again and a later resync
// starts over. It acts only on the epoch given, or, with epoch 0, on a
// resync older than staleAfter (its instance died).
func (s *Store) AbortResync(ctx context.Context, saleID, epoch int64, staleAfter time.Duration) (bool, error) {
	q := "UPDATE sales SET mode = ?, mode_epoch = mode_epoch + 1, mode_changed_at = ? WHERE id = ? AND mode = ?"
	args := []any{string(domain.ModeDatabase), nowMS(), saleID, string(domain.ModeResync)}
	if epoch > 0 {
		q += " AND mode_epoch = ?"
		args = append(args, epoch)
	} else {
		q += " AND mode_changed_at < ?"
		args = append(args, nowMS().Add(-staleAfter))
	}
	res, err := s.DB.ExecContext(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("abort resync of sale %d: %w", saleID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("abort resync of sale %d: %w", saleID, err)
	}
	return n == 1, nil
}

func nowMS() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// insertOrderIfDatabase is insertOrder for the database path, together with
// the check of the sale row in the same statement: an INSERT ... SELECT
// from the sale row, read under a shared lock, that inserts nothing
// (domain.ErrSaleResyncing) unless the sale is still in database mode in the
// given epoch. (The orders table has no auto-increment column, so the
// statement takes no table lock; on the ledger it would take InnoDB's
// AUTO-INC lock for the statement, and the reservations in flight queued on
// it.)
func insertOrderIfDatabase(o newOrder, bucket int, epoch int64) step {
	return step{stmt: stmt{"INSERT INTO orders (" + orderColumns + `)
		SELECT ?, ?, id, ?, ?, ?, ?, ?, ?, ? FROM sales WHERE id = ? AND mode = ? AND mode_epoch = ? LOCK IN SHARE MODE`, []any{
		o.OrderNo, o.Token, o.UserID, o.AmountCents, string(domain.StatusPendingPayment), bucket, o.PayBy, o.Now, o.Now,
		o.SaleID, string(domain.ModeDatabase), epoch}}, what: "insert order", dup: domain.ErrAlreadyHolds, none: domain.ErrSaleResyncing}
}
