package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/seckill/seckill/domain"
)

// The reads that may lag: a state at most the replica's bound old is a
// fine answer to them, but a row missing because the replica has not
// applied it yet is not. The replica answers while it is fresh; what it
// does not have is asked of the primary; a replica that fails is stepped
// around, not reported. Every read a decision rests on (a transition, a
// repair, the reconciliation compared with Redis) reads the primary.

// ReadReservation is GetReservation for a status read: the replica's row,
// or the primary's when the replica has none (the reservation is younger
// than the replica's lag) or fails.
func (s *Store) ReadReservation(ctx context.Context, token string) (*domain.Reservation, ReadSource, error) {
	db, from := s.mayLag()
	if from == FromReplica {
		row, err := getReservation(ctx, db, token, false)
		if err == nil {
			s.counted(FromReplica)
			return row.domain(), FromReplica, nil
		}
		from = FromPrimaryAfterReplica
		if !errors.Is(err, ErrNotFound) {
			s.replica.logger.Warn("replica read failed; reading the primary", "token", token, "err", err)
			from = FromPrimary
		}
	}
	s.counted(from)
	res, err := s.GetReservation(ctx, token)
	return res, from, err
}

// ReadReservations is ListReservations for "my reservations": the
// replica's rows, completed by the primary's rows of the user created
// since the replica's watermark (less recentSlack), which the replica may
// not have yet; a row both have is taken from the primary.
func (s *Store) ReadReservations(ctx context.Context, userID, saleID int64, limit int) ([]*domain.Reservation, ReadSource, error) {
	db, from := s.mayLag()
	if from != FromReplica {
		s.counted(from)
		out, err := s.ListReservations(ctx, userID, saleID, limit)
		return out, from, err
	}
	since := time.Unix(0, s.replica.watermark.Load()).Add(-recentSlack)
	older, err := listReservations(ctx, db, userID, saleID, limit, time.Time{})
	if err != nil {
		s.replica.logger.Warn("replica read failed; reading the primary", "user_id", userID, "err", err)
		s.counted(FromPrimary)
		out, err := s.ListReservations(ctx, userID, saleID, limit)
		return out, FromPrimary, err
	}
	recent, err := listReservations(ctx, s.DB, userID, saleID, limit, since)
	if err != nil {
		return nil, FromPrimary, fmt.Errorf("list reservations of user %d: recent ones on the primary: %w", userID, err)
	}
	s.counted(FromReplica)
	return mergeNewestFirst(recent, older, limit), FromReplica, nil
}

// mergeNewestFirst is primary's rows and replica's others, newest first
// (ListReservations' order), at most limit.
func mergeNewestFirst(primary, replica []*domain.Reservation, limit int) []*domain.Reservation {
	seen := make(map[string]bool, len(primary))
	out := slices.Clone(primary)
	for _, r := range primary {
		seen[r.Token] = true
	}
	for _, r := range replica {
		if !seen[r.Token] {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b *domain.Reservation) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		switch {
		case a.Token > b.Token:
			return -1
		case a.Token < b.Token:
			return 1
		}
		return 0
	})
	return out[:min(len(out), limit)]
}

// ReadSnapshotMayLag is ReadSnapshot for a scan whose every finding is
// read again from the primary before it is acted on: a sale's live
// reservations checked for a closed workflow, once the sale has ended.
func (s *Store) ReadSnapshotMayLag(ctx context.Context, saleID int64) (*Snapshot, ReadSource, error) {
	db, from := s.mayLag()
	snap, err := readSnapshot(ctx, db, saleID)
	if err != nil && from == FromReplica {
		s.replica.logger.Warn("replica read failed; reading the primary", "sale_id", saleID, "err", err)
		from = FromPrimary
		snap, err = s.ReadSnapshot(ctx, saleID)
	}
	s.counted(from)
	return snap, from, err
}

// listMayLag runs an admin list's query on the replica while it is fresh,
// and on the primary otherwise or when the replica fails.
func (s *Store) listMayLag(ctx context.Context, what string, query func(db querier) error) error {
	db, from := s.mayLag()
	err := query(db)
	if err != nil && from == FromReplica {
		s.replica.logger.Warn("replica read failed; reading the primary", "list", what, "err", err)
		from = FromPrimary
		err = query(s.DB)
	}
	s.counted(from)
	return err
}
