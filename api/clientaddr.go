package api

import (
	"net/netip"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/internal/edge"
)

// clientAddr is the request's client: the socket peer, or the address the
// trusted proxies in front of it name (edge.ClientAddr).
func (s *server) clientAddr(c *fiber.Ctx) netip.Addr {
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	if len(s.cfg.TrustedProxies) == 0 {
		return peer.Unmap()
	}
	return edge.ClientAddr(peer, c.Get(s.cfg.ProxyHeader), s.cfg.TrustedProxies)
}
