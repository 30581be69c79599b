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

// The gate's tables (migration 0009): sale allowlists, challenge
// exemptions, redeemed challenges and appeals.

// allowlistChunk bounds one statement's rows (and its placeholders).
const allowlistChunk = 5_000

// AllowlistChange is one operator call on a sale's allowlist.
type AllowlistChange struct {
	Add, Remove []int64
	// Restricted sets the restriction; nil leaves it, except that a
	// sale's first add restricts it.
	Restricted *bool
}

// UpdateAllowlist applies change in one transaction and answers the
// sale's restriction and how many users are listed. A repeat changes
// nothing (the version moves only when something did), so a transaction
// refused or whose answer was lost is run again, and answers the same.
func (s *Store) UpdateAllowlist(ctx context.Context, saleID int64, change AllowlistChange) (restricted bool, listed int64, err error) {
	err = againIdempotent(ctx, func(ctx context.Context) error {
		restricted, listed, err = s.updateAllowlistTx(ctx, saleID, change)
		return err
	})
	if err != nil {
		return false, 0, fmt.Errorf("update allowlist of sale %d: %w", saleID, err)
	}
	return restricted, listed, nil
}

// updateAllowlistTx is UpdateAllowlist's transaction.
func (s *Store) updateAllowlistTx(ctx context.Context, saleID int64, change AllowlistChange) (restricted bool, listed int64, err error) {
	err = s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var version int64
		if err := tx.QueryRowContext(ctx, "SELECT restricted, allowlist_version FROM sales WHERE id = ? FOR UPDATE", saleID).
			Scan(&restricted, &version); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("sale %d: %w", saleID, ErrNotFound)
			}
			return fmt.Errorf("lock sale: %w", err)
		}
		added, err := chunked(ctx, tx, change.Add, insertListed(saleID))
		if err != nil {
			return err
		}
		removed, err := chunked(ctx, tx, change.Remove, deleteListed(saleID))
		if err != nil {
			return err
		}
		want := restricted
		switch {
		case change.Restricted != nil:
			want = *change.Restricted
		case len(change.Add) > 0 && version == 0:
			want = true
		}
		if added+removed > 0 || want != restricted || (len(change.Add) > 0 && version == 0) {
			if _, err := tx.ExecContext(ctx, "UPDATE sales SET restricted = ?, allowlist_version = allowlist_version + 1 WHERE id = ?", want, saleID); err != nil {
				return fmt.Errorf("bump allowlist version: %w", err)
			}
		}
		restricted = want
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM sale_allowlist WHERE sale_id = ?", saleID).Scan(&listed); err != nil {
			return fmt.Errorf("count allowlist: %w", err)
		}
		return nil
	})
	return restricted, listed, err
}

// chunked runs one statement per allowlistChunk ids, built by build
// (its SQL and arguments), and answers the rows affected.
func chunked(ctx context.Context, tx bun.Tx, ids []int64, build func(part []int64) (string, []any)) (int64, error) {
	var total int64
	for start := 0; start < len(ids); start += allowlistChunk {
		q, args := build(ids[start:min(start+allowlistChunk, len(ids))])
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return 0, fmt.Errorf("allowlist rows: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("allowlist rows: %w", err)
		}
		total += n
	}
	return total, nil
}

// insertListed and deleteListed build one chunk's statement.
func insertListed(saleID int64) func([]int64) (string, []any) {
	return func(part []int64) (string, []any) {
		args := make([]any, 0, 2*len(part))
		for _, id := range part {
			args = append(args, saleID, id)
		}
		return "INSERT IGNORE INTO sale_allowlist (sale_id, user_id) VALUES " + strings.Repeat("(?, ?),", len(part)-1) + "(?, ?)", args
	}
}

func deleteListed(saleID int64) func([]int64) (string, []any) {
	return func(part []int64) (string, []any) {
		args := make([]any, 0, len(part)+1)
		args = append(args, saleID)
		for _, id := range part {
			args = append(args, id)
		}
		return "DELETE FROM sale_allowlist WHERE sale_id = ? AND user_id IN (" + strings.Repeat("?,", len(part)-1) + "?)", args
	}
}

