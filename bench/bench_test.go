package bench

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSummaryPercentiles(t *testing.T) {
	r := newRecorder()
	for i := 1; i <= 1000; i++ {
		r.record(time.Duration(i)*time.Millisecond, 202, nil)
	}
	r.record(time.Millisecond, 0, io.EOF)
	res := summarise("x", "closed", 1, 2*time.Second, []*recorder{r})
	require.EqualValues(t, 1001, res.Requests)
	require.EqualValues(t, 1, res.Errors)
	require.EqualValues(t, 1000, res.Count(202))
	require.InDelta(t, 500, res.P50MS, 2)
	require.InDelta(t, 990, res.P99MS, 2)
	require.InDelta(t, 999, res.P999MS, 2)
	require.InDelta(t, 500.5, res.RPS, 0.01)
}

func TestProxyForwardsBytesBothWays(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() { // echo server
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	p, err := StartProxy(ln.Addr().String(), 500*time.Microsecond)
	require.NoError(t, err)
	defer p.Close()

	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	payload := make([]byte, 1<<20)
	_, _ = rand.Read(payload)
	go func() { _, _ = c.Write(payload) }()
	got := make([]byte, len(payload))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.True(t, bytes.Equal(payload, got), "the proxy changed the bytes")
}

func TestDSNVia(t *testing.T) {
	dsn, err := DSNVia("root@tcp(127.0.0.1:13306)/seckill_test?parseTime=true", "127.0.0.1:4000")
	require.NoError(t, err)
	addr, err := parseDSN(dsn)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:4000", addr)
}
