package keyedmac

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The pooled HMACs draw what the definition says, however often and from
// however many goroutines they are reused: a fleet's instances must agree
// on every user's ticket.
func TestTicketsMatchTheirDefinition(t *testing.T) {
	tokenKey := []byte("fleet token key")
	want := func(a, b int64) uint64 {
		derive := hmac.New(sha256.New, tokenKey)
		derive.Write([]byte("purpose v1"))
		mac := hmac.New(sha256.New, derive.Sum(nil))
		fmt.Fprintf(mac, "%d|%d", a, b)
		return binary.BigEndian.Uint64(mac.Sum(nil)) >> 11
	}
	tk := NewTickets(tokenKey, "purpose v1")
	var wg sync.WaitGroup
	for g := range int64(4) {
		wg.Go(func() {
			for i := range int64(200) {
				a, b := g*1000+i, -i
				require.Equal(t, want(a, b), tk.Draw(a, b), "draw(%d, %d)", a, b)
			}
		})
	}
	wg.Wait()
	require.NotEqual(t, tk.Draw(1, 2), NewTickets(tokenKey, "purpose v2").Draw(1, 2), "another purpose draws other tickets")
}
