package api

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/gate"
	"github.com/seckill/seckill/wire"
)

// The gate's calls (contract 1.2): challenges and passes, appeals, and the
// operators' allowlists, exemptions and appeal resolutions. Each decodes,
// calls the gate service once and encodes.

// gateFailed answers a gate call's error: the contract's own codes as
// they are, anything else (the database) 503 after a log line.
func (s *server) gateFailed(c *fiber.Ctx, what string, err error) error {
	var de *domain.Error
	if errors.As(err, &de) {
		return sendErr(c, err)
	}
	s.log(c).Error(what, "err", err)
	return unavailable(c, 1, "database unavailable; retry")
}

// gateSale is the sale of the path from the cache (404 when unknown).
func (s *server) gateSale(c *fiber.Ctx) (*domain.Sale, error) {
	e, err := s.cachedSale(c)
	if err != nil {
		return nil, err
	}
	return e.Sale(), nil
}

// GET /api/v1/sales/{sale_id}/challenge
func (s *server) getChallenge(c *fiber.Ctx) error {
	sale, err := s.gateSale(c)
	if err != nil {
		return s.gateFailed(c, "challenge: sale", err)
	}
	ch, err := s.svc.Gate.Challenge(sale, principal(c).UserID, time.Now())
	if err != nil {
		return s.gateFailed(c, "challenge", err)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(ch)
}

type solutionRequest struct {
	Payload *string `json:"payload"`
}

// POST /api/v1/sales/{sale_id}/challenge
func (s *server) redeemChallenge(c *fiber.Ctx) error {
	var req solutionRequest
	if err := decodeBody(c, &req); err != nil {
		return sendErr(c, err)
	}
	if req.Payload == nil || *req.Payload == "" {
		return sendError(c, domain.EInvalid, "payload is required")
	}
	sale, err := s.gateSale(c)
	if err != nil {
		return s.gateFailed(c, "challenge: sale", err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	pass, err := s.svc.Gate.Redeem(ctx, sale, principal(c).UserID, *req.Payload, time.Now())
	if err != nil {
		return s.gateFailed(c, "challenge: redeem", err)
	}
	return c.JSON(pass)
}

type appealRequest struct {
	SaleID  *int64  `json:"sale_id"`
	Reason  *string `json:"reason"`
	Message *string `json:"message"`
}

// POST /api/v1/appeals
func (s *server) fileAppeal(c *fiber.Ctx) error {
	var req appealRequest
	if err := decodeBody(c, &req); err != nil {
		return sendErr(c, err)
	}
	if req.SaleID == nil || req.Reason == nil || req.Message == nil {
		return sendError(c, domain.EInvalid, "sale_id, reason and message are required")
	}
	a := domain.Appeal{UserID: principal(c).UserID, SaleID: *req.SaleID, Reason: *req.Reason, Message: *req.Message}
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	if err := s.svc.Gate.FileAppeal(ctx, &a); err != nil {
		return s.gateFailed(c, "appeal", err)
	}
	return c.Status(fiber.StatusCreated).JSON(wire.AppealFiled{AppealID: a.ID, State: a.State})
}

type allowlistRequest struct {
	Add        []int64 `json:"add"`
	Remove     []int64 `json:"remove"`
	Restricted *bool   `json:"restricted"`
}

// POST /admin/v1/sales/{sale_id}/allowlist
func (s *server) updateAllowlist(c *fiber.Ctx) error {
	id, err := saleIDParam(c, "sale_id")
	if err != nil {
		return sendErr(c, err)
	}
	var req allowlistRequest
	if err := decodeBody(c, &req); err != nil {
		return sendErr(c, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), 4*adminTimeout)
	defer cancel()
	res, err := s.svc.Gate.UpdateAllowlist(ctx, id, gate.AllowlistChange{Add: req.Add, Remove: req.Remove, Restricted: req.Restricted})
	if err != nil {
		return s.gateFailed(c, "allowlist", err)
	}
	s.svc.Operator.Recache(ctx, id)
	s.log(c).Info("allowlist changed", "sale_id", id, "added", len(req.Add), "removed", len(req.Remove),
		"restricted", res.Restricted, "listed", res.Listed, "admin_id", principal(c).UserID)
	return c.JSON(res)
}

// PUT|DELETE /admin/v1/challenge-exemptions/{user_id}
func (s *server) exempt(on bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		uid, ok := domain.ParseID(c.Params("user_id"))
		if !ok {
			return sendError(c, domain.ENotFound, "no such user")
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
		defer cancel()
		if err := s.svc.Gate.SetExempt(ctx, uid, on); err != nil {
			return s.gateFailed(c, "challenge exemption", err)
		}
		s.log(c).Info("challenge exemption", "user_id", uid, "exempt", on, "admin_id", principal(c).UserID)
		return c.SendStatus(fiber.StatusNoContent)
	}
}

// GET /admin/v1/appeals?state=open&cursor=
func (s *server) listAppeals(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	page, err := s.svc.Gate.ListAppeals(ctx, c.Query("state"), c.Query("cursor"))
	if err != nil {
		return s.gateFailed(c, "list appeals", err)
	}
	return c.JSON(page)
}

type resolveRequest struct {
	Action *string `json:"action"`
}

// POST /admin/v1/appeals/{appeal_id}/resolve
func (s *server) resolveAppeal(c *fiber.Ctx) error {
	id, ok := domain.ParseID(c.Params("appeal_id"))
	if !ok {
		return sendError(c, domain.ENotFound, "no such appeal")
	}
	var req resolveRequest
	if err := decodeBody(c, &req); err != nil {
		return sendErr(c, err)
	}
	if req.Action == nil {
		return sendError(c, domain.EInvalid, "action is required")
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	a, err := s.svc.Gate.ResolveAppeal(ctx, id, *req.Action, principal(c).UserID, s.log(c),
		func(uid int64) { s.svc.Cache.SetBlacklisted(uid, false) })
	if err != nil {
		return s.gateFailed(c, "resolve appeal", err)
	}
	return c.JSON(a)
}
