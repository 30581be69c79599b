package api

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/wire"
)

// web is the storefront: static HTML, CSS and plain JavaScript, no build step.
//
//go:embed web
var web embed.FS

// devTokenTTL is how long a development login lasts.
const devTokenTTL = 12 * time.Hour

// storefrontCSP keeps the page to its own origin: no inline script, no
// third-party resource.
const storefrontCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// GET /: the storefront, a static page. Without ?sale= it lists the live
// and upcoming sales through GET /api/v1/sales; with ?sale=ID it is that
// sale's page. Serving it reads nothing: what it shows, it fetches.
func (s *server) storefront(c *fiber.Ctx) error {
	return s.sendWeb(c, "index.html")
}

// GET /web/{file}: the page's script and style sheet.
func (s *server) webAsset(c *fiber.Ctx) error {
	name := c.Params("file")
	if name == "index.html" || path.Base(name) != name {
		return sendError(c, domain.ENotFound, "no such resource")
	}
	return s.sendWeb(c, name)
}

func (s *server) sendWeb(c *fiber.Ctx, name string) error {
	return sendEmbedded(c, web, "web/"+name, storefrontCSP)
}

// sendEmbedded answers with an embedded file of a page (the storefront's,
// the console's): its type from its extension, csp on the page itself,
// and headers that keep it from being sniffed, cached stale or leaking
// its address; a file that is not there is 404 not_found.
func sendEmbedded(c *fiber.Ctx, files embed.FS, name, csp string) error {
	b, err := files.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return sendError(c, domain.ENotFound, "no such resource")
	}
	if err != nil {
		return fmt.Errorf("read embedded %s: %w", name, err)
	}
	switch path.Ext(name) {
	case ".html":
		c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
		c.Set("Content-Security-Policy", csp)
	case ".js":
		c.Set(fiber.HeaderContentType, "text/javascript; charset=utf-8")
	case ".css":
		c.Set(fiber.HeaderContentType, "text/css; charset=utf-8")
	default:
		c.Set(fiber.HeaderContentType, fiber.MIMEOctetStream)
	}
	// Small files: always revalidate so a new binary's page is seen at once.
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set("Referrer-Policy", "no-referrer")
	return c.Send(b)
}

type devLoginRequest struct {
	UserID *int64 `json:"user_id"`
}

// POST /dev/login (development mode only): a user token for anyone who
// asks, so the storefront can be tried by hand.
func (s *server) devLogin(c *fiber.Ctx) error {
	var req devLoginRequest
	if err := decodeBody(c, &req); err != nil {
		return sendErr(c, err)
	}
	if req.UserID == nil || *req.UserID <= 0 {
		return sendError(c, domain.EInvalid, "user_id must be a positive integer")
	}
	tok, err := authtoken.Mint(s.cfg.JWTSecret, *req.UserID, authtoken.RoleUser, devTokenTTL)
	if err != nil {
		return fmt.Errorf("mint development token: %w", err)
	}
	return c.JSON(wire.DevLogin{Token: tok, UserID: *req.UserID, ExpiresAt: time.Now().Add(devTokenTTL).UTC().Truncate(time.Second)})
}
