package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill/seckill/domain"
)

// HoldRecord is the database's decision on a Redis hold: the store that
// decides every 202. Redis is the fast gate; it can lose acknowledged
// writes (a failover to a lagging replica, an AOF missing its tail) and
// then grant a unit twice or to a user who holds one. The record refuses
// both, in the transaction that writes it.
type HoldRecord struct {
	// Counted: the hold is recorded, with its unit, where the database
	// path's quota counts it: it may be answered 202.
	Counted bool
	// Refused is the database's refusal of a hold Redis granted
	// (domain.ErrAlreadyHolds, domain.ErrSoldOut): answered as it is, never
	// 202. The hold's row is FAILED with the reason, so its workflow
	// releases it in Redis and a replay gets the same answer.
	Refused *domain.Error
	// WentBack: Redis handed out a hold number (its counter of holds) that
	// the database already had: Redis went back in time, and the sale must
	// be rebuilt from the database (MarkRedisWentBack).
	WentBack bool
	// Holder is, when the user was refused for holding a unit, the live
	// reservation they hold: Redis, which granted the hold, may have lost
	// its replay key too.
	Holder *LiveHold
}

// LiveHold names a user's live or paid reservation of a sale.
type LiveHold struct {
	Token, RequestID string
}

// Promised reports whether the hold may be answered 202.
func (r HoldRecord) Promised() bool { return r.Counted && r.Refused == nil }

// holdGuard is the condition on the sale row under which a hold recorded
// now is counted by the database path's quota: the sale is in the hold's
// epoch, or switched to the database path with its quota not open yet.
const holdGuard = `id = ? AND (mode_epoch = ? OR (mode = ? AND mode_epoch = ? + 1 AND db_quota IS NULL))`

func holdGuardArgs(saleID, epoch int64) []any {
	return []any{saleID, epoch, string(domain.ModeDatabase), epoch}
}

// errHoldSlowPath: the one-round-trip record met something it does not
// decide (a duplicate key, the guard, no unit in the bucket it picked) and
// rolled back; the transaction of recordHoldTx decides.
var errHoldSlowPath = errors.New("the hold needs the statement-by-statement record")

// RecordRedisHold records a Redis hold before its 202 goes out, and
// decides it: at most one live or paid reservation per user and sale (the
// reservations' live_user key), and a unit taken from a bucket for it
// (the conditional update checked by affected rows, as an order's), so the
// database never promises more than the sale's units. seq is the sale's
// Redis hold counter at the hold (0: unknown); a number the database
// already has means Redis went back in time (HoldRecord.WentBack), and the
// hold is decided all the same.
//
// A hold recorded while the sale is in its epoch (or switched to the
// database path before its quota opened) is Counted; otherwise nothing is
// written and the caller answers "outcome unknown" (the client's retry
// meets the database path). A replay of a recorded hold answers what the
// first record decided. Almost every hold is one round trip (a script);
// a duplicate, a stale epoch or a bucket that ran out take a transaction.
//
// Without unit (a worker of a release before domain.HoldRecordVersion
// still runs, and could not place such a hold's order) the hold is
// recorded without its unit, as that release did, and its order takes it:
// the user's rule is the database's all the same.
func (s *Store) RecordRedisHold(ctx context.Context, in domain.OrderInput, epoch, seq int64, unit bool) (HoldRecord, error) {
	guard := holdGuardArgs(in.SaleID, epoch)
	if seq == 0 {
		// A replay (Redis numbers only new holds): its row is there most
		// often, and one read answers it.
		var rec HoldRecord
		began := time.Now()
		found, err := answerRecorded(ctx, s.DB, in.Token, guard, &rec)
		if err != nil {
			return HoldRecord{}, fmt.Errorf("record redis hold %s: %w", in.Token, err)
		}
		s.holds.trips.note(began)
		if found {
			return rec, nil
		}
	}
	lost := false
	if unit {
		var recorded bool
		var err error
		recorded, lost, err = s.recordHoldFast(ctx, in, guard, seq)
		if err != nil {
			return HoldRecord{}, fmt.Errorf("record redis hold %s: %w", in.Token, err)
		}
		if recorded {
			return HoldRecord{Counted: true}, nil
		}
	}
	began := time.Now()
	rec, err := s.recordHoldTx(ctx, in, guard, seq, unit, lost)
	if err != nil {
		return HoldRecord{}, fmt.Errorf("record redis hold %s: %w", in.Token, err)
	}
	s.holds.trips.note(began)
	return rec, nil
}

