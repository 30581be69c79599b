package store

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/domain"
)

// Grouped database-path reservations. A sale's reservation needs its
// price, payment window, bucket count and mode epoch to write its rows;
// once one reservation of the sale succeeded, those terms are kept
// (dbSaleTerms), and the next reservations go in their shard's group
// (commitGroups) without a read of their own: each part checks on the sale
// row, under the shared lock every path takes, everything the read and
// admits check (the terms unchanged, the mode and epoch, the operator's
// control, the window, the hold-off, an open quota), and by its insert
// probes the replay key and the user's live reservations (a QUEUED hold
// included: reservations_live_user). A part that meets any of them, or
// finds its picked bucket empty or held too long, rolls back
// alone, and the per-reservation path (reserveInDB) decides it as it
// decides a lone reservation: the group only ever answers success.

// dbSaleTerms are what a database-path reservation writes from its sale.
type dbSaleTerms struct {
	PriceCents           int64
	PaymentWindowSeconds int
	Buckets              int
	Epoch                int64
}

// terms are the sale's terms as a reservation that succeeded read them.
func (sale *dbSale) terms() dbSaleTerms {
	return dbSaleTerms{PriceCents: sale.PriceCents, PaymentWindowSeconds: sale.PaymentWindowSeconds, Buckets: sale.Buckets, Epoch: sale.Epoch}
}

// maxKeptTerms bounds the sales whose terms are kept; past it they are
// dropped, and each sale's next reservation reads them again.
const maxKeptTerms = 4096

// keepTerms keeps a sale's terms for its next reservations' groups.
func (s *Store) keepTerms(saleID int64, t dbSaleTerms) {
	if old, ok := s.dbTerms.Load(saleID); ok {
		if old != t {
			s.dbTerms.Store(saleID, t)
		}
		return
	}
	if s.keptTerms.Add(1) > maxKeptTerms {
		s.dbTerms.Clear()
		s.keptTerms.Store(1)
	}
	s.dbTerms.Store(saleID, t)
}

// reserveInDBGroup tries the reservation as a part of its shard's next
// group. It reports the reservation when the part committed; nil with no
// error when the per-reservation path must decide it (no terms kept, or
// the part rolled back, or the group's outcome was lost, then with lost:
// that path's replay probe finds a reservation the group did commit).
func (s *Store) reserveInDBGroup(ctx context.Context, in domain.OrderInput) (res *domain.Reservation, lost bool, err error) {
	kept, ok := s.dbTerms.Load(in.SaleID)
	if !ok {
		return nil, false, nil
	}
	t := kept.(dbSaleTerms)
	o := orderFor(in.Token, in.SaleID, in.UserID, t.PriceCents, t.PaymentWindowSeconds, t.Buckets)
	o.Quota = true
	committed, err := s.dbpath.record(ctx, s.DB, in.SaleID, func(_ time.Time, follows bool) []step {
		return dbGroupPart(in, o, t, follows)
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, true, fmt.Errorf("reserve in db: %w", err)
	case err != nil || !committed:
		return nil, err != nil, nil
	}
	return domain.DatabasePathReservation(in, o.OrderNo, o.AmountCents, o.PayBy, o.Now), false, nil
}

// dbGroupPart is a reservation's part of a group: the pick of a bucket
// with a unit of stock and quota (one read, without locks), unless the
// part follows one of the same sale, whose pick it shares; the
// reservation inserted from the sale row under the shared lock and every
// check of the per-reservation path (no row, or a duplicate of the
// replay key or of the user's live reservation: that path decides, its
// read telling a replay from a QUEUED hold or a purchase); its outbox
// row; its order and ledger rows naming the bucket picked; and last the
// unit from that bucket, waiting for its row at most wantLockWait.
//
// A shared pick costs the group nothing in waits: the group is one
// transaction, so its takes from one bucket queue no one but other
// transactions, as a single take would, and the bucket's row is locked
// from the first take to the commit either way. A part that finds the
// shared bucket run dry rolls back alone (errStalePick), and the
// per-reservation path picks again. The read it saves is among a part's
// costliest statements. A sale's two groups in flight at once
// (dbGroupsInFlight) pick apart most often; a group whose pick the other
// holds waits for that one's commit, as a lone take would.
func dbGroupPart(in domain.OrderInput, o newOrder, t dbSaleTerms, follows bool) []step {
	part := dbGroupRows(in, o, t)
	if follows {
		return part
	}
	pick := step{stmt: stmt{`SELECT ` + openBucketColumn(true) + ` INTO @seckill_db_bucket FROM sales WHERE id = ?`,
		[]any{in.SaleID}}, what: "pick a bucket"}
	return append([]step{pick}, part...)
}

// dbGroupRows are a group part's writes, with the bucket picked
// (@seckill_db_bucket).
func dbGroupRows(in domain.OrderInput, o newOrder, t dbSaleTerms) []step {
	stopped, paused := string(domain.ControlStopped), string(domain.ControlPaused)
	return []step{
		{stmt: stmt{`INSERT INTO reservations
			(token, sale_id, user_id, request_id, path, status, order_no, amount_cents, pay_by, created_at, updated_at)
			SELECT ?, id, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM sales WHERE id = ? AND mode = ? AND mode_epoch = ?
			AND price_cents = ? AND payment_window_seconds = ? AND buckets = ? AND control NOT IN (?, ?)
			AND NOW(3) >= starts_at AND NOW(3) < ends_at AND COALESCE(db_sell_after <= NOW(3), TRUE) AND db_quota >= 1
			AND @seckill_db_bucket IS NOT NULL LOCK IN SHARE MODE`, []any{
			in.Token, in.UserID, in.RequestID, string(domain.PathDatabase), string(domain.StatusPendingPayment),
			o.OrderNo, o.AmountCents, o.PayBy, o.Now, o.Now,
			in.SaleID, string(domain.ModeDatabase), t.Epoch, t.PriceCents, t.PaymentWindowSeconds, t.Buckets, stopped, paused}},
			what: "insert reservation", dup: errReplayRace, none: domain.ErrSaleResyncing},
		{stmt: stmt{"INSERT INTO outbox (token, sale_id, created_at) VALUES (?, ?, ?)", []any{in.Token, in.SaleID, o.Now}}, what: "outbox"},
		{stmt: stmt{"INSERT INTO orders (" + orderColumns + ") VALUES (?, ?, ?, ?, ?, ?, @seckill_db_bucket, ?, ?, ?)", []any{
			o.OrderNo, o.Token, o.SaleID, o.UserID, o.AmountCents, string(domain.StatusPendingPayment), o.PayBy, o.Now, o.Now}},
			what: "insert order", dup: domain.ErrAlreadyHolds},
		{stmt: stmt{`INSERT INTO stock_ledger (token, operation, sale_id, bucket_no, delta, created_at)
			VALUES (?, 'deduct', ?, @seckill_db_bucket, -1, ?)`, []any{o.Token, o.SaleID, o.Now}}, what: "ledger deduct"},
		{stmt: stmt{takeFromQuery(true, "@seckill_db_bucket"), []any{o.SaleID}}, what: "deduct bucket", none: errStalePick, lockWait: o.wantLockWait()},
	}
}
