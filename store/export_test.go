package store

import (
	"context"
	"time"

	"github.com/seckill/seckill/domain"
)

// PlaceOrderWanting is PlaceOrder with the bucket the order wants named by
// the test, as if the read had picked it: a stale pick, or one another
// transaction holds.
func (s *Store) PlaceOrderWanting(ctx context.Context, token string, bucket int) (*domain.Reservation, error) {
	return s.placeOrder(ctx, token, &bucket)
}

// ReserveInDBWanting is ReserveInDB with the bucket the reservation wants
// named by the test, as if the read had picked it.
func (s *Store) ReserveInDBWanting(ctx context.Context, in domain.OrderInput, bucket int) (*domain.Reservation, bool, error) {
	return s.reserveInDB(ctx, in, 0, &bucket)
}

// ScriptStep is a step of a script: a statement, the error a duplicate key
// in it fails the script with, and the error a count of affected rows
// other than one does (nil: none).
type ScriptStep struct {
	Query     string
	Args      []any
	Dup, None error
}

// RunScript runs steps as one script.
func (s *Store) RunScript(ctx context.Context, steps ...ScriptStep) error {
	var sc script
	for _, st := range steps {
		sc.add(step{stmt: stmt{st.Query, st.Args}, what: "test step", dup: st.Dup, none: st.None})
	}
	return sc.run(ctx, s.DB)
}

// RunGroup runs parts, each made of steps, as one group, and reports which
// committed.
func (s *Store) RunGroup(ctx context.Context, parts ...[]ScriptStep) ([]bool, error) {
	var g group
	for _, part := range parts {
		steps := make([]step, 0, len(part))
		for _, st := range part {
			steps = append(steps, step{stmt: stmt{st.Query, st.Args}, what: "test step", dup: st.Dup, none: st.None})
		}
		g.add(steps...)
	}
	return g.run(ctx, s.DB)
}

// HoldGroupsSent is the number of groups of new holds sent so far, and the
// holds they carried.
func (s *Store) HoldGroupsSent() (groups, holds int64) {
	return s.holds.groups.Load(), s.holds.grouped.Load()
}

// HoldGroupsOverlap is the most groups of new holds a shard has had in
// flight at once, and how many holds their groups did not commit.
func (s *Store) HoldGroupsOverlap() (peak, undecided int64) {
	return s.holds.peak.Load(), s.holds.undecided.Load()
}

// RecordRedisHoldAlone records a new hold as a lone record does (its own
// one-round-trip script), not in a group: the baseline of the groups'
// benchmark. It reports whether the script recorded it.
func (s *Store) RecordRedisHoldAlone(ctx context.Context, in domain.OrderInput, epoch, seq int64) (bool, error) {
	err := recordHoldScript(ctx, s.DB, in, holdGuardArgs(in.SaleID, epoch), seq)
	if err == errHoldSlowPath {
		return false, nil
	}
	return err == nil, err
}

// ReserveInDBAlone is ReserveInDB without groups: the per-reservation path
// (a read and a script), the baseline of the groups' benchmark.
func (s *Store) ReserveInDBAlone(ctx context.Context, in domain.OrderInput) (*domain.Reservation, bool, error) {
	return s.reserveInDBAlone(ctx, in, 0, nil)
}

// DBGroupsSent is the number of groups of database-path reservations sent
// so far, and the reservations they carried.
func (s *Store) DBGroupsSent() (groups, reservations int64) {
	return s.dbpath.groups.Load(), s.dbpath.grouped.Load()
}

// DBGroupsOverlap is the most groups of database-path reservations a
// shard has had in flight at once, and how many reservations their groups
// did not commit.
func (s *Store) DBGroupsOverlap() (peak, undecided int64) {
	return s.dbpath.peak.Load(), s.dbpath.undecided.Load()
}

// ListReservationsSQL is the statement ListReservations sends, its
// arguments in place.
func (s *Store) ListReservationsSQL(userID, saleID int64, limit int) string {
	var rows []reservationRow
	return listQuery(s.DB, &rows, userID, saleID, limit, time.Time{}).String()
}

// GetReservationSQL is the statement GetReservation sends, its argument in
// place.
func (s *Store) GetReservationSQL(token string) string {
	return reservationByToken(s.DB, new(reservationRow), token).String()
}

// SpeakMySQL8 makes the store send MySQL 8's forms, whatever its server:
// MariaDB runs them too, so the tests run them there.
func (s *Store) SpeakMySQL8() { s.setDialect(MySQL8) }

// BuyableSalesStatement is ListBuyableSales' statement as it is sent, for
// a test's EXPLAIN.
func (s *Store) BuyableSalesStatement(q ListingQuery) string {
	var rows []saleRow
	return buyableSales(s.DB, q, &rows).String()
}

// SetDirectoryTiming sets the directory's fresh and full periods (see
// DirectoryFresh, DirectoryFull).
func (s *Store) SetDirectoryTiming(fresh, full time.Duration) {
	s.sales.mu.Lock()
	defer s.sales.mu.Unlock()
	s.sales.fresh, s.sales.full = fresh, full
}

// QueuedRedisHoldsStatement is QueuedRedisHolds' statement as it is sent,
// for a test's EXPLAIN.
func (s *Store) QueuedRedisHoldsStatement(saleID int64, since time.Time, untilAgo time.Duration, after string, limit int) string {
	return s.DB.NewRaw(queuedHoldsQuery, queuedHoldsArgs(saleID, since, untilAgo, after, limit)...).String()
}
