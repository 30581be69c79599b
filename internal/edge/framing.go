package edge

import (
	"bytes"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/internal/ratelimit"
)

// KnownMethod is one of the methods a router knows; anything else is 501.
func KnownMethod(m []byte) bool {
	switch string(m) {
	case fasthttp.MethodGet, fasthttp.MethodHead, fasthttp.MethodPost, fasthttp.MethodPut, fasthttp.MethodDelete,
		fasthttp.MethodConnect, fasthttp.MethodOptions, fasthttp.MethodTrace, fasthttp.MethodPatch:
		return true
	}
	return false
}

// FramingProblem names a request whose length is ambiguous: Content-Length
// together with Transfer-Encoding, or a transfer coding other than chunked
// alone (fasthttp refuses duplicate lengths and unknown codings itself, but
// lets chunked win over a Content-Length and takes "identity"); "" when
// the framing is clear.
func FramingProblem(h *fasthttp.RequestHeader) string {
	raw := h.RawHeaders()
	if h.ContentLength() == -1 {
		if hasRawHeader(raw, "content-length") {
			return "Content-Length together with Transfer-Encoding"
		}
		return ""
	}
	if bytes.Contains(raw, []byte("ransfer-")) || bytes.Contains(raw, []byte("RANSFER-")) {
		if hasRawHeader(raw, "transfer-encoding") {
			return "unsupported transfer coding"
		}
	}
	return ""
}

// hasRawHeader reports whether the raw header block has a field named name
// (lower case).
func hasRawHeader(raw []byte, name string) bool {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if colon := bytes.IndexByte(line, ':'); colon == len(name) && bytes.EqualFold(line[:colon], []byte(name)) {
			return true
		}
	}
	return false
}

// Refusal is an answer decided on a request's headers, kept for when it is
// given: a failed body read resets the request, headers included.
type Refusal struct{ Code, Message string }

// Refusals are the refusals decided on headers, by request header, until
// answered.
type Refusals struct {
	pending sync.Map
	n       atomic.Int64
}

// Put keeps v for h's request.
func (r *Refusals) Put(h *fasthttp.RequestHeader, v Refusal) {
	if _, loaded := r.pending.Swap(h, v); !loaded {
		r.n.Add(1)
	}
}

// Take returns and forgets the refusal decided on h's headers.
func (r *Refusals) Take(h *fasthttp.RequestHeader) (Refusal, bool) {
	if r.n.Load() == 0 {
		return Refusal{}, false
	}
	v, ok := r.pending.LoadAndDelete(h)
	if !ok {
		return Refusal{}, false
	}
	r.n.Add(-1)
	return v.(Refusal), true
}

// ClientAddr is the socket peer, or, only when the peer is a trusted
// proxy, the rightmost address of the proxy header (read by header, only
// then) that is not a trusted proxy.
func ClientAddr(peer netip.Addr, header func() string, trusted []netip.Prefix) netip.Addr {
	peer = peer.Unmap()
	if len(trusted) == 0 || !ratelimit.InPrefixes(peer, trusted) {
		return peer
	}
	hdr := header()
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
		if !ratelimit.InPrefixes(addr, trusted) {
			return addr
		}
	}
	return addr
}
