package config

import (
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// env is a fake environment for load.
func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func mustLoad(t *testing.T, get func(string) string) *Config {
	t.Helper()
	c, err := load(get)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return c
}

const secret32 = "0123456789abcdef0123456789abcdef"

func productionEnv(extra ...string) func(string) string {
	return env(append([]string{
		"MYSQL_DSN", "app@tcp(db:3306)/seckill",
		"SECKILL_JWT_SECRET", secret32,
		"SECKILL_ADMIN_JWT_SECRET", secret32 + "a",
		"SECKILL_PAYMENT_SECRET", secret32 + "p",
		"SECKILL_TOKEN_KEY", secret32 + "t",
	}, extra...)...)
}

func TestJWKSNeedsIssuerAndAudience(t *testing.T) {
	_, err := load(productionEnv("SECKILL_JWKS_URL", "https://idp.example/jwks.json"))
	if err == nil || !strings.Contains(err.Error(), "SECKILL_JWT_ISSUER and SECKILL_JWT_AUDIENCE") {
		t.Fatalf("got %v, want a refusal of a JWKS without iss and aud", err)
	}
	c := mustLoad(t, productionEnv("SECKILL_JWKS_URL", "https://idp.example/jwks.json", "SECKILL_JWT_ISSUER", "https://idp.example", "SECKILL_JWT_AUDIENCE", "seckill"))
	if c.JWTUserClaim != "sub" || c.JWTIssuer != "https://idp.example" {
		t.Errorf("jwks config: claim %q issuer %q", c.JWTUserClaim, c.JWTIssuer)
	}
}

func TestAdminSecretMustDifferFromTheUserSecret(t *testing.T) {
	_, err := load(productionEnv("SECKILL_ADMIN_JWT_SECRET", secret32))
	if err == nil || !strings.Contains(err.Error(), "SECKILL_ADMIN_JWT_SECRET must differ") {
		t.Fatalf("got %v, want a refusal of one secret for users and admins", err)
	}
	if dev := mustLoad(t, env("SECKILL_ENV", "dev")); string(dev.AdminJWTSecret) != DevAdminJWTSecret {
		t.Errorf("dev admin secret: got %q", dev.AdminJWTSecret)
	}
}

func TestDevModeHasDefaultsProductionHasNone(t *testing.T) {
	dev := mustLoad(t, env("SECKILL_ENV", "dev"))
	if !dev.Dev() || string(dev.JWTSecret) != DevJWTSecret || string(dev.PaymentSecret) != DevPaymentSecret || string(dev.TokenKey) != DevTokenKey {
		t.Errorf("dev secrets: got %q %q %q", dev.JWTSecret, dev.PaymentSecret, dev.TokenKey)
	}
	if dev.MySQLDSN == "" || len(dev.TrustedAddrs) == 0 || !slices.Equal(dev.CORSOrigins, []string{"*"}) {
		t.Errorf("dev defaults missing: dsn %q trusted %v cors %v", dev.MySQLDSN, dev.TrustedAddrs, dev.CORSOrigins)
	}

	_, err := load(env())
	if err == nil {
		t.Fatal("production without MYSQL_DSN and secrets loaded")
	}
	for _, name := range []string{"MYSQL_DSN", "SECKILL_JWT_SECRET", "SECKILL_ADMIN_JWT_SECRET", "SECKILL_PAYMENT_SECRET", "SECKILL_TOKEN_KEY"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}

	prod := mustLoad(t, productionEnv())
	if prod.Dev() || len(prod.TrustedAddrs) != 0 || len(prod.CORSOrigins) != 0 {
		t.Errorf("production got development defaults: trusted %v cors %v", prod.TrustedAddrs, prod.CORSOrigins)
	}
}

func TestShortSecretIsRefusedOutsideDevelopment(t *testing.T) {
	_, err := load(productionEnv("SECKILL_JWT_SECRET", "short"))
	if err == nil || !strings.Contains(err.Error(), "SECKILL_JWT_SECRET must be at least 32 bytes") {
		t.Fatalf("got %v, want a refusal naming SECKILL_JWT_SECRET", err)
	}
	if c := mustLoad(t, env("SECKILL_ENV", "dev", "SECKILL_JWT_SECRET", "short")); string(c.JWTSecret) != "short" {
		t.Errorf("dev secret: got %q", c.JWTSecret)
	}
}

func TestFaultHooksAndProfilerOnlyInDevelopment(t *testing.T) {
	hooks := []string{"SECKILL_FAULT_EXIT_AFTER_RESERVE", "1", "SECKILL_FAULT_FAIL_AFTER_COMMIT", "1", "SECKILL_PPROF_ADDR", "127.0.0.1:6060"}
	prod := mustLoad(t, productionEnv(hooks...))
	if prod.FaultExitAfterReserve || prod.FaultFailAfterCommit || prod.PprofAddr != "" {
		t.Errorf("production honoured a development hook: %+v", prod)
	}
	dev := mustLoad(t, env(append([]string{"SECKILL_ENV", "dev"}, hooks...)...))
	if !dev.FaultExitAfterReserve || !dev.FaultFailAfterCommit || dev.PprofAddr != "127.0.0.1:6060" {
		t.Errorf("dev ignored a development hook: %+v", dev)
	}
}

func TestValuesAreParsed(t *testing.T) {
	c := mustLoad(t, productionEnv(
		"REDIS_ADDR", "ignored:6379",
		"REDIS_ADDRS", " a:1, b:2 ,,c:3",
		"SECKILL_FALLBACK_RPS", "12.5",
		"SECKILL_REDIS_TIMEOUT", "75ms",
		"SECKILL_TRUSTED_PROXIES", "10.0.0.0/8, 192.0.2.7",
		"SECKILL_SALE_SWEEP", "off",
	))
	if !slices.Equal(c.RedisAddrs, []string{"a:1", "b:2", "c:3"}) {
		t.Errorf("REDIS_ADDRS: got %v", c.RedisAddrs)
	}
	if c.FallbackRPS != 12.5 || c.RedisTimeout != 75*time.Millisecond || c.SaleSweep {
		t.Errorf("got fallback %v timeout %v sweep %v", c.FallbackRPS, c.RedisTimeout, c.SaleSweep)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32")}
	if !slices.Equal(c.TrustedProxies, want) {
		t.Errorf("trusted proxies: got %v, want %v", c.TrustedProxies, want)
	}
	if c := mustLoad(t, productionEnv("REDIS_ADDR", "r:7")); !slices.Equal(c.RedisAddrs, []string{"r:7"}) {
		t.Errorf("REDIS_ADDR alone: got %v", c.RedisAddrs)
	}
}

func TestBadValuesNameTheirVariable(t *testing.T) {
	for name, value := range map[string]string{
		"SECKILL_GLOBAL_RPS":      "-1",
		"SECKILL_PER_USER_BURST":  "many",
		"SECKILL_REDIS_TIMEOUT":   "0s",
		"SECKILL_RELAY_MIN_IDLE":  "soon",
		"SECKILL_TRUSTED_ADDRS":   "300.1.1.1",
		"SECKILL_TRUSTED_PROXIES": "10.0.0.0/99",
		"SECKILL_STARTER_QUEUE":   "1.5",
		"SECKILL_SALE_SWEEP":      "no thanks",
		"SECKILL_TOKEN_KEY_FILE":  "/nonexistent/secret",
		"LOG_LEVEL":               "chatty",
		"OTEL_TRACES_SAMPLER_ARG": "1.5",
	} {
		_, err := load(productionEnv(name, value))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: got %v, want an error naming it", name, value, err)
		}
	}
}

// Switches take on/off, true/false, 1/0 (before, only "off" turned one off).
func TestSwitchesAcceptOnAndOffWords(t *testing.T) {
	for v, want := range map[string]bool{"off": false, "false": false, "0": false, "OFF": false, "on": true, "true": true, "1": true} {
		c := mustLoad(t, productionEnv("SECKILL_SALE_SWEEP", v, "SECKILL_API_STARTS_REDIS_ORDERS", v))
		if c.SaleSweep != want || c.APIStartsRedisOrders != want {
			t.Errorf("%q: sweep %v, api starts %v; want %v", v, c.SaleSweep, c.APIStartsRedisOrders, want)
		}
	}
	// Unset, each takes its default: the sweep runs, the relay alone starts
	// a Redis-path order.
	c := mustLoad(t, productionEnv())
	if !c.SaleSweep || c.APIStartsRedisOrders {
		t.Errorf("defaults: sweep %v, api starts %v; want true, false", c.SaleSweep, c.APIStartsRedisOrders)
	}
}

// A secret may come from a mounted file (NAME_FILE), one trailing newline
// dropped; both NAME and NAME_FILE set is an error.
func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/token-key"
	if err := os.WriteFile(path, []byte(secret32+"f\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	get := func(k string) string {
		if k == "SECKILL_TOKEN_KEY" {
			return ""
		}
		if k == "SECKILL_TOKEN_KEY_FILE" {
			return path
		}
		return productionEnv()(k)
	}
	if c := mustLoad(t, get); string(c.TokenKey) != secret32+"f" {
		t.Errorf("token key from the file: %q", c.TokenKey)
	}
	if _, err := load(productionEnv("SECKILL_TOKEN_KEY_FILE", path)); err == nil || !strings.Contains(err.Error(), "both set") {
		t.Errorf("both set: %v", err)
	}
}

func TestLogLevel(t *testing.T) {
	if c := mustLoad(t, productionEnv()); c.LogLevel != slog.LevelInfo {
		t.Errorf("default %v", c.LogLevel)
	}
	if c := mustLoad(t, productionEnv("LOG_LEVEL", "debug")); c.LogLevel != slog.LevelDebug {
		t.Errorf("debug: %v", c.LogLevel)
	}
}

// The default sampler samples a tenth of new traces; the ratio is
// OTEL_TRACES_SAMPLER_ARG's; with OTEL_TRACES_SAMPLER set the SDK reads
// both itself.
func TestTraceRatio(t *testing.T) {
	for _, c := range []struct {
		kv   []string
		want float64
	}{
		{nil, 0.1},
		{[]string{"OTEL_TRACES_SAMPLER_ARG", "1"}, 1},
		{[]string{"OTEL_TRACES_SAMPLER_ARG", "0.25"}, 0.25},
		{[]string{"OTEL_TRACES_SAMPLER", "always_on", "OTEL_TRACES_SAMPLER_ARG", "7"}, 0},
	} {
		if got := mustLoad(t, productionEnv(c.kv...)).TraceRatio; got != c.want {
			t.Errorf("%v: ratio %v, want %v", c.kv, got, c.want)
		}
	}
}

// REDIS_SENTINELS selects Sentinel mode: the master's name is required,
// the sentinels' password may come from a file, and the direct address
// default is dropped (the sentinels name the master).
func TestSentinelSettings(t *testing.T) {
	file := t.TempDir() + "/sentinel-password"
	if err := os.WriteFile(file, []byte("s3ntinel\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := mustLoad(t, productionEnv("REDIS_SENTINELS", "10.0.0.1:26379, 10.0.0.2:26379,10.0.0.3:26379",
		"REDIS_SENTINEL_MASTER", "seckill", "REDIS_SENTINEL_PASSWORD_FILE", file, "REDIS_PASSWORD", "data",
		"REDIS_SENTINEL_TLS", "true"))
	if !slices.Equal(c.RedisSentinels, []string{"10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"}) ||
		c.RedisSentinelMaster != "seckill" || c.RedisSentinelPassword != "s3ntinel" || c.RedisPassword != "data" ||
		!c.RedisSentinelTLS || c.RedisAddrs != nil {
		t.Errorf("got sentinels %v master %q password %q data password %q TLS %v addrs %v", c.RedisSentinels,
			c.RedisSentinelMaster, c.RedisSentinelPassword, c.RedisPassword, c.RedisSentinelTLS, c.RedisAddrs)
	}
	if c := mustLoad(t, productionEnv()); c.RedisSentinels != nil || c.RedisSentinelTLS {
		t.Errorf("no REDIS_SENTINELS: got %v, TLS %v", c.RedisSentinels, c.RedisSentinelTLS)
	}
}

// Sentinel mode refused alongside another way of naming Redis, without
// its master's name, with a sentinel that is not host:port, and Sentinel
// settings without sentinels: each error names the variables.
func TestSentinelConflictsNameTheirVariables(t *testing.T) {
	sentinels := func(kv ...string) []string {
		return append([]string{"REDIS_SENTINELS", "a:26379,b:26379", "REDIS_SENTINEL_MASTER", "m"}, kv...)
	}
	for _, c := range []struct {
		kv   []string
		want []string
	}{
		{sentinels("REDIS_CLUSTER", "true"), []string{"REDIS_SENTINELS", "REDIS_CLUSTER=true"}},
		{sentinels("REDIS_URL", "rediss://u:p@h:6380"), []string{"REDIS_SENTINELS", "REDIS_URL"}},
		{sentinels("REDIS_ADDR", "h:6379", "REDIS_ADDRS", "h:6379"), []string{"REDIS_SENTINELS", "REDIS_ADDR, REDIS_ADDRS"}},
		{[]string{"REDIS_SENTINELS", "a:26379"}, []string{"REDIS_SENTINELS needs REDIS_SENTINEL_MASTER"}},
		{[]string{"REDIS_SENTINELS", "a:26379,b", "REDIS_SENTINEL_MASTER", "m"}, []string{`REDIS_SENTINELS: "b" is not host:port`}},
		{[]string{"REDIS_SENTINEL_MASTER", "m"}, []string{"REDIS_SENTINEL_MASTER is set but REDIS_SENTINELS is not"}},
		{[]string{"REDIS_SENTINEL_PASSWORD", "p"}, []string{"REDIS_SENTINEL_PASSWORD is set but REDIS_SENTINELS is not"}},
		{[]string{"REDIS_SENTINEL_TLS", "true"}, []string{"REDIS_SENTINEL_TLS is set but REDIS_SENTINELS is not"}},
		{sentinels("REDIS_SENTINEL_TLS", "yes"), []string{"REDIS_SENTINEL_TLS: not true or false"}},
	} {
		_, err := load(productionEnv(c.kv...))
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: got %v, want an error with %q", c.kv, err, w)
			}
		}
	}
}

