package netproxy

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestProxyForwardsBytesBothWays(t *testing.T) {
	ln := echoServer(t)
	p, err := Start(ln.Addr().String(), 500*time.Microsecond)
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

func TestCutRefusesAndRestores(t *testing.T) {
	ln := echoServer(t)
	p, err := Start(ln.Addr().String(), 0)
	require.NoError(t, err)
	defer p.Close()
	echo := func() error {
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 4)
		_, err = io.ReadFull(c, buf)
		return err
	}
	require.NoError(t, echo())
	p.SetCut(true)
	require.Error(t, echo(), "a cut proxy answers nothing")
	p.SetCut(false)
	require.NoError(t, echo())
}

// SetDelay slows a live connection (a slowed link) and 0 restores it.
func TestSetDelaySlowsAndRestores(t *testing.T) {
	ln := echoServer(t)
	p, err := Start(ln.Addr().String(), 0)
	require.NoError(t, err)
	defer p.Close()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	roundTrip := func() time.Duration {
		start := time.Now()
		_, err := c.Write([]byte("ping"))
		require.NoError(t, err)
		buf := make([]byte, 4)
		_, err = io.ReadFull(c, buf)
		require.NoError(t, err)
		return time.Since(start)
	}
	p.SetDelay(150 * time.Millisecond)
	require.GreaterOrEqual(t, roundTrip(), 300*time.Millisecond, "two delayed legs")
	p.SetDelay(0)
	require.Less(t, roundTrip(), 150*time.Millisecond)
}

func TestHeldKeepsBytesUntilTheLinkHeals(t *testing.T) {
	ln := echoServer(t)
	p, err := Start(ln.Addr().String(), 0)
	require.NoError(t, err)
	defer p.Close()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	require.NoError(t, err)
	defer c.Close()

	p.SetHeld(true)
	_, err = c.Write([]byte("ping"))
	require.NoError(t, err, "a held link accepts bytes")
	require.NoError(t, c.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	_, err = c.Read(make([]byte, 4))
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "nothing comes back while held: %v", err)

	p.SetHeld(false)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	got := make([]byte, 4)
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.Equal(t, "ping", string(got), "the held bytes arrive once the link heals")
}

// echoServer listens on loopback and echoes every connection's bytes back
// until the test ends.
func echoServer(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln
}
