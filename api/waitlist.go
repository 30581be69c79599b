package api

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/salecache"
)

// The waitlist: users wait in Redis (lua/waitlist.go) for units returned
// after a sale sold out; every API instance offers those units to the
// waitlist's head once a second (handOver), each one a Redis hold exactly
// like a 202's, recorded in MySQL at once and started by the relay.

// waitlistBatch is how many waiters one hand-over offers units to.
const waitlistBatch = 32

type waitlistPosition struct {
	SaleID   int64 `json:"sale_id"`
	Position int64 `json:"position"`
}

// POST /api/v1/sales/{sale_id}/waitlist
func (s *server) joinWaitlist(c *fiber.Ctx) error {
	e, err := s.waitlistSale(c)
	if err != nil {
		return s.gateFailed(c, "waitlist: sale", err)
	}
	sale, user := e.Sale(), principal(c).UserID
	if err := s.mayWait(c.UserContext(), sale, user, time.Now()); err != nil {
		return s.gateFailed(c, "waitlist: gate", err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	if !e.OnRedis(sale.ModeEpoch) {
		// Redis's buyer marks lag the database path: ask the database.
		holds, err := s.st.HoldsAnotherLive(ctx, sale.ID, user, "")
		if err != nil {
			return s.waitlistFailed(c, "waitlist: live reservations", err)
		}
		if holds {
			return sendErr(c, domain.ErrAlreadyHolds)
		}
	}
	pos, err := s.rdb.JoinWaitlist(ctx, sale.ID, user)
	if errors.Is(err, lua.ErrHoldsUnit) {
		return sendErr(c, domain.ErrAlreadyHolds)
	}
	if err != nil {
		return s.waitlistFailed(c, "waitlist: join", err)
	}
	return c.JSON(waitlistPosition{SaleID: sale.ID, Position: pos})
}

// mayWait refuses a user the waitlist of a sale they could not buy in.
func (s *server) mayWait(ctx context.Context, sale *domain.Sale, user int64, now time.Time) error {
	switch {
	case sale.Control == domain.ControlStopped || now.After(sale.EndsAt.Add(timeSlack)):
		return domain.ErrSaleEnded
	case now.Before(sale.StartsAt.Add(-timeSlack)):
		return domain.ErrSaleNotStarted
	case s.cache.Blacklisted(user):
		return domain.Errorf(domain.EBlacklisted, "this user may not buy")
	}
	eligible, err := s.gate.Eligible(ctx, sale, user)
	if err != nil {
		return err
	}
	if !eligible {
		return domain.Errorf(domain.ENotEligible, "this sale is restricted to listed users")
	}
	return nil
}

// GET /api/v1/sales/{sale_id}/waitlist
func (s *server) getWaitlistPosition(c *fiber.Ctx) error {
	e, err := s.waitlistSale(c)
	if err != nil {
		return s.gateFailed(c, "waitlist: sale", err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	saleID := e.Sale().ID
	pos, err := s.rdb.WaitlistPosition(ctx, saleID, principal(c).UserID)
	if err != nil {
		return s.waitlistFailed(c, "waitlist: position", err)
	}
	if pos == 0 {
		return sendError(c, domain.ENotFound, "not on the waitlist")
	}
	return c.JSON(waitlistPosition{SaleID: saleID, Position: pos})
}

// DELETE /api/v1/sales/{sale_id}/waitlist
func (s *server) leaveWaitlist(c *fiber.Ctx) error {
	e, err := s.waitlistSale(c)
	if err != nil {
		return s.gateFailed(c, "waitlist: sale", err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	if err := s.rdb.LeaveWaitlist(ctx, e.Sale().ID, principal(c).UserID); err != nil {
		return s.waitlistFailed(c, "waitlist: leave", err)
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// waitlistSale is the cached sale of the path (404 when unknown).
func (s *server) waitlistSale(c *fiber.Ctx) (*salecache.Entry, error) {
	id, err := saleIDParam(c, "sale_id")
	if err != nil {
		return nil, err
	}
	return s.cache.Get(c.UserContext(), id)
}

// waitlistFailed answers a Redis or database failure: 503, retry.
func (s *server) waitlistFailed(c *fiber.Ctx, what string, err error) error {
	s.log(c).Warn(what, "err", err)
	return unavailable(c, 1, "waitlist unavailable; retry")
}

// handOverAll offers units in stock to the waitlists of the cached sales
// that sell on Redis and have someone waiting.
func (s *server) handOverAll(ctx context.Context, now time.Time) {
	waiting := s.cache.EntriesWaiting()
	if len(waiting) == 0 || !s.holds.Ready(ctx) {
		return // nothing to hand over, or its record could not follow
	}
	for _, e := range waiting {
		sale := e.Sale()
		if sale.Control != domain.ControlActive || now.Before(sale.StartsAt) || !now.Before(sale.EndsAt) || !e.OnRedis(sale.ModeEpoch) {
			continue
		}
		if err := s.handOver(ctx, sale); err != nil && ctx.Err() == nil {
			s.logger.Warn("waitlist hand-over", "sale_id", sale.ID, "err", err)
		}
	}
}

// handOver runs one hand-over of a sale: its waitlist's head is offered
// the units in stock (handover.lua); each unit handed over is recorded in
// MySQL as a Redis hold at once, so the database path's quota counts it
// (handOverAll hands nothing over while this instance's inserts fail).
func (s *server) handOver(ctx context.Context, sale *domain.Sale) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	head, err := s.rdb.WaitlistHead(ctx, sale.ID, waitlistBatch)
	if err != nil || len(head) == 0 {
		return err
	}
	cands := make([]lua.HandOverCandidate, len(head))
	for i, w := range head {
		req := domain.WaitlistRequestID(w.Joined)
		skip := s.cache.Blacklisted(w.UserID)
		if !skip {
			eligible, err := s.gate.Eligible(ctx, sale, w.UserID)
			if err != nil {
				return err
			}
			skip = !eligible
		}
		cands[i] = lua.HandOverCandidate{UserID: w.UserID, RequestID: req, Token: domain.DeriveToken(s.cfg.TokenKey, sale.ID, w.UserID, req), Skip: skip}
	}
	handed, err := s.rdb.HandOver(ctx, sale.ID, sale.ModeEpoch, cands)
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range handed {
		in := domain.RedisHoldInput(h.Token, sale.ID, h.UserID, h.RequestID)
		s.m.handOvers.Inc()
		s.logger.InfoContext(ctx, "waitlist hand-over", "sale_id", sale.ID, "user_id", h.UserID, "token", h.Token)
		if err := s.holds.Record(ctx, in, sale.ModeEpoch); err != nil {
			errs = append(errs, err) // the relay records it from the inbox
		}
		if s.cfg.APIStartsRedisOrders {
			s.starter.Enqueue(ctx, in)
		}
	}
	return errors.Join(errs...)
}
