package api

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/wire"
)

// auditSummaryBody is how much of a request's body the audit keeps: enough
// to read a delta or a sale's title, not an allowlist of 100,000 ids.
const auditSummaryBody = 256

// auditSaleKey is the Locals key of the sale a write created, for a write
// whose path names none.
type auditSaleKey struct{}

// audited records each write h answers with success in the admin audit,
// with the operator who made it, and logs it with the operator. The writes
// span the database and Redis, so the record follows the write rather than
// joining its transaction; a record that fails is logged and the write
// still answers its success (it committed: an error would invite a retry).
// A repeat answered from its Idempotency-Key never reaches h and records
// nothing.
func (s *server) audited(action string, h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if err := h(c); err != nil {
			return err
		}
		status := c.Response().StatusCode()
		if status < 200 || status >= 300 {
			return nil
		}
		p := principal(c)
		w := wire.AdminWrite{Operator: p.Subject, Action: action, Summary: auditSummary(c), Status: status,
			RequestID: reqid.From(c.UserContext())}
		if id, ok := auditSale(c); ok {
			w.SaleID = &id
		}
		log := s.log(c)
		if err := s.svc.Records.Record(c.UserContext(), w); err != nil {
			log.Error("admin audit: record", "action", action, "err", err)
		}
		attrs := []any{"action", action, "status", status}
		if w.SaleID != nil {
			attrs = append(attrs, "sale_id", *w.SaleID)
		}
		log.Info("admin write", attrs...)
		return nil
	}
}

// auditSale is the sale a write acted on: its path's, or the one it created.
func auditSale(c *fiber.Ctx) (int64, bool) {
	if id, ok := domain.ParseID(c.Params("sale_id")); ok {
		return id, true
	}
	id, ok := c.Locals(auditSaleKey{}).(int64)
	return id, ok
}

// auditSummary is the request as the audit keeps it: its method, path and
// the start of its body.
func auditSummary(c *fiber.Ctx) string {
	summary := c.Method() + " " + c.Path()
	if body := c.Body(); len(body) > 0 {
		if len(body) > auditSummaryBody {
			return summary + " " + string(body[:auditSummaryBody]) + "…"
		}
		summary += " " + string(body)
	}
	return summary
}

// operatorScope owns an operator's Idempotency-Keys: the user id of a
// shared-secret token (as before operators had subjects), else a negative
// number hashed from the identity provider's subject, which no user id
// equals.
func operatorScope(p auth.Principal) int64 {
	if p.UserID > 0 {
		return p.UserID
	}
	sum := sha256.Sum256([]byte(p.Subject))
	return -int64(binary.BigEndian.Uint64(sum[:8])>>1) - 1
}

// GET /admin/v1/audit?sale_id=&limit=: the admin writes that succeeded,
// newest first (of one sale when sale_id is given), at most limit
// (1..listLimit, default listLimit).
func (s *server) listAudit(c *fiber.Ctx) error {
	saleID, err := optionalSaleID(c)
	if err != nil {
		return sendErr(c, err)
	}
	limit := listLimit
	if raw := c.Query("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > listLimit {
			return sendError(c, domain.EInvalid, "limit: 1..100")
		}
		limit = n
	}
	ws, err := s.svc.Records.Audit(c.UserContext(), saleID, limit)
	if err != nil {
		return sendErr(c, err)
	}
	return c.JSON(wire.AuditList{Entries: ws})
}