// Allowlist reads a sale's listed users and the version they are at, in
// one snapshot.
func (s *Store) Allowlist(ctx context.Context, saleID int64) (ids []int64, version int64, err error) {
	err = s.DB.RunInTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, func(ctx context.Context, tx bun.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT allowlist_version FROM sales WHERE id = ?", saleID).Scan(&version); err != nil {
			return fmt.Errorf("allowlist version: %w", err)
		}
		return tx.NewSelect().Table("sale_allowlist").Column("user_id").Where("sale_id = ?", saleID).Scan(ctx, &ids)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read allowlist of sale %d: %w", saleID, err)
	}
	return ids, version, nil
}

// SetExempt exempts a user from challenges, or ends the exemption.
// Either is idempotent: sent again when refused or its answer was lost.
func (s *Store) SetExempt(ctx context.Context, userID int64, on bool) error {
	if err := againIdempotent(ctx, func(ctx context.Context) error { return setExempt(ctx, s.DB, userID, on) }); err != nil {
		return fmt.Errorf("challenge exemption of user %d: %w", userID, err)
	}
	return nil
}

func setExempt(ctx context.Context, db bun.IDB, userID int64, on bool) error {
	var err error
	if on {
		_, err = db.ExecContext(ctx, "INSERT IGNORE INTO challenge_exemptions (user_id, created_at) VALUES (?, ?)", userID, time.Now().UTC())
	} else {
		_, err = db.ExecContext(ctx, "DELETE FROM challenge_exemptions WHERE user_id = ?", userID)
	}
	return err
}

// Exemptions lists every user exempted from challenges.
func (s *Store) Exemptions(ctx context.Context) ([]int64, error) {
	var ids []int64
	if err := s.DB.NewSelect().Table("challenge_exemptions").Column("user_id").Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("read challenge exemptions: %w", err)
	}
	return ids, nil
}