func TestAdminJWKSNeedsIssuerAndAudience(t *testing.T) {
	for _, extra := range [][]string{
		{"SECKILL_ADMIN_JWKS_URL", "https://idp.example/jwks.json"},
		{"SECKILL_ADMIN_JWKS_URL", "https://idp.example/jwks.json", "SECKILL_ADMIN_JWT_ISSUER", "https://idp.example/ops"},
		{"SECKILL_ADMIN_JWKS_URL", "https://idp.example/jwks.json", "SECKILL_ADMIN_JWT_AUDIENCE", "seckill-admin"},
	} {
		_, err := load(productionEnv(extra...))
		if err == nil || !strings.Contains(err.Error(), "SECKILL_ADMIN_JWT_ISSUER and SECKILL_ADMIN_JWT_AUDIENCE") {
			t.Fatalf("%v: got %v, want a refusal of an admin JWKS without iss and aud", extra, err)
		}
	}
	c := mustLoad(t, productionEnv("SECKILL_ADMIN_JWKS_URL", "https://idp.example/jwks.json",
		"SECKILL_ADMIN_JWT_ISSUER", "https://idp.example/ops", "SECKILL_ADMIN_JWT_AUDIENCE", "seckill-admin"))
	if c.AdminJWKSURL != "https://idp.example/jwks.json" || c.AdminJWTIssuer != "https://idp.example/ops" || c.AdminJWTAudience != "seckill-admin" {
		t.Errorf("admin jwks config: %q %q %q", c.AdminJWKSURL, c.AdminJWTIssuer, c.AdminJWTAudience)
	}
	if c.AdminJWTRoleClaim != "roles" || c.AdminJWTRole != "seckill-admin" {
		t.Errorf("admin role defaults: claim %q role %q", c.AdminJWTRoleClaim, c.AdminJWTRole)
	}
	c = mustLoad(t, productionEnv("SECKILL_ADMIN_JWT_ROLE_CLAIM", "groups", "SECKILL_ADMIN_JWT_ROLE", "ops"))
	if c.AdminJWKSURL != "" || c.AdminJWTRoleClaim != "groups" || c.AdminJWTRole != "ops" {
		t.Errorf("admin role settings: url %q claim %q role %q", c.AdminJWKSURL, c.AdminJWTRoleClaim, c.AdminJWTRole)
	}
}

