package conn_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/internal/testkit/redisnode"
	"github.com/seckill/seckill/redisgateway"
)

// sentinelConfig is the configuration of a process reaching g's master
// through its sentinels, with the passwords given.
func sentinelConfig(t *testing.T, g *redisnode.SentinelGroup, password, sentinelPassword string) *config.Config {
	t.Helper()
	t.Setenv("SECKILL_ENV", "dev")
	t.Setenv("REDIS_SENTINELS", strings.Join(g.SentinelAddrs(), ","))
	t.Setenv("REDIS_SENTINEL_MASTER", redisnode.SentinelMaster)
	t.Setenv("REDIS_PASSWORD", password)
	t.Setenv("REDIS_SENTINEL_PASSWORD", sentinelPassword)
	cfg, err := config.Load()
	require.NoError(t, err)
	return cfg
}

// In Sentinel mode the client, and the breaker's aside client made from
// it, reach the master the sentinels name with both passwords, and follow
// the sentinels to the promoted replica when the master is killed (the
// switch logged through slog); a wrong password of either kind is refused.
func TestSentinelModeFollowsAFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, err := redisnode.StartSentinelGroup(ctx, redisnode.SentinelOptions{Dir: t.TempDir(), Password: "data-pw", SentinelPassword: "sentinel-pw"})
	require.NoError(t, err)
	t.Cleanup(g.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(g.Logs())
		}
	})
	master, replica := g.Nodes()
	logs := &lockedBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	require.Error(t, pingRedis(t, sentinelConfig(t, g, "data-pw", "wrong")), "a wrong sentinel password")
	require.Error(t, pingRedis(t, sentinelConfig(t, g, "wrong", "sentinel-pw")), "a wrong data password")
	rdb, err := conn.Redis(sentinelConfig(t, g, "data-pw", "sentinel-pw"))
	require.NoError(t, err)
	client := redisgateway.NewClient(rdb)
	t.Cleanup(func() { _ = client.Close() })
	aside, err := client.Aside()
	require.NoError(t, err)
	t.Cleanup(func() { _ = aside.Close() }) // before the client: registered after it
	require.True(t, client.Fences(), "one master, not a cluster")
	require.NoError(t, aside.PingAll(ctx))
	require.Equal(t, master, servingAddr(ctx, t, rdb))
	require.NoError(t, rdb.Set(ctx, "before", "1", 0).Err())
	acked, err := rdb.(*redis.Client).Wait(ctx, 1, 5*time.Second).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, acked)

	require.NoError(t, g.Kill(master))
	promoted, err := g.WaitForPromotion(ctx, master)
	require.NoError(t, err)
	require.Equal(t, replica, promoted)
	// The killed master answers nothing: a ping that succeeds was answered
	// by the promoted replica.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, client.PingAll(ctx))
		assert.NoError(c, aside.PingAll(ctx))
		assert.NoError(c, rdb.Set(ctx, "after", "1", 0).Err())
	}, 15*time.Second, 100*time.Millisecond)
	require.Equal(t, promoted, servingAddr(ctx, t, rdb))
	require.Equal(t, "1", rdb.Get(ctx, "before").Val())
	require.Regexp(t, `level=WARN msg=go-redis detail=".*new master.*`+promoted, logs.String(), "the switch is logged through slog")
}

// lockedBuffer is a log destination several goroutines write.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// servingAddr is the address of the server answering rdb.
func servingAddr(ctx context.Context, t *testing.T, rdb redis.UniversalClient) string {
	t.Helper()
	info, err := rdb.Info(ctx, "server").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if port, ok := strings.CutPrefix(line, "tcp_port:"); ok {
			return "127.0.0.1:" + port
		}
	}
	t.Fatalf("no tcp_port in INFO server: %q", info)
	return ""
}

// Sentinel mode builds go-redis's failover client with the options every
// mode shares (timeouts, pool, deadlines from the context), the data
// nodes' password, and with REDIS_SENTINEL_TLS a TLS configuration whose
// roots are REDIS_CA_FILE's; a CA file without TLS is refused.
func TestSentinelModeOptions(t *testing.T) {
	t.Setenv("SECKILL_ENV", "dev")
	t.Setenv("REDIS_SENTINELS", "127.0.0.1:1,127.0.0.1:2")
	t.Setenv("REDIS_SENTINEL_MASTER", "m")
	t.Setenv("REDIS_PASSWORD", "data-pw")
	caFile := writeFile(t, t.TempDir(), "ca.pem", newTestCA(t).pem)
	t.Setenv("REDIS_CA_FILE", caFile)
	cfg, err := config.Load()
	require.NoError(t, err)
	_, err = conn.Redis(cfg)
	require.ErrorContains(t, err, "REDIS_CA_FILE needs a rediss:// REDIS_URL or REDIS_SENTINEL_TLS=true")

	t.Setenv("REDIS_SENTINEL_TLS", "true")
	cfg, err = config.Load()
	require.NoError(t, err)
	rdb, err := conn.Redis(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	c, ok := rdb.(*redis.Client)
	require.True(t, ok, "a failover client is a *redis.Client, got %T", rdb)
	o := c.Options()
	require.Equal(t, "FailoverClient", o.Addr)
	require.Equal(t, "data-pw", o.Password)
	require.Equal(t, 256, o.PoolSize)
	require.Equal(t, 2*time.Second, o.ReadTimeout)
	require.True(t, o.ContextTimeoutEnabled)
	require.NotNil(t, o.TLSConfig)
	require.Empty(t, o.TLSConfig.ServerName, "each node verified under its own address")
	pem, err := os.ReadFile(caFile)
	require.NoError(t, err)
	want := x509.NewCertPool()
	require.True(t, want.AppendCertsFromPEM(pem))
	require.True(t, want.Equal(o.TLSConfig.RootCAs), fmt.Sprintf("roots from %s", caFile))
}

// REDIS_SENTINEL_TLS=true with REDIS_CA_FILE reaches a Sentinel group
// whose sentinels and nodes serve TLS only (and replicate over it); a
// server signed by another CA, or plain TCP, is refused.
func TestSentinelModeOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	certPEM, keyPEM := ca.issue(t, x509.ExtKeyUsageServerAuth)
	files := &redisnode.SentinelTLS{CertFile: writeFile(t, dir, "node.pem", certPEM),
		KeyFile: writeFile(t, dir, "node.key", keyPEM), CAFile: writeFile(t, dir, "ca.pem", ca.pem)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, err := redisnode.StartSentinelGroup(ctx, redisnode.SentinelOptions{Dir: filepath.Join(dir, "group"), Password: "data-pw", TLS: files})
	require.NoError(t, err)
	t.Cleanup(g.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(g.Logs())
		}
	})

	t.Setenv("REDIS_SENTINEL_TLS", "true")
	t.Setenv("REDIS_CA_FILE", files.CAFile)
	cfg := sentinelConfig(t, g, "data-pw", "")
	rdb, err := conn.Redis(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.Set(ctx, "over-tls", "1", 0).Err())
	master, _ := g.Nodes()
	require.Equal(t, master, servingAddr(ctx, t, rdb))

	t.Setenv("REDIS_CA_FILE", writeFile(t, t.TempDir(), "other.pem", newTestCA(t).pem))
	require.Error(t, pingRedis(t, sentinelConfig(t, g, "data-pw", "")), "a group signed by another CA")
	t.Setenv("REDIS_CA_FILE", "")
	t.Setenv("REDIS_SENTINEL_TLS", "false")
	require.Error(t, pingRedis(t, sentinelConfig(t, g, "data-pw", "")), "plain TCP to TLS sentinels")
}
