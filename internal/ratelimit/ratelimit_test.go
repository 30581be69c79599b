package ratelimit

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Addresses of one IPv6 /64 share a bucket; IPv4 addresses and other /64s
// do not.
func TestAddressBucketsAreIPv6Slash64s(t *testing.T) {
	k := NewKeyed(1, 2, 1<<10, time.Minute, HashAddr)
	now := time.Now()
	allow := func(s string) bool { return k.Allow(AddrBucket(netip.MustParseAddr(s)), now) }
	require.True(t, allow("2001:db8:1:2::1"))
	require.True(t, allow("2001:db8:1:2::ffff"))
	require.False(t, allow("2001:db8:1:2:abcd::9"), "a third address of the same /64 shares its bucket")
	require.True(t, allow("2001:db8:1:3::1"), "another /64")
	require.True(t, allow("192.0.2.1"))
	require.True(t, allow("192.0.2.2"))
	require.True(t, allow("::ffff:192.0.2.3"), "an IPv4-mapped address is its IPv4 address")
}

// A flood of new keys fills the table; a newcomer still gets a bucket of
// its own (before, every new key past the table's size shared one bucket,
// which the flood kept empty: every new client got 429).
func TestAFullTableGivesANewcomerItsOwnBucket(t *testing.T) {
	k := NewKeyed(1, 1, 32*4, time.Hour, HashAddr)
	now := time.Now()
	for i := range 5000 {
		k.Allow(AddrBucket(netip.MustParseAddr(fmt.Sprintf("10.%d.%d.1", i/256, i%256))), now)
	}
	for i := range k.shards {
		require.LessOrEqual(t, len(k.shards[i].m), 4, "the table stays bounded")
	}
	require.True(t, k.Allow(netip.MustParseAddr("198.51.100.7"), now), "a newcomer after the flood")
}