// HoldProgress tells how the holds' records are going: when a round trip
// of one (a group, a script or a transaction) last answered, zero before
// any, and how long such a round trip typically takes. A caller waiting
// for a record behind a queue of groups can tell a busy database from a
// stalled one by it.
func (s *Store) HoldProgress() (last time.Time, roundTrip time.Duration) {
	return s.holds.trips.read()
}

// recordHoldFast records a hold in one round trip: a new hold (numbered
// by Redis) in its shard's next group, anything else (a replay not found,
// or a group whose outcome was lost, whose own record reads what it
// decided) in a script of its own. Not recorded: the transaction decides.
// lost: a group or script's outcome was unknown, so the row the
// transaction may meet is this hold's own.
func (s *Store) recordHoldFast(ctx context.Context, in domain.OrderInput, guard []any, seq int64) (recorded, lost bool, err error) {
	if seq > 0 {
		committed, err := s.holds.record(ctx, s.DB, in.SaleID, func(now time.Time, follows bool) []step { return holdSteps(in, guard, seq, now, follows) })
		if err == nil || ctx.Err() != nil {
			return committed, false, err
		}
		lost = Classify(err) == FaultUnknown
	}
	began := time.Now()
	err = recordHoldScript(ctx, s.DB, in, guard, seq)
	if err == nil || errors.Is(err, errHoldSlowPath) {
		s.holds.trips.note(began)
	}
	lost = lost || Classify(err) == FaultUnknown
	if errors.Is(err, errHoldSlowPath) || (Classify(err) != FaultNone && ctx.Err() == nil) {
		// A script whose outcome is unknown, or that was refused, is
		// decided by the transaction: it reads back a row the script did
		// commit (the token's key) and writes it otherwise.
		return false, lost, nil
	}
	return err == nil, lost, err
}

// holdColumns are the columns a Redis hold's record writes.
const holdColumns = "token, sale_id, user_id, request_id, path, status, fail_reason, unit_bucket, redis_seq, created_at, updated_at"

// nullSeq is seq as written: NULL when unknown.
func nullSeq(seq int64) any {
	if seq <= 0 {
		return nil
	}
	return seq
}

// recordHoldScript records the hold in one round trip: the row, QUEUED,
// inserted from the sale row under the guard (read under a shared lock,
// as every path reads it) with the bucket a read of the buckets picked;
// the ledger's deduct row; and last the unit from that bucket, by the
// conditional update. Any surprise rolls it back whole: errHoldSlowPath.
func recordHoldScript(ctx context.Context, db bun.IDB, in domain.OrderInput, guard []any, seq int64) error {
	var sc script
	sc.add(holdSteps(in, guard, seq, time.Now().UTC().Truncate(time.Millisecond), false)...)
	return sc.run(ctx, db)
}

// holdSteps are the statements of a hold's one-round-trip record, for a
// script of its own (recordHoldScript) or a part of a group (commitGroups):
// the row inserted with the bucket it picked, the ledger's deduct row, and
// last the unit taken from that bucket by the conditional update. The
// bucket is picked inside the INSERT ... SELECT, a consistent read under
// READ COMMITTED: a SET's subquery reads the buckets under shared locks,
// which two groups in flight would each want to raise to an update's. The
// same statement keeps its pick in @seckill_hold_bucket for the statements
// after it (an assignment in the select list, which MySQL 8 still runs,
// deprecated): a read of the row back was a seventh of MariaDB's work
// for a hold.
//
// A shard has several groups in flight at once, so their bucket locks must
// be taken in one order, or two groups could each wait on the other's: a
// part that follows one of its sale in the group (follows) takes its unit
// from the bucket the one before it picked (@seckill_hold_bucket) while it
// has stock, else from the next one above with stock, never below (none
// picked before: none above); a part with none there is rolled back alone
// and decided statement by statement, which takes one bucket in a
// transaction of its own. A sale's first part in a group, as a lone
// script, picks from any bucket.
func holdSteps(in domain.OrderInput, guard []any, seq int64, now time.Time, follows bool) []step {
	bucket := openBucketColumn(false)
	if follows {
		bucket = `COALESCE(
			(SELECT b.bucket_no FROM stock_buckets b WHERE b.sale_id = sales.id AND b.bucket_no = @seckill_hold_bucket AND b.stock >= 1),
			(SELECT b.bucket_no FROM stock_buckets b WHERE b.sale_id = sales.id AND b.bucket_no > COALESCE(@seckill_hold_bucket, ` + noBucketAbove + `) AND b.stock >= 1 ORDER BY b.bucket_no LIMIT 1))`
	}
	return []step{
		{stmt: stmt{"INSERT INTO reservations (" + holdColumns + `)
			SELECT ?, id, ?, ?, ?, ?, NULL, @seckill_hold_bucket := ` + bucket + `, ?, ?, ? FROM sales WHERE ` + holdGuard + ` LOCK IN SHARE MODE`,
			append([]any{in.Token, in.UserID, in.RequestID, string(domain.PathRedis), string(domain.StatusQueued), nullSeq(seq), now, now}, guard...)},
			what: "insert hold", dup: errHoldSlowPath, none: errHoldSlowPath},
		{stmt: stmt{`INSERT INTO stock_ledger (token, operation, sale_id, bucket_no, delta, created_at)
			VALUES (?, 'deduct', ?, COALESCE(@seckill_hold_bucket, -1), -1, ?)`, []any{in.Token, in.SaleID, now}},
			what: "ledger deduct", dup: errHoldSlowPath},
		{stmt: stmt{"UPDATE stock_buckets SET stock = stock - 1 WHERE sale_id = ? AND bucket_no = @seckill_hold_bucket AND stock >= 1",
			[]any{in.SaleID}}, what: "deduct bucket", none: errHoldSlowPath, lockWait: 1},
	}
}