// The replica is off unless named; its bound defaults to 2 s; a bad bound
// names its variable, and a published DSN is refused like the primary's.
func TestReadReplicaSettings(t *testing.T) {
	c := mustLoad(t, productionEnv())
	if c.MySQLReadDSN != "" || c.MySQLReadMaxLag != 2*time.Second {
		t.Fatalf("unset: DSN %q, max lag %s; want none and 2s", c.MySQLReadDSN, c.MySQLReadMaxLag)
	}
	c = mustLoad(t, productionEnv("MYSQL_READ_DSN", "app@tcp(replica:3306)/seckill", "MYSQL_READ_MAX_LAG", "500ms"))
	if c.MySQLReadDSN != "app@tcp(replica:3306)/seckill" || c.MySQLReadMaxLag != 500*time.Millisecond {
		t.Fatalf("set: DSN %q, max lag %s", c.MySQLReadDSN, c.MySQLReadMaxLag)
	}
	for _, bad := range [][]string{{"MYSQL_READ_MAX_LAG", "soon"}, {"MYSQL_READ_MAX_LAG", "-1s"},
		{"MYSQL_READ_DSN", "seckill:CHANGE-ME@tcp(mariadb:3306)/seckill"}} {
		_, err := load(productionEnv(bad...))
		if err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%s: error %v, want one naming %s", bad[0], bad[1], err, bad[0])
		}
	}
}

