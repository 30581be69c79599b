package keyedmac

import (
	"crypto/hmac"
	"crypto/sha256"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A pooled state, reused from many goroutines, makes the MAC hmac.New
// makes.
func TestPoolSumIsTheHMAC(t *testing.T) {
	key := Derive([]byte("fleet key"), "purpose v1")
	want := func(msg []byte) []byte {
		mac := hmac.New(sha256.New, key)
		mac.Write(msg)
		return mac.Sum(nil)
	}
	p := NewPool(key)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				msg := []byte{byte(g), byte(i)}
				require.Equal(t, want(msg), p.Sum(nil, msg))
			}
		})
	}
	wg.Wait()
	require.NotEqual(t, key, Derive([]byte("fleet key"), "purpose v2"), "another purpose, another key")
}