// noBucketAbove is above every bucket number (a sale has at most 1,024):
// a part following one that found no bucket finds none either.
const noBucketAbove = "1073741824"

// recordHoldTx decides a hold statement by statement, in one transaction:
// a replay, a user who holds a unit, a number Redis handed out before, a
// guard that fails, a sale whose buckets ran out. A transaction refused,
// or whose outcome is unknown, is run again: the token's key makes its
// retry read back what an earlier attempt committed. lost: an earlier
// write of this hold's outcome is unknown already.
func (s *Store) recordHoldTx(ctx context.Context, in domain.OrderInput, guard []any, seq int64, unit, lost bool) (rec HoldRecord, err error) {
	err = againIdempotent(ctx, func(ctx context.Context) error {
		own := ""
		if lost {
			own = in.Token
		}
		rec, err = s.recordHoldOnce(ctx, in, guard, seq, unit, own)
		lost = lost || Classify(err) == FaultUnknown
		return err
	})
	return rec, err
}

// recordHoldOnce is recordHoldTx's transaction. own names a token whose row
// numbered seq is no sign of a Redis back in time: the hold's own, when an
// earlier attempt of this record whose answer was lost may have written it.
func (s *Store) recordHoldOnce(ctx context.Context, in domain.OrderInput, guard []any, seq int64, unit bool, own string) (HoldRecord, error) {
	var rec HoldRecord
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		rec = HoldRecord{}
		inserted, key, err := insertHold(ctx, tx, in, guard, seq, "")
		switch {
		case key == keyRedisSeq:
			rec.WentBack = true
			inserted, key, err = insertHold(ctx, tx, in, guard, 0, "")
		case key != "" && seq > 0:
			// The duplicate names one key: a holder's or a replay's hides
			// the number's, and a number the database has is Redis back in
			// time all the same (a lost holder asking again after a
			// failover is often the first to meet it).
			rec.WentBack, err = seqRecorded(ctx, tx, in.SaleID, seq, own)
		}
		switch {
		case err != nil:
			return err
		case key == keyLiveUser:
			rec.Counted, rec.Refused = true, domain.ErrAlreadyHolds
			if rec.Holder, err = liveHold(ctx, tx, in.SaleID, in.UserID); err != nil {
				return err
			}
			_, _, err := insertHold(ctx, tx, in, nil, 0, domain.FailReasonRefusedHolder)
			return err
		case key != "" || !inserted:
			_, err := answerRecorded(ctx, tx, in.Token, guard, &rec)
			return err
		}
		rec.Counted = true
		if !unit {
			return nil
		}
		return takeHoldUnit(ctx, tx, in, &rec)
	})
	return rec, err
}

