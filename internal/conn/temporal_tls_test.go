package conn_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// mustMTLSFront serves TLS requiring a client certificate ca signed and
// forwards the bytes to the test Temporal: a Temporal with mTLS.
func mustMTLSFront(t *testing.T, ca *testCA) string {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, x509.ExtKeyUsageServerAuth)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: roots,
		ClientAuth: tls.RequireAndVerifyClientCert, NextProtos: []string{"h2"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return
				}
				up, err := net.DialTimeout("tcp", testenv.TemporalAddress(), 5*time.Second)
				if err != nil {
					return
				}
				defer func() { _ = up.Close() }()
				go func() { _, _ = io.Copy(up, c) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

// The temporal CLI's TLS variables (read by the SDK's envconfig) reach a
// Temporal requiring mTLS; another CA or no client certificate does not.
func TestTemporalMTLSThroughEnvconfig(t *testing.T) {
	testenv.MustTemporal(t)
	ca := newTestCA(t)
	dir := t.TempDir()
	clientCert, clientKey := ca.issue(t, x509.ExtKeyUsageClientAuth)
	certFile, keyFile := writeFile(t, dir, "client.pem", clientCert), writeFile(t, dir, "client.key", clientKey)
	caFile := writeFile(t, dir, "ca.pem", ca.pem)
	t.Setenv("TEMPORAL_CONFIG_FILE", writeFile(t, dir, "none.toml", nil))
	cfg := testenv.Config(t)
	cfg.TemporalAddress = mustMTLSFront(t, ca)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	dial := func() error {
		c, err := conn.Temporal(t.Context(), cfg, logger, 5*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}

	t.Setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", certFile)
	t.Setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", keyFile)
	t.Setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", caFile)
	t.Setenv("TEMPORAL_TLS_SERVER_NAME", "127.0.0.1")
	require.NoError(t, dial())

	t.Setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", writeFile(t, dir, "other.pem", newTestCA(t).pem))
	require.Error(t, dial(), "a server signed by another CA")

	t.Setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", caFile)
	t.Setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", "")
	t.Setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", "")
	t.Setenv("TEMPORAL_TLS", "true")
	require.Error(t, dial(), "no client certificate")
}

// TEMPORAL_API_KEY implies TLS, as Temporal Cloud needs.
func TestTemporalAPIKeyImpliesTLS(t *testing.T) {
	t.Setenv("TEMPORAL_CONFIG_FILE", writeFile(t, t.TempDir(), "none.toml", nil))
	t.Setenv("TEMPORAL_API_KEY", "k")
	opts, err := conn.TemporalOptions(testenv.Config(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.NotNil(t, opts.ConnectionOptions.TLS)
	require.NotNil(t, opts.Credentials)
}
