// Package config reads seckill's configuration from the environment, in one
// place. Every variable is documented in the README's configuration table.
package config

import (
	"errors"
	"fmt"
	"github.com/seckill/seckill/domain"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// Development defaults, used only when SECKILL_ENV=dev.
const (
	DevJWTSecret     = "seckill-dev-secret"
	DevPaymentSecret = "seckill-dev-payment-secret"
	DevTokenKey      = "seckill-dev-token-key"
)

// Config is the whole configuration of the API and the worker.
type Config struct {
	Env string // "dev" enables development defaults and fault hooks

	APIAddr string // listen address of the API

	RedisAddrs        []string // one address: a single Redis; several: a Redis Cluster
	RedisPassword     string
	MySQLDSN          string
	TemporalAddress   string
	TemporalNamespace string
	TaskQueue         string // task queue of the order and sale workflows
	TemporalAPIKey    string
	TemporalTLS       bool

	JWTSecret     []byte
	PaymentSecret []byte
	TokenKey      []byte // HMAC key deriving reservation tokens

	GlobalRPS      float64 // global token bucket of the reservation path
	GlobalBurst    int
	PerAddrRPS     float64
	PerAddrBurst   int
	PerUserRPS     float64
	PerUserBurst   int
	StatusRPS      float64 // per-user bucket of status reads; 0: unlimited
	StatusBurst    int
	FallbackRPS    float64 // global rate while a sale is in database mode
	TrustedAddrs   []netip.Prefix
	TrustedProxies []netip.Prefix
	ProxyHeader    string
	CORSOrigins    []string
	RedisTimeout   time.Duration // per-call timeout of hot-path Redis calls
	// ClockSkew bounds how far the clocks of the API, worker, Redis and
	// MySQL hosts may differ: reservation deadlines and the database
	// path's hold-off after a switch allow for it.
	ClockSkew       time.Duration
	StarterQueue    int // bounded queue of workflow starts in the API
	ShutdownTimeout time.Duration

	RelayConsumer    string
	RelayMaxDelivery int64 // deliveries before an inbox entry is dead-lettered
	RelayMinIdle     time.Duration
	RelayDeadAfter   time.Duration // least age of an inbox entry before dead-lettering

	WorkerMetricsAddr string // listen address of the worker's /metrics

	// FaultExitAfterReserve (SECKILL_FAULT_EXIT_AFTER_RESERVE=1, honoured only
	// in development mode) kills the API right after a successful reserve
	// script, before the workflow start is queued: for the fault suite.
	FaultExitAfterReserve bool

	// SaleSweep (SECKILL_SALE_SWEEP, default on) makes the worker start a
	// SaleWorkflow for every open sale that lacks one. Tests that share one
	// database among several workers turn it off.
	SaleSweep bool

	// PprofAddr (SECKILL_PPROF_ADDR, development mode only) serves Go's
	// profiler on this address, for measuring the hot path.
	PprofAddr string
	// FaultFailAfterCommit (SECKILL_FAULT_FAIL_AFTER_COMMIT=1, development
	// mode only) fails each token's first PlaceOrder after its commit.
	FaultFailAfterCommit bool
}

// Dev reports whether development mode is on.
func (c *Config) Dev() bool { return c.Env == "dev" }

// Load reads the configuration from the environment.
func Load() (*Config, error) { return load(os.Getenv) }

func load(get func(string) string) (*Config, error) {
	var errs []error
	str := func(name, def string) string {
		if v := get(name); v != "" {
			return v
		}
		return def
	}
	num := func(name string, def float64) float64 {
		v := get(name)
		if v == "" {
			return def
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			errs = append(errs, fmt.Errorf("%s: not a non-negative number: %q", name, v))
			return def
		}
		return f
	}
	dur := func(name string, def time.Duration) time.Duration {
		v := get(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s: not a positive duration: %q", name, v))
			return def
		}
		return d
	}
	prefixes := func(name, def string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range splitList(str(name, def)) {
			if !strings.Contains(s, "/") {
				a, err := netip.ParseAddr(s)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
					continue
				}
				out = append(out, netip.PrefixFrom(a, a.BitLen()))
				continue
			}
			p, err := netip.ParsePrefix(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
			out = append(out, p)
		}
		return out
	}

	c := &Config{Env: str("SECKILL_ENV", "production")}
	dev := c.Dev()
	devOr := func(v string) string {
		if dev {
			return v
		}
		return ""
	}

	c.APIAddr = str("API_ADDR", "127.0.0.1:8080")
	c.RedisAddrs = splitList(str("REDIS_ADDRS", str("REDIS_ADDR", "127.0.0.1:6379")))
	c.RedisPassword = get("REDIS_PASSWORD")
	c.MySQLDSN = str("MYSQL_DSN", devOr("root@tcp(127.0.0.1:3306)/seckill"))
	if c.MySQLDSN == "" {
		errs = append(errs, errors.New("MYSQL_DSN is required outside development mode"))
	}
	c.TemporalAddress = str("TEMPORAL_ADDRESS", "127.0.0.1:7233")
	c.TemporalNamespace = str("TEMPORAL_NAMESPACE", "default")
	c.TaskQueue = str("SECKILL_TASK_QUEUE", domain.TaskQueue)
	c.TemporalAPIKey = get("TEMPORAL_API_KEY")
	c.TemporalTLS = get("TEMPORAL_TLS") == "true" || c.TemporalAPIKey != ""

	c.JWTSecret = []byte(str("SECKILL_JWT_SECRET", devOr(DevJWTSecret)))
	c.PaymentSecret = []byte(str("SECKILL_PAYMENT_SECRET", devOr(DevPaymentSecret)))
	c.TokenKey = []byte(str("SECKILL_TOKEN_KEY", devOr(DevTokenKey)))
	if !dev {
		for name, v := range map[string][]byte{"SECKILL_JWT_SECRET": c.JWTSecret, "SECKILL_PAYMENT_SECRET": c.PaymentSecret, "SECKILL_TOKEN_KEY": c.TokenKey} {
			if len(v) < 32 {
				errs = append(errs, fmt.Errorf("%s must be at least 32 bytes outside development mode", name))
			}
		}
	}

	c.GlobalRPS = num("SECKILL_GLOBAL_RPS", 200000)
	c.GlobalBurst = int(num("SECKILL_GLOBAL_BURST", 20000))
	c.PerAddrRPS = num("SECKILL_PER_ADDR_RPS", 50)
	c.PerAddrBurst = int(num("SECKILL_PER_ADDR_BURST", 100))
	c.PerUserRPS = num("SECKILL_PER_USER_RPS", 5)
	c.PerUserBurst = int(num("SECKILL_PER_USER_BURST", 10))
	c.StatusRPS = num("SECKILL_STATUS_RPS", 20)
	c.StatusBurst = int(num("SECKILL_STATUS_BURST", 40))
	c.FallbackRPS = num("SECKILL_FALLBACK_RPS", 500)
	trustedDefault := ""
	if dev {
		trustedDefault = "127.0.0.0/8,::1/128"
	}
	c.TrustedAddrs = prefixes("SECKILL_TRUSTED_ADDRS", trustedDefault)
	c.TrustedProxies = prefixes("SECKILL_TRUSTED_PROXIES", "")
	c.ProxyHeader = str("SECKILL_PROXY_HEADER", "X-Forwarded-For")
	corsDefault := ""
	if dev {
		corsDefault = "*"
	}
	c.CORSOrigins = splitList(str("SECKILL_CORS_ORIGINS", corsDefault))
	c.RedisTimeout = dur("SECKILL_REDIS_TIMEOUT", 250*time.Millisecond)
	c.ClockSkew = dur("SECKILL_CLOCK_SKEW", 500*time.Millisecond)
	c.StarterQueue = int(num("SECKILL_STARTER_QUEUE", 4096))
	c.ShutdownTimeout = dur("SECKILL_SHUTDOWN_TIMEOUT", 10*time.Second)

	host, _ := os.Hostname()
	c.RelayConsumer = str("SECKILL_RELAY_CONSUMER", fmt.Sprintf("%s-%d", host, os.Getpid()))
	c.RelayMaxDelivery = int64(num("SECKILL_RELAY_MAX_DELIVERY", 10))
	c.RelayMinIdle = dur("SECKILL_RELAY_MIN_IDLE", 30*time.Second)
	c.RelayDeadAfter = dur("SECKILL_RELAY_DEAD_AFTER", 10*time.Minute)
	c.WorkerMetricsAddr = str("WORKER_METRICS_ADDR", "127.0.0.1:9091")
	c.FaultExitAfterReserve = dev && get("SECKILL_FAULT_EXIT_AFTER_RESERVE") == "1"
	c.SaleSweep = get("SECKILL_SALE_SWEEP") != "off"
	if dev {
		c.PprofAddr = get("SECKILL_PPROF_ADDR")
	}
	c.FaultFailAfterCommit = dev && get("SECKILL_FAULT_FAIL_AFTER_COMMIT") == "1"

	if len(errs) > 0 {
		return nil, fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
