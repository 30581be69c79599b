package conn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "seckill test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns the PEM certificate and key of a leaf for 127.0.0.1.
func (ca *testCA) issue(t *testing.T, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

// mustTLSRedis starts a redis-server serving TLS only, whose one enabled
// user is app/s3cret, and returns its address and the CA file's path.
func mustTLSRedis(t *testing.T) (addr, caFile string) {
	t.Helper()
	dir := t.TempDir()
	ca := newTestCA(t)
	certPEM, keyPEM := ca.issue(t, x509.ExtKeyUsageServerAuth)
	caFile = writeFile(t, dir, "ca.pem", ca.pem)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	conf := "bind 127.0.0.1\nport 0\ntls-port " + fmt.Sprint(port) + "\n" +
		"tls-cert-file " + writeFile(t, dir, "server.pem", certPEM) + "\n" +
		"tls-key-file " + writeFile(t, dir, "server.key", keyPEM) + "\n" +
		"tls-ca-cert-file " + caFile + "\ntls-auth-clients no\n" +
		"save \"\"\nappendonly no\ndir " + dir + "\nlogfile " + filepath.Join(dir, "redis.log") + "\n" +
		"user default off\nuser app on >s3cret ~* &* +@all\n"
	cmd := exec.Command("redis-server", writeFile(t, dir, "redis.conf", []byte(conf)))
	require.NoError(t, cmd.Start(), "redis-server (scripts/redis.sh installs it)")
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr = net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return addr, caFile
		}
		if time.Now().After(deadline) {
			raw, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("TLS redis-server did not listen on %s: %v\n%s", addr, err, raw)
		}
	}
}

func redisConfig(t *testing.T, url, caFile string) *config.Config {
	t.Helper()
	t.Setenv("SECKILL_ENV", "dev")
	t.Setenv("REDIS_URL", url)
	t.Setenv("REDIS_CA_FILE", caFile)
	cfg, err := config.Load()
	require.NoError(t, err)
	return cfg
}

func pingRedis(t *testing.T, cfg *config.Config) error {
	t.Helper()
	rdb, err := conn.Redis(cfg)
	require.NoError(t, err)
	defer func() { _ = rdb.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

// REDIS_URL with rediss://, an ACL user and REDIS_CA_FILE reaches a TLS
// Redis, the aside heartbeat client too; a wrong CA, a wrong password or
// plain redis:// does not.
func TestRedisURLWithTLSAndACLUser(t *testing.T) {
	addr, caFile := mustTLSRedis(t)
	cfg := redisConfig(t, "rediss://app:s3cret@"+addr, caFile)
	rdb, err := conn.Redis(cfg)
	require.NoError(t, err)
	client := redisgateway.NewClient(rdb)
	t.Cleanup(func() { _ = client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	who, err := rdb.Do(ctx, "ACL", "WHOAMI").Text()
	require.NoError(t, err)
	require.Equal(t, "app", who)
	aside, err := client.Aside()
	require.NoError(t, err)
	t.Cleanup(func() { _ = aside.Close() })
	require.NoError(t, aside.Ping(ctx))

	otherCA := writeFile(t, t.TempDir(), "other.pem", newTestCA(t).pem)
	require.Error(t, pingRedis(t, redisConfig(t, "rediss://app:s3cret@"+addr, otherCA)), "a server signed by another CA")
	require.Error(t, pingRedis(t, redisConfig(t, "rediss://app:wrong@"+addr, caFile)), "a wrong password")
	require.Error(t, pingRedis(t, redisConfig(t, "rediss://"+addr, caFile)), "the default user, which is off")
	require.Error(t, pingRedis(t, redisConfig(t, "redis://app:s3cret@"+addr, "")), "plain TCP to a TLS port")

	_, err = conn.Redis(redisConfig(t, "redis://app:s3cret@"+addr, caFile))
	require.ErrorContains(t, err, "REDIS_CA_FILE needs a rediss://")
}

// A REDIS_URL that is not redis:// or rediss:// is refused at start
// without echoing it (it may hold a password).
func TestRedisURLRefused(t *testing.T) {
	t.Setenv("SECKILL_ENV", "dev")
	t.Setenv("REDIS_URL", "http://user:topsecret@host:6379")
	_, err := config.Load()
	require.ErrorContains(t, err, "REDIS_URL")
	require.NotContains(t, err.Error(), "topsecret")
	t.Setenv("REDIS_URL", "")
	t.Setenv("REDIS_CLUSTER", "yes")
	_, err = config.Load()
	require.ErrorContains(t, err, "REDIS_CLUSTER")
}

// MYSQL_CA_FILE registers the DSN's tls=custom: the driver then asks the
// (plain) test MariaDB for TLS instead of refusing an unknown name, and a
// file without a certificate is refused without retrying.
func TestMySQLCAFileRegistersTheDSNsTLS(t *testing.T) {
	testenv.MustStore(t)
	cfg := testenv.Config(t)
	dsn, err := mysql.ParseDSN(cfg.MySQLDSN)
	require.NoError(t, err)
	dsn.TLSConfig = conn.MySQLTLSName
	cfg.MySQLDSN = dsn.FormatDSN()
	cfg.MySQLCAFile = writeFile(t, t.TempDir(), "ca.pem", newTestCA(t).pem)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = conn.Store(ctx, cfg)
	require.ErrorIs(t, err, mysql.ErrNoTLS)

	cfg.MySQLCAFile = writeFile(t, t.TempDir(), "empty.pem", []byte("no certificate"))
	_, err = conn.StoreWhenReady(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.ErrorIs(t, err, store.ErrInvalidDSN)
}
