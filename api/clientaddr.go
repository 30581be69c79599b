package api

import (
	"net/netip"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/internal/edge"
	"github.com/seckill/seckill/internal/ratelimit"
)

// clientAddr is the request's client: the socket peer, or the address the
// trusted proxies in front of it name (edge.ClientAddr).
func (s *server) clientAddr(c *fiber.Ctx) netip.Addr {
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	return edge.ClientAddr(peer, func() string { return c.Get(s.cfg.ProxyHeader) }, s.cfg.TrustedProxies)
}

// addrAllowed takes a token from the client address's bucket in b;
// trusted addresses are exempt.
func (s *server) addrAllowed(c *fiber.Ctx, b *ratelimit.Keyed[netip.Addr], now time.Time) bool {
	addr := s.clientAddr(c)
	return ratelimit.InPrefixes(addr, s.cfg.TrustedAddrs) || b.Allow(ratelimit.AddrBucket(addr), now)
}
