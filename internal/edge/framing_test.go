package edge

import (
	"bufio"
	"net/netip"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func header(t *testing.T, raw string) *fasthttp.RequestHeader {
	t.Helper()
	var h fasthttp.RequestHeader
	if err := h.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatalf("read %q: %v", raw, err)
	}
	return &h
}

func TestFramingProblem(t *testing.T) {
	cases := map[string]bool{ // request head → ambiguous
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n":                                false,
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n":                       false,
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n":  true,
		"POST / HTTP/1.1\r\nHost: x\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n":  true,
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: identity\r\n\r\n": true,
		"GET / HTTP/1.1\r\nHost: x\r\nX-Transfer-Note: a\r\n\r\n":                                false,
	}
	for raw, ambiguous := range cases {
		if got := FramingProblem(header(t, raw)) != ""; got != ambiguous {
			t.Errorf("%q: ambiguous %v, want %v", raw, got, ambiguous)
		}
	}
	if !KnownMethod([]byte("PATCH")) || KnownMethod([]byte("BREW")) {
		t.Error("KnownMethod")
	}
}

func TestRefusalsAreTakenOnce(t *testing.T) {
	var r Refusals
	a, b := &fasthttp.RequestHeader{}, &fasthttp.RequestHeader{}
	r.Put(a, Refusal{Code: "invalid_request", Message: "m"})
	if _, ok := r.Take(b); ok {
		t.Fatal("another request's refusal was taken")
	}
	if got, ok := r.Take(a); !ok || got.Code != "invalid_request" {
		t.Fatalf("take: %+v %v", got, ok)
	}
	if _, ok := r.Take(a); ok {
		t.Fatal("a refusal was taken twice")
	}
}

func TestClientAddrTrustsOnlyTheProxies(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	proxy, client := netip.MustParseAddr("10.1.1.1"), netip.MustParseAddr("203.0.113.9")
	cases := []struct {
		peer netip.Addr
		hdr  string
		want string
	}{
		{client, "198.51.100.1", "203.0.113.9"},                                       // not a proxy: its header is not read
		{proxy, "198.51.100.1, 203.0.113.9", "203.0.113.9"},                           // the rightmost untrusted hop
		{proxy, "203.0.113.9, 10.2.2.2", "203.0.113.9"},                               // past a second proxy
		{proxy, "198.51.100.1, garbage, 10.2.2.2", "10.2.2.2"},                        // nothing left of a garbled hop
		{proxy, "", "10.1.1.1"},                                                       // no header: the proxy itself
		{netip.MustParseAddr("::ffff:10.1.1.1"), "::ffff:203.0.113.9", "203.0.113.9"}, // mapped forms
	}
	for _, c := range cases {
		read := false
		got := ClientAddr(c.peer, func() string { read = true; return c.hdr }, proxies)
		if got.String() != c.want {
			t.Errorf("peer %s header %q: %s, want %s", c.peer, c.hdr, got, c.want)
		}
		if read != (c.peer.Unmap() != client) {
			t.Errorf("peer %s: header read %v", c.peer, read)
		}
	}
	if got := ClientAddr(proxy, func() string { return "203.0.113.9" }, nil); got != proxy {
		t.Errorf("no trusted proxies: %s", got)
	}
}
