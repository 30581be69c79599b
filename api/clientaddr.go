package api

import (
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/internal/ratelimit"
)

// clientAddr is the socket peer, or, only when the peer is a trusted proxy,
// the rightmost address of the proxy header that is not a trusted proxy.
func (s *server) clientAddr(c *fiber.Ctx) netip.Addr {
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	peer = peer.Unmap()
	if len(s.cfg.TrustedProxies) == 0 || !ratelimit.InPrefixes(peer, s.cfg.TrustedProxies) {
		return peer
	}
	hdr := c.Get(s.cfg.ProxyHeader)
	addr := peer
	for hdr != "" {
		var part string
		if i := strings.LastIndexByte(hdr, ','); i >= 0 {
			part, hdr = hdr[i+1:], hdr[:i]
		} else {
			part, hdr = hdr, ""
		}
		a, err := netip.ParseAddr(strings.TrimSpace(part))
		if err != nil {
			// A garbled hop: trust nothing left of it.
			return addr
		}
		addr = a.Unmap()
		if !ratelimit.InPrefixes(addr, s.cfg.TrustedProxies) {
			return addr
		}
	}
	return addr
}
