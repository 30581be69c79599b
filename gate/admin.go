package gate

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"unicode/utf8"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/store"
)

// AllowlistResult is the answer to an allowlist change.
type AllowlistResult struct {
	SaleID     int64 `json:"sale_id"`
	Restricted bool  `json:"restricted"`
	Listed     int64 `json:"listed"`
}

// AllowlistChange is an operator's change of a sale's allowlist: users
// to add and to remove, and the restriction to set (nil leaves it, except
// that a sale's first add restricts it).
type AllowlistChange struct {
	Add, Remove []int64
	Restricted  *bool
}

// UpdateAllowlist checks and applies an operator's allowlist change.
func (s *Service) UpdateAllowlist(ctx context.Context, saleID int64, change AllowlistChange) (AllowlistResult, error) {
	if n := len(change.Add) + len(change.Remove); n > MaxAllowlistIDs {
		return AllowlistResult{}, domain.Errorf(domain.EInvalid, "add and remove together hold %d ids; at most %d in one call", n, MaxAllowlistIDs)
	}
	for _, ids := range [][]int64{change.Add, change.Remove} {
		for _, id := range ids {
			if id <= 0 {
				return AllowlistResult{}, domain.Errorf(domain.EInvalid, "user ids must be positive integers (got %d)", id)
			}
		}
	}
	restricted, listed, err := s.store.UpdateAllowlist(ctx, saleID,
		store.AllowlistChange{Add: change.Add, Remove: change.Remove, Restricted: change.Restricted})
	if err != nil {
		return AllowlistResult{}, notFound(err, "no such sale")
	}
	return AllowlistResult{SaleID: saleID, Restricted: restricted, Listed: listed}, nil
}

// notFound turns the store's ErrNotFound into the contract's not_found.
func notFound(err error, msg string) error {
	if errors.Is(err, store.ErrNotFound) {
		return domain.Errorf(domain.ENotFound, "%s", msg)
	}
	return err
}

// SetExempt exempts a user from challenges (or ends it), at once on this
// instance and within a refresh on the others.
func (s *Service) SetExempt(ctx context.Context, userID int64, on bool) error {
	if err := s.store.SetExempt(ctx, userID, on); err != nil {
		return err
	}
	s.lists.setExempt(userID, on)
	return nil
}

// FileAppeal checks and records a user's appeal.
func (s *Service) FileAppeal(ctx context.Context, a *domain.Appeal) error {
	switch a.Reason {
	case domain.AppealBlacklisted, domain.AppealChallenge, domain.AppealRateLimited:
	default:
		return domain.Errorf(domain.EInvalid, "reason must be blacklisted, challenge or rate_limited")
	}
	if n := utf8.RuneCountInString(a.Message); n < 1 || n > MaxAppealRunes || !utf8.ValidString(a.Message) {
		return domain.Errorf(domain.EInvalid, "message must be 1 to %d characters", MaxAppealRunes)
	}
	if a.SaleID <= 0 {
		return domain.Errorf(domain.EInvalid, "sale_id must be a positive integer")
	}
	if _, err := s.store.GetSale(ctx, a.SaleID); err != nil {
		return notFound(err, "no such sale")
	}
	return s.store.FileAppeal(ctx, a)
}

// AppealPage is one page of appeals; NextCursor is "" after the last.
type AppealPage struct {
	Appeals    []domain.Appeal `json:"appeals"`
	NextCursor string          `json:"next_cursor"`
}

// ListAppeals lists appeals in state (open by default) after cursor.
func (s *Service) ListAppeals(ctx context.Context, state, cursor string) (AppealPage, error) {
	switch state {
	case "":
		state = domain.AppealOpen
	case domain.AppealOpen, domain.AppealResolved, domain.AppealRejected:
	default:
		return AppealPage{}, domain.Errorf(domain.EInvalid, "state must be open, resolved or rejected")
	}
	var after int64
	if cursor != "" {
		var err error
		if after, err = strconv.ParseInt(cursor, 10, 64); err != nil || after < 0 {
			return AppealPage{}, domain.Errorf(domain.EInvalid, "cursor must be a next_cursor this call returned")
		}
	}
	list, err := s.store.ListAppeals(ctx, state, after, AppealsPageSize)
	if err != nil {
		return AppealPage{}, err
	}
	page := AppealPage{Appeals: list}
	if len(list) == AppealsPageSize {
		page.NextCursor = strconv.FormatInt(list[len(list)-1].ID, 10)
	}
	return page, nil
}

// ResolveAppeal closes an open appeal with action, by admin; the action
// takes effect in the same transaction. onUnblacklist applies an
// unblacklisting to the caller's in-process blacklist at once.
func (s *Service) ResolveAppeal(ctx context.Context, id int64, action string, admin int64, logger *slog.Logger, onUnblacklist func(int64)) (domain.Appeal, error) {
	switch action {
	case domain.ActionUnblacklist, domain.ActionExempt, domain.ActionReject:
	default:
		return domain.Appeal{}, domain.Errorf(domain.EInvalid, "action must be unblacklist, exempt or reject")
	}
	a, err := s.store.ResolveAppeal(ctx, id, action, admin)
	if err != nil {
		return domain.Appeal{}, notFound(err, "no such appeal")
	}
	switch action {
	case domain.ActionUnblacklist:
		onUnblacklist(a.UserID)
	case domain.ActionExempt:
		s.lists.setExempt(a.UserID, true)
	}
	logger.Info("appeal resolved", "appeal_id", a.ID, "user_id", a.UserID, "sale_id", a.SaleID, "action", action, "admin_id", admin)
	return a, nil
}