// RedeemChallenge records a solved challenge (its hex hash) and answers
// false when it was redeemed before.
func (s *Store) RedeemChallenge(ctx context.Context, challenge string, expires time.Time) (bool, error) {
	res, err := s.DB.ExecContext(ctx, "INSERT IGNORE INTO challenge_redemptions (challenge, expires_at) VALUES (?, ?)", challenge, expires.UTC())
	if err != nil {
		return false, fmt.Errorf("redeem challenge: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("redeem challenge: %w", err)
	}
	return n == 1, nil
}

// SweepRedemptions deletes up to limit redemptions expired before before.
func (s *Store) SweepRedemptions(ctx context.Context, before time.Time, limit int) (int64, error) {
	res, err := s.DB.ExecContext(ctx, "DELETE FROM challenge_redemptions WHERE expires_at < ? LIMIT ?", before.UTC(), limit)
	if err != nil {
		return 0, fmt.Errorf("sweep challenge redemptions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sweep challenge redemptions: %w", err)
	}
	return n, nil
}

type appealRow struct {
	bun.BaseModel `bun:"table:appeals"`

	ID        int64     `bun:"id,pk,autoincrement"`
	UserID    int64     `bun:"user_id"`
	SaleID    int64     `bun:"sale_id"`
	Reason    string    `bun:"reason"`
	Message   string    `bun:"message"`
	State     string    `bun:"state"`
	OpenUser  *int64    `bun:"open_user"`
	CreatedAt time.Time `bun:"created_at"`
}

func (r *appealRow) domain() domain.Appeal {
	return domain.Appeal{ID: r.ID, UserID: r.UserID, SaleID: r.SaleID, Reason: r.Reason, Message: r.Message,
		State: r.State, CreatedAt: r.CreatedAt.UTC()}
}

// FileAppeal records an open appeal and sets its id and time; a user with
// an open appeal for the sale gets domain.EAppealExists. An insert whose
// answer was lost is sent again; the open appeal it then meets is its own
// when it carries this one's reason, message and time.
func (s *Store) FileAppeal(ctx context.Context, a *domain.Appeal) error {
	row := &appealRow{UserID: a.UserID, SaleID: a.SaleID, Reason: a.Reason, Message: a.Message,
		State: domain.AppealOpen, OpenUser: &a.UserID, CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	lost := false
	err := againIdempotent(ctx, func(ctx context.Context) error {
		row.ID = 0
		_, err := s.DB.NewInsert().Model(row).Exec(ctx)
		lost = lost || Classify(err) == FaultUnknown
		return err
	})
	if IsDuplicate(err) && lost {
		var open appealRow
		rerr := s.DB.NewSelect().Model(&open).Where("sale_id = ? AND open_user = ?", a.SaleID, a.UserID).Scan(ctx)
		if rerr != nil && !errors.Is(rerr, sql.ErrNoRows) {
			return fmt.Errorf("file appeal: read back: %w", rerr)
		}
		if rerr == nil && open.Reason == row.Reason && open.Message == row.Message && open.CreatedAt.Equal(row.CreatedAt) {
			*a = open.domain()
			return nil
		}
	}
	if IsDuplicate(err) {
		return domain.Errorf(domain.EAppealExists, "an appeal of this user for this sale is open")
	}
	if err != nil {
		return fmt.Errorf("file appeal: %w", err)
	}
	*a = row.domain()
	return nil
}

// ListAppeals lists up to limit appeals in state with ids above after,
// oldest first.
func (s *Store) ListAppeals(ctx context.Context, state string, after int64, limit int) ([]domain.Appeal, error) {
	var rows []appealRow
	err := s.listMayLag(ctx, "appeals", func(db querier) error {
		rows = nil
		return db.NewSelect().Model(&rows).Where("state = ? AND id > ?", state, after).Order("id").Limit(int64(limit)).Scan(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("list appeals: %w", err)
	}
	out := make([]domain.Appeal, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, nil
}

// ResolveAppeal closes an open appeal with action in one transaction with
// the action's effect (the blacklist entry gone, or the user exempted), by
// admin. A closed appeal gets domain.EConflict; an unknown one ErrNotFound.
// A transaction refused or whose answer was lost is run again; after a
// lost answer, an appeal found closed by this admin with this action is
// the one it closed, answered as resolved now.
func (s *Store) ResolveAppeal(ctx context.Context, id int64, action string, admin int64) (domain.Appeal, error) {
	var row appealRow
	lost := false
	err := againIdempotent(ctx, func(ctx context.Context) error {
		err := s.resolveAppealTx(ctx, id, action, admin, lost, &row)
		lost = lost || Classify(err) == FaultUnknown
		return err
	})
	if err != nil {
		return domain.Appeal{}, fmt.Errorf("resolve appeal %d: %w", id, err)
	}
	return row.domain(), nil
}

// resolveAppealTx is ResolveAppeal's transaction; lost: an earlier attempt's
// outcome is unknown.
func (s *Store) resolveAppealTx(ctx context.Context, id int64, action string, admin int64, lost bool, row *appealRow) error {
	return s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := tx.NewSelect().Model(row).Where("id = ?", id).For("UPDATE").Scan(ctx); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("appeal %d: %w", id, ErrNotFound)
			}
			return fmt.Errorf("lock appeal: %w", err)
		}
		if row.State != domain.AppealOpen {
			if lost {
				var by sql.NullInt64
				var did sql.NullString
				if err := tx.QueryRowContext(ctx, "SELECT action, resolved_by FROM appeals WHERE id = ?", id).Scan(&did, &by); err != nil {
					return fmt.Errorf("read back appeal: %w", err)
				}
				if did.String == action && by.Int64 == admin {
					return nil
				}
			}
			return domain.Errorf(domain.EConflict, "the appeal is %s already", row.State)
		}
		var err error
		switch action {
		case domain.ActionUnblacklist:
			_, err = tx.ExecContext(ctx, "DELETE FROM blacklist WHERE user_id = ?", row.UserID)
		case domain.ActionExempt:
			err = setExempt(ctx, tx, row.UserID, true)
		}
		if err != nil {
			return fmt.Errorf("apply %s: %w", action, err)
		}
		row.State = domain.AppealResolved
		if action == domain.ActionReject {
			row.State = domain.AppealRejected
		}
		_, err = tx.ExecContext(ctx, "UPDATE appeals SET state = ?, open_user = NULL, action = ?, resolved_by = ?, resolved_at = ? WHERE id = ?",
			row.State, action, admin, time.Now().UTC(), id)
		return err
	})
}
