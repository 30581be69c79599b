package sales

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/binary"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/keyedmac"
)

// A listing's cursor is opaque to clients: the listing it belongs to, its
// filter and order, and the last sale of the page it follows, signed with
// a key derived from the fleet's token key, so any instance reads any
// other's cursor and a changed byte is refused rather than read as another
// place in the listing.
const (
	cursorVersion = 1
	cursorBody    = 4 + 8 + 8 // version, listing, filter, order; opening; id
	cursorMAC     = 16        // truncated HMAC-SHA256
)

// The listings a cursor belongs to.
const (
	listingStorefront byte = 's'
	listingOperators  byte = 'o'
)

// position is what a cursor carries: where the next page starts.
type position struct {
	listing byte
	filter  filter
	asc     bool
	// startsAt is the last listed sale's opening in unix microseconds
	// (the storefront's order); id its id.
	startsAt int64
	id       int64
}

// errBadCursor is every cursor refused, whatever was wrong with it: the
// client has one thing to do, start again from the first page.
var errBadCursor = domain.Errorf(domain.EInvalid, "cursor must be a next_cursor this listing returned")

// cursors signs positions and reads them back.
type cursors struct {
	cur  *keyedmac.Pool
	prev *keyedmac.Pool // the token key's before a rotation (nil: none)
}

func newCursors(tokenKey, previous []byte) *cursors {
	c := &cursors{cur: keyedmac.NewPool(keyedmac.Derive(tokenKey, "seckill sale listing cursor v1"))}
	if len(previous) > 0 {
		c.prev = keyedmac.NewPool(keyedmac.Derive(previous, "seckill sale listing cursor v1"))
	}
	return c
}

// encode is p as a cursor.
func (c *cursors) encode(p position) string {
	b := make([]byte, cursorBody, cursorBody+32)
	b[0], b[1], b[2] = cursorVersion, p.listing, byte(p.filter)
	if p.asc {
		b[3] = 1
	}
	binary.BigEndian.PutUint64(b[4:], uint64(p.startsAt))
	binary.BigEndian.PutUint64(b[12:], uint64(p.id))
	b = c.cur.Sum(b, b[:cursorBody])[:cursorBody+cursorMAC]
	return base64.RawURLEncoding.EncodeToString(b)
}

// decode reads a cursor of listing, signed under the current token key
// or the one before it; anything else is errBadCursor.
func (c *cursors) decode(s string, listing byte) (position, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != cursorBody+cursorMAC || b[0] != cursorVersion || b[1] != listing || b[3] > 1 {
		return position{}, errBadCursor
	}
	body, mac := b[:cursorBody], b[cursorBody:]
	if !c.signed(c.cur, body, mac) && (c.prev == nil || !c.signed(c.prev, body, mac)) {
		return position{}, errBadCursor
	}
	p := position{listing: listing, filter: filter(b[2]), asc: b[3] == 1,
		startsAt: int64(binary.BigEndian.Uint64(b[4:])), id: int64(binary.BigEndian.Uint64(b[12:]))}
	if !p.filter.valid() || p.id <= 0 {
		return position{}, errBadCursor
	}
	return p, nil
}

func (c *cursors) signed(key *keyedmac.Pool, body, mac []byte) bool {
	var sum [32]byte
	return hmac.Equal(key.Sum(sum[:0], body)[:cursorMAC], mac)
}
