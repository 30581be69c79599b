package reservation

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"
	"time"
)

// Every instance of every release draws the same ticket for a user: the
// ticket is the definition's, under the lottery's purpose, which never
// changes while a fleet may mix releases.
func TestLotteryTicketsKeepTheirDefinition(t *testing.T) {
	tokenKey := []byte("fleet token key")
	l := NewLottery(tokenKey, time.Minute, time.Second, nil)
	derive := hmac.New(sha256.New, tokenKey)
	derive.Write([]byte("seckill opening lottery v1"))
	key := derive.Sum(nil)
	for _, pair := range [][2]int64{{1, 1}, {7, 123456789}, {1 << 40, 3}} {
		mac := hmac.New(sha256.New, key)
		fmt.Fprintf(mac, "%d|%d", pair[0], pair[1])
		want := float64(binary.BigEndian.Uint64(mac.Sum(nil)) >> 11)
		if got := l.Ticket(pair[0], pair[1]); got != want {
			t.Errorf("ticket of sale %d user %d: %v, want %v", pair[0], pair[1], got, want)
		}
	}
}