// liveHold reads the user's live or paid reservation of the sale (the one
// the live_user key names), nil when there is none by now.
func liveHold(ctx context.Context, tx bun.Tx, saleID, userID int64) (*LiveHold, error) {
	var h LiveHold
	err := tx.QueryRowContext(ctx, "SELECT token, request_id FROM reservations WHERE sale_id = ? AND live_user = ? AND user_id = ?", saleID, userID, userID).Scan(&h.Token, &h.RequestID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the holder's reservation: %w", err)
	}
	return &h, nil
}

// Unique keys of reservations a hold's insert can meet.
const (
	keyLiveUser = "reservations_live_user"
	keyRedisSeq = "reservations_redis_seq"
	keyOther    = "other"
)

// insertHold inserts the hold's row: QUEUED from the sale row under guard
// (nil: no guard), or FAILED with failReason. It reports whether a row went
// in, and the unique key a duplicate met ("" for none).
func insertHold(ctx context.Context, tx bun.Tx, in domain.OrderInput, guard []any, seq int64, failReason string) (bool, string, error) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	status, reason := string(domain.StatusQueued), any(nil)
	if failReason != "" {
		status, reason = string(domain.StatusFailed), failReason
	}
	where, args := "id = ?", []any{in.SaleID}
	if guard != nil {
		where, args = holdGuard, guard
	}
	res, err := tx.ExecContext(ctx, "INSERT INTO reservations ("+holdColumns+`)
		SELECT ?, id, ?, ?, ?, ?, ?, NULL, ?, ?, ? FROM sales WHERE `+where+` LOCK IN SHARE MODE`,
		append([]any{in.Token, in.UserID, in.RequestID, string(domain.PathRedis), status, reason, nullSeq(seq), now, now}, args...)...)
	if IsDuplicate(err) {
		return false, duplicateKey(err), nil
	}
	if err != nil {
		return false, "", fmt.Errorf("insert hold: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, "", fmt.Errorf("insert hold: %w", err)
	}
	return n == 1, "", nil
}

// duplicateKey names the unique key a duplicate-key error met: MariaDB's
// message ends "for key '<name>'" (MySQL 8 prefixes the table's name).
func duplicateKey(err error) string {
	msg := err.Error()
	for _, k := range []string{keyLiveUser, keyRedisSeq} {
		if strings.Contains(msg, k+"'") {
			return k
		}
	}
	return keyOther
}

// answerRecorded decides a hold whose row was there already (a replay, or
// the relay recorded it first) or that the guard kept out: the refusal
// the row records, else counted when the row holds its unit or has moved
// on, or, recorded without a unit, while the guard holds now.
// It reports whether the row was there.
func answerRecorded(ctx context.Context, q bun.IDB, token string, guard []any, rec *HoldRecord) (bool, error) {
	row, err := getReservation(ctx, q, token, false)
	if errors.Is(err, ErrNotFound) {
		return false, nil // the guard failed: nothing recorded, not counted
	}
	if err != nil {
		return false, fmt.Errorf("read recorded hold: %w", err)
	}
	if refused := domain.RefusalOf(domain.ReservationStatus(row.Status), derefString(row.FailReason)); refused != nil {
		rec.Counted, rec.Refused = true, refused
		return true, nil
	}
	if row.UnitBucket != nil || row.Status != string(domain.StatusQueued) || guard == nil {
		rec.Counted = true
		return true, nil
	}
	if err := q.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM sales WHERE "+holdGuard+")", guard...).Scan(&rec.Counted); err != nil {
		return true, fmt.Errorf("check the guard: %w", err)
	}
	return true, nil
}