// The worker's GC target: 400 by default, as set, 0 (Go's own) when Go's
// GOGC is set.
func TestWorkerGOGC(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want int
	}{
		{nil, 400},
		{[]string{"SECKILL_WORKER_GOGC", "200"}, 200},
		{[]string{"SECKILL_WORKER_GOGC", "0"}, 0},
		{[]string{"GOGC", "off"}, 0},
		{[]string{"GOGC", "150", "SECKILL_WORKER_GOGC", "800"}, 0},
	} {
		if got := mustLoad(t, productionEnv(tc.env...)).WorkerGOGC; got != tc.want {
			t.Errorf("%v: WorkerGOGC %d, want %d", tc.env, got, tc.want)
		}
	}
}

// The worker's sticky cache: 2,000 runs by default, as set, and at least
// one (the SDK takes 0 to mean no cache at all, which is not a size).
func TestWorkerStickyCache(t *testing.T) {
	if got := mustLoad(t, productionEnv()).WorkerStickyCache; got != 2000 {
		t.Errorf("unset: WorkerStickyCache %d, want 2000", got)
	}
	if got := mustLoad(t, productionEnv("SECKILL_WORKER_STICKY_CACHE", "500")).WorkerStickyCache; got != 500 {
		t.Errorf("500: WorkerStickyCache %d, want 500", got)
	}
	for _, bad := range []string{"0", "-1", "many"} {
		_, err := load(productionEnv("SECKILL_WORKER_STICKY_CACHE", bad))
		if err == nil || !strings.Contains(err.Error(), "SECKILL_WORKER_STICKY_CACHE") {
			t.Errorf("%s: error %v, want one naming SECKILL_WORKER_STICKY_CACHE", bad, err)
		}
	}
}