// takeHoldUnit takes the hold's unit from any bucket with one (deductBucket)
// and records where; with none left the hold is refused: its row ends
// FAILED (refused_sold_out) and the caller answers sold out.
func takeHoldUnit(ctx context.Context, tx bun.Tx, in domain.OrderInput, rec *HoldRecord) error {
	var buckets int
	if err := tx.QueryRowContext(ctx, "SELECT buckets FROM sales WHERE id = ?", in.SaleID).Scan(&buckets); err != nil {
		return fmt.Errorf("read buckets: %w", err)
	}
	bucket, err := deductBucket(ctx, tx, in.SaleID, buckets, false)
	now := time.Now().UTC().Truncate(time.Millisecond)
	if errors.Is(err, domain.ErrSoldOut) {
		rec.Refused = domain.ErrSoldOut
		_, err := tx.ExecContext(ctx, "UPDATE reservations SET status = ?, fail_reason = ?, updated_at = ? WHERE token = ? AND user_id = ?",
			string(domain.StatusFailed), domain.FailReasonRefusedSoldOut, now, in.Token, in.UserID)
		if err != nil {
			return fmt.Errorf("refuse hold: %w", err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO stock_ledger (token, operation, sale_id, bucket_no, delta, created_at)
		VALUES (?, 'deduct', ?, ?, -1, ?)`, in.Token, in.SaleID, bucket, now); err != nil {
		return fmt.Errorf("ledger deduct: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE reservations SET unit_bucket = ? WHERE token = ? AND user_id = ?", bucket, in.Token, in.UserID); err != nil {
		return fmt.Errorf("record the hold's bucket: %w", err)
	}
	return nil
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// MarkRedisWentBack records that a hold found Redis behind the database
// (HoldRecord.WentBack): the worker rebuilds the sale from the database
// (TakeRedisWentBack). A second mark before the rebuild changes nothing.
// It is idempotent: sent again when refused or its answer was lost.
func (s *Store) MarkRedisWentBack(ctx context.Context, saleID int64) error {
	err := againIdempotent(ctx, func(ctx context.Context) error {
		_, err := s.DB.ExecContext(ctx, "UPDATE sales SET redis_went_back_at = NOW(3) WHERE id = ? AND redis_went_back_at IS NULL", saleID)
		return err
	})
	if err != nil {
		return fmt.Errorf("mark redis went back for sale %d: %w", saleID, err)
	}
	return nil
}

// TakeRedisWentBack clears the sale's mark, reporting whether it was set:
// the caller that took it rebuilds the sale. A rebuild that fails leaves
// the sale on the database path, which the resync brings back from the
// database too. A take whose answer was lost may have cleared the mark,
// and a read cannot tell by whom: it answers taken, since a rebuild the
// sale did not need costs less than one it missed.
func (s *Store) TakeRedisWentBack(ctx context.Context, saleID int64) (bool, error) {
	var res sql.Result
	err := againIdempotent(ctx, func(ctx context.Context) error {
		var err error
		res, err = s.DB.ExecContext(ctx, "UPDATE sales SET redis_went_back_at = NULL WHERE id = ? AND redis_went_back_at IS NOT NULL", saleID)
		if Classify(err) == FaultUnknown {
			return errTakenMaybe
		}
		return err
	})
	if errors.Is(err, errTakenMaybe) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("take redis went back for sale %d: %w", saleID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("take redis went back for sale %d: %w", saleID, err)
	}
	return n == 1, nil
}

// errTakenMaybe: TakeRedisWentBack's update may have cleared the mark.
var errTakenMaybe = errors.New("the mark may have been taken")

// maxRedisSeq is the highest Redis hold number the database recorded for
// the sale: a rebuilt Redis counts on from there, so its next hold's
// number is new.
func maxRedisSeq(ctx context.Context, tx bun.Tx, saleID int64) (int64, error) {
	var n sql.NullInt64
	if err := tx.QueryRowContext(ctx, "SELECT MAX(redis_seq) FROM reservation_keys WHERE sale_id = ?", saleID).Scan(&n); err != nil {
		return 0, fmt.Errorf("highest redis hold number: %w", err)
	}
	return n.Int64, nil
}

// seqRecorded reports whether the database has the sale's hold numbered
// seq by Redis, on another token than own ("": any).
func seqRecorded(ctx context.Context, tx bun.Tx, saleID, seq int64, own string) (bool, error) {
	var found bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM reservation_keys WHERE sale_id = ? AND redis_seq = ? AND token <> ?)", saleID, seq, own).Scan(&found); err != nil {
		return false, fmt.Errorf("hold number %d: %w", seq, err)
	}
	return found, nil
}

// RedisCounters reads what a sale's Redis counters must have reached: the
// highest hold number and the highest waitlist join number the database
// recorded. A Redis whose counters are below them went back in time.
func (s *Store) RedisCounters(ctx context.Context, saleID int64) (maxSeq, maxJoin int64, err error) {
	var seq, join sql.NullInt64
	err = s.DB.QueryRowContext(ctx, `SELECT (SELECT MAX(redis_seq) FROM reservation_keys WHERE sale_id = ?),
		(SELECT MAX(joined) FROM waitlist_joins WHERE sale_id = ?)`, saleID, saleID).Scan(&seq, &join)
	if err != nil {
		return 0, 0, fmt.Errorf("redis counters of sale %d: %w", saleID, err)
	}
	return seq.Int64, join.Int64, nil
}
