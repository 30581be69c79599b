// Package config reads seckill's configuration from the environment, in one
// place. Every variable is documented in docs/configuration.md.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/domain"
)

// Development defaults, used only when SECKILL_ENV=dev.
const (
	DevJWTSecret = "seckill-dev-secret"
	// DevAdminJWTSecret signs admin tokens in development mode; it differs
	// from DevJWTSecret so the user-token signer cannot mint admin tokens.
	DevAdminJWTSecret = "seckill-dev-admin-secret"
	DevPaymentSecret  = "seckill-dev-payment-secret"
	DevTokenKey       = "seckill-dev-token-key"
)

// publishedValues are secrets anyone can read: the development defaults and
// the values of deploy/k8s/base/secrets.env.example (a config test holds
// this list to that file). Outside development mode they are refused, as is
// any value holding the example's placeholder mark, placeholderMark.
var publishedValues = []string{
	DevJWTSecret, DevAdminJWTSecret, DevPaymentSecret, DevTokenKey,
	"seckill:CHANGE-ME@tcp(mariadb:3306)/seckill",
	"CHANGE-ME-user-token-secret-of-32-bytes-or-more",
	"CHANGE-ME-admin-token-secret-of-32-bytes-or-more",
	"CHANGE-ME-payment-webhook-secret-32-bytes-or-more",
	"CHANGE-ME-reservation-token-key-of-32-bytes-or-more",
}

// placeholderMark marks a template's value (compared case-insensitively).
const placeholderMark = "CHANGE-ME"

// Config is the whole configuration of the API and the worker.
type Config struct {
	Env string // "dev" enables development defaults and fault hooks

	APIAddr string // listen address of the API

	RedisAddrs    []string // one address: a single Redis; several: a Redis Cluster
	RedisPassword string
	// RedisURL (REDIS_URL: redis:// or rediss://, user, password, db)
	// replaces RedisAddrs and RedisPassword when set.
	RedisURL          string
	RedisCAFile       string // REDIS_CA_FILE: PEM roots verifying a rediss:// server (or Sentinel TLS)
	RedisCluster      bool   // REDIS_CLUSTER=true: discover a Redis Cluster from any one address
	MySQLDSN          string
	MySQLCAFile       string // MYSQL_CA_FILE: PEM roots for a DSN naming tls=custom
	TemporalAddress   string
	TemporalNamespace string
	// TemporalGzip (TEMPORAL_GZIP; default off) compresses the gRPC
	// requests to Temporal, and so its answers. An order's messages are a
	// few hundred bytes of ids, which gzip barely shrinks while costing
	// the caller and the server CPU on every call; worth it only where
	// bytes to Temporal cost more than CPU.
	TemporalGzip bool
	TaskQueue    string // task queue of the order and sale workflows

	// RedisSentinels (REDIS_SENTINELS), when set, are the addresses of the
	// Redis Sentinels monitoring the master named RedisSentinelMaster: the
	// client asks them for the master and follows its failovers.
	// RedisAddrs is then empty and RedisPassword is the data nodes';
	// with RedisSentinelTLS, RedisCAFile verifies sentinels and nodes alike.
	RedisSentinels        []string
	RedisSentinelMaster   string // REDIS_SENTINEL_MASTER: the name the sentinels know the master by
	RedisSentinelPassword string // REDIS_SENTINEL_PASSWORD: the sentinels' own password (their requirepass)
	RedisSentinelTLS      bool   // REDIS_SENTINEL_TLS=true: TLS to the sentinels and the data nodes

	// MySQLReadDSN (MYSQL_READ_DSN), when set, is an asynchronous replica
	// of MySQLDSN: the reads that may lag go to it while it is at most
	// MySQLReadMaxLag (MYSQL_READ_MAX_LAG) behind (store.Replica); empty:
	// every read on the primary.
	MySQLReadDSN    string
	MySQLReadMaxLag time.Duration

	JWTSecret []byte
	// AdminJWTSecret alone signs tokens with role admin: a token signed by
	// JWTSecret that claims role admin is refused.
	AdminJWTSecret []byte
	// An identity provider's JWKS URL also verifying user tokens (RS256,
	// ES256, EdDSA), the iss and aud they must carry, and the claim holding
	// the user id.
	JWKSURL, JWTIssuer, JWTAudience, JWTUserClaim string
	// JWTRoleClaim names the role claim of identity-provider tokens.
	JWTRoleClaim string
	// Operators' admin tokens from an identity provider: its JWKS URL
	// (may equal JWKSURL), the iss and aud they must carry (their own, so
	// a user token is never taken for one), and the claim and value that
	// grant admin. The token's sub names the operator.
	AdminJWKSURL, AdminJWTIssuer, AdminJWTAudience string
	AdminJWTRoleClaim, AdminJWTRole                string
	// TokenCacheSize bounds the verified bearer tokens an API instance
	// remembers, so a caller repeating a token is not verified again on
	// every request; 0 remembers none.
	TokenCacheSize int
	PaymentSecret  []byte
	TokenKey       []byte // HMAC key deriving reservation tokens

	// The previous secrets, accepted alongside the current ones while a
	// rotation is under way (empty: none).
	JWTSecretPrevious []byte
	// TokenKeyPrevious is the token key before a rotation: challenge
	// passes and solutions made under it still verify.
	TokenKeyPrevious      []byte
	PaymentSecretPrevious []byte

	GlobalRPS      float64 // global token bucket of the reservation path
	GlobalBurst    int
	PerAddrRPS     float64
	PerAddrBurst   int
	PerUserRPS     float64
	PerUserBurst   int
	TrustedAddrs   []netip.Prefix
	TrustedProxies []netip.Prefix
	ProxyHeader    string
	CORSOrigins    []string
	RedisTimeout   time.Duration // per-call timeout of hot-path Redis calls
	// ClockSkew bounds how far the clocks of the API, worker, Redis and
	// MySQL hosts may differ: reservation deadlines and the database
	// path's hold-off after a switch allow for it.
	ClockSkew    time.Duration
	StarterQueue int // bounded queue of workflow starts in the API
	// Degraded is the degraded mode's settings (package degraded).
	Degraded
	// ShutdownTimeout bounds a stop: the worker's whole drain, and the
	// API's after its ShutdownDelay.
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long an API told to stop keeps serving while
	// failing /readyz, so load balancers take it out before its listener
	// closes.
	ShutdownDelay time.Duration

	// APIStartsRedisOrders (SECKILL_API_STARTS_REDIS_ORDERS; default off)
	// makes the API start the order workflow of a Redis-path 202 at once,
	// besides the worker's inbox relay: two start calls per order instead
	// of one (the second, refused, still costs the API, the relay and the
	// Temporal server a call). Off, the relay alone starts it, and a 202
	// whose inbox entry a failing-over Redis lost is started by the
	// worker once it sees Redis change (worker.LostHolds), from the hold
	// that MySQL recorded before the 202 was answered.
	APIStartsRedisOrders bool

	// Read routes (storefront, sale view, reservation reads): per address
	// and per user; health probes and /metrics are exempt.
	ReadRPS          float64
	ReadBurst        int
	ReadPerUserRPS   float64
	ReadPerUserBurst int

	// The HTTP edge. MaxConns 0 derives the cap from the process's file
	// descriptor limit (see api/edge.go); MaxConnsPerAddr 0 turns the
	// per-address cap off. Trusted proxies and trusted addresses are exempt
	// from the latter.
	MaxConns        int
	MaxConnsPerAddr int
	IdleTimeout     time.Duration // a connection waiting for a request's first byte is closed silently after this
	HeaderTimeout   time.Duration // from a request's first byte to the end of its headers, else 408
	BodyTimeout     time.Duration // from the end of the headers to the end of the body, else 408

	// AdminAddr, when set, is the listener of /admin/* and /metrics alone
	// (the API's listener then answers them 404).
	AdminAddr string
	// AdminURL and AdminToken are what `seckill admin` calls with: the
	// admin API's base URL and an operator's JWT (both optional).
	AdminURL   string
	AdminToken string
	// LogLevel is the least level logged (LOG_LEVEL: debug, info, warn,
	// error).
	LogLevel slog.Level
	// Instance names this process in the fleet's view of Redis.
	Instance string
	// OpeningPool is how long after a sale opens reservations only enter
	// its lottery (0: no lottery); OpeningGrace is the time between the
	// draw's bands of stock_total users each.
	OpeningPool  time.Duration
	OpeningGrace time.Duration

	RelayConsumer    string
	RelayMaxDelivery int64 // deliveries of a refused start before an inbox entry is dead-lettered
	RelayMinIdle     time.Duration
	RelayDeadAfter   time.Duration // least age of an inbox entry before a refused start dead-letters it

	WorkerMetricsAddr string // listen address of the worker's /metrics
	// ReconcileConcurrency bounds the sale reconciliations a worker runs
	// at once; the others wait their turn (activities.ReconcileSlots).
	ReconcileConcurrency int
	// WorkerGOGC (SECKILL_WORKER_GOGC; default 400) is the worker's
	// garbage-collection target, as Go's GOGC: each order's workflow task
	// and steps leave short-lived garbage, and a heap let grow further
	// between collections costs the worker fewer of them per order. Go's
	// own GOGC, when set, is left in force (0 here); GOMEMLIMIT still
	// bounds the heap either way.
	WorkerGOGC int
	// WorkerStickyCache (SECKILL_WORKER_STICKY_CACHE; default 2,000) is how
	// many workflow runs the worker keeps in memory between their tasks
	// (the Temporal SDK's sticky cache, least recently used first out). A
	// run kept is a parked goroutine and its state (about 47 KB), marked by
	// every collection; one not kept replays its short history at its next
	// task. A live sale's workflow sleeps until a change or its end, so
	// with thousands of sales the SDK's default (10,000) keeps mostly
	// sleepers: 2,000 holds a thousand-unit sale's pending orders and the
	// sales that woke last.
	WorkerStickyCache int

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

	// Tracing is on when the OTEL_* variables name an OTLP endpoint (see
	// internal/telemetry); TracesProtocol is grpc or http/protobuf.
	Tracing        bool
	TracesProtocol string
	// TraceRatio is the share of new traces sampled when OTEL_TRACES_SAMPLER
	// is unset (parent-based: a caller's sampled flag wins): the ratio in
	// OTEL_TRACES_SAMPLER_ARG, 0.1 by default.
	TraceRatio float64
}

// JWTSecrets are the secrets a bearer token may be signed with: the
// current one, then the previous one during a rotation.
func (c *Config) JWTSecrets() [][]byte { return secrets(c.JWTSecret, c.JWTSecretPrevious) }

// PaymentSecrets are the secrets a webhook may be signed with, current first.
func (c *Config) PaymentSecrets() [][]byte { return secrets(c.PaymentSecret, c.PaymentSecretPrevious) }

func secrets(current, previous []byte) [][]byte {
	out := [][]byte{current}
	if len(previous) > 0 {
		out = append(out, previous)
	}
	return out
}

// Dev reports whether development mode is on.
func (c *Config) Dev() bool { return c.Env == "dev" }

// Load reads the configuration from the environment.
func Load() (*Config, error) { return load(os.Getenv) }

// Need says which of the settings that have no production default a
// command requires: a command that signs a token needs no database.
type Need uint8

const (
	NeedDatabase    Need = 1 << iota // MYSQL_DSN
	NeedUserSigner                   // SECKILL_JWT_SECRET
	NeedAdminSigner                  // SECKILL_ADMIN_JWT_SECRET
	NeedPayment                      // SECKILL_PAYMENT_SECRET
	NeedTokenKey                     // SECKILL_TOKEN_KEY
	NeedAll         = NeedDatabase | NeedUserSigner | NeedAdminSigner | NeedPayment | NeedTokenKey
)

// LoadFor is Load for a command that requires only need: what it does not
// need may be unset outside development mode (a value that is set is
// still checked).
func LoadFor(need Need) (*Config, error) { return loadFor(os.Getenv, need) }

func load(get func(string) string) (*Config, error) { return loadFor(get, NeedAll) }

func loadFor(get func(string) string, need Need) (*Config, error) {
	r := &envReader{get: get}
	c := &Config{Env: r.str("SECKILL_ENV", "production")}
	r.dev = c.Dev()
	r.backends(c, need)
	r.secrets(c, need)
	r.limits(c)
	r.edge(c)
	r.process(c)
	r.degraded(c)
	if len(r.errs) > 0 {
		return nil, fmt.Errorf("config: %w", errors.Join(r.errs...))
	}
	return c, nil
}

// envReader reads variables, collecting every bad value so that one start
// reports them all.
type envReader struct {
	get  func(string) string
	dev  bool
	errs []error
}

func (r *envReader) fail(err error) { r.errs = append(r.errs, err) }

// devOr is v in development mode, else "" (no default).
func (r *envReader) devOr(v string) string {
	if r.dev {
		return v
	}
	return ""
}

func (r *envReader) str(name, def string) string {
	if v := r.get(name); v != "" {
		return v
	}
	return def
}

func (r *envReader) num(name string, def float64) float64 {
	v := r.get(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		r.fail(fmt.Errorf("%s: not a non-negative number: %q", name, v))
		return def
	}
	return f
}

func (r *envReader) integer(name string, def int) int {
	v := r.get(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		r.fail(fmt.Errorf("%s: not a non-negative integer: %q", name, v))
		return def
	}
	return n
}

// trueFalse reads a variable that is true or false (unset: false).
func (r *envReader) trueFalse(name string) bool {
	switch v := r.get(name); v {
	case "", "false":
		return false
	case "true":
		return true
	default:
		r.fail(fmt.Errorf("%s: not true or false: %q", name, v))
		return false
	}
}

// switchOn reads an on/off switch: on, true, 1 / off, false, 0.
func (r *envReader) switchOn(name string, def bool) bool {
	switch v := strings.ToLower(r.get(name)); v {
	case "":
		return def
	case "on", "true", "1":
		return true
	case "off", "false", "0":
		return false
	default:
		r.fail(fmt.Errorf("%s: not on or off: %q", name, v))
		return def
	}
}

// secret reads NAME, or the file NAME_FILE names (a mounted secret; one
// trailing newline dropped), never both.
func (r *envReader) secret(name, def string) string {
	v, file := r.get(name), r.get(name+"_FILE")
	switch {
	case file == "":
		if v == "" {
			return def
		}
		return v
	case v != "":
		r.fail(fmt.Errorf("%s and %s_FILE are both set", name, name))
		return v
	}
	b, err := os.ReadFile(file)
	if err != nil {
		r.fail(fmt.Errorf("%s_FILE: %w", name, err))
		return def
	}
	return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
}

// optDur is dur that also takes 0 (off).
func (r *envReader) optDur(name string, def time.Duration) time.Duration {
	if v := r.get(name); v == "0" || v == "0s" {
		return 0
	}
	return r.dur(name, def)
}

func (r *envReader) dur(name string, def time.Duration) time.Duration {
	v := r.get(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		r.fail(fmt.Errorf("%s: not a positive duration: %q", name, v))
		return def
	}
	return d
}

// prefixes reads a list of addresses or CIDR prefixes.
func (r *envReader) prefixes(name, def string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range splitList(r.str(name, def)) {
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				r.fail(fmt.Errorf("%s: %w", name, err))
				continue
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			r.fail(fmt.Errorf("%s: %w", name, err))
			continue
		}
		out = append(out, p)
	}
	return out
}

// backends: listeners, Redis, MariaDB, Temporal.
func (r *envReader) backends(c *Config, need Need) {
	c.APIAddr = r.str("API_ADDR", "127.0.0.1:8080")
	c.AdminAddr = r.get("ADMIN_ADDR")
	c.AdminURL = r.get("SECKILL_ADMIN_URL")
	r.redis(c)
	c.MySQLDSN = r.secret("MYSQL_DSN", r.devOr("root@tcp(127.0.0.1:3306)/seckill"))
	c.MySQLCAFile = r.get("MYSQL_CA_FILE")
	if c.MySQLDSN == "" && need&NeedDatabase != 0 {
		r.fail(errors.New("MYSQL_DSN is required outside development mode"))
	}
	c.MySQLReadDSN = r.secret("MYSQL_READ_DSN", "")
	c.MySQLReadMaxLag = r.dur("MYSQL_READ_MAX_LAG", 2*time.Second)
	c.TemporalAddress = r.str("TEMPORAL_ADDRESS", "127.0.0.1:7233")
	c.TemporalNamespace = r.str("TEMPORAL_NAMESPACE", "default")
	c.TemporalGzip = r.switchOn("TEMPORAL_GZIP", false)
	c.TaskQueue = r.str("SECKILL_TASK_QUEUE", domain.TaskQueue)
}

// redis: one server, a Redis Cluster, or the master a Sentinel group
// names.
func (r *envReader) redis(c *Config) {
	c.RedisAddrs = splitList(r.str("REDIS_ADDRS", r.str("REDIS_ADDR", "127.0.0.1:6379")))
	c.RedisPassword = r.secret("REDIS_PASSWORD", "")
	c.RedisURL = r.get("REDIS_URL")
	if u, err := url.Parse(c.RedisURL); c.RedisURL != "" && (err != nil || (u.Scheme != "redis" && u.Scheme != "rediss")) {
		r.fail(errors.New("REDIS_URL: not a redis:// or rediss:// URL"))
	}
	c.RedisCAFile = r.get("REDIS_CA_FILE")
	c.RedisCluster = r.trueFalse("REDIS_CLUSTER")
	r.sentinel(c)
}

// sentinel reads the Sentinel settings. The sentinels name the master, so
// an address, a URL or a cluster alongside them is refused, as are
// Sentinel settings without sentinels.
func (r *envReader) sentinel(c *Config) {
	c.RedisSentinels = splitList(r.get("REDIS_SENTINELS"))
	c.RedisSentinelMaster = r.get("REDIS_SENTINEL_MASTER")
	c.RedisSentinelPassword = r.secret("REDIS_SENTINEL_PASSWORD", "")
	c.RedisSentinelTLS = r.trueFalse("REDIS_SENTINEL_TLS")
	if len(c.RedisSentinels) == 0 {
		for _, s := range []struct {
			name string
			set  bool
		}{{"REDIS_SENTINEL_MASTER", c.RedisSentinelMaster != ""}, {"REDIS_SENTINEL_PASSWORD", c.RedisSentinelPassword != ""},
			{"REDIS_SENTINEL_TLS", c.RedisSentinelTLS}} {
			if s.set {
				r.fail(fmt.Errorf("%s is set but REDIS_SENTINELS is not", s.name))
			}
		}
		return
	}
	for _, a := range c.RedisSentinels {
		if _, _, err := net.SplitHostPort(a); err != nil {
			r.fail(fmt.Errorf("REDIS_SENTINELS: %q is not host:port", a))
		}
	}
	if c.RedisSentinelMaster == "" {
		r.fail(errors.New("REDIS_SENTINELS needs REDIS_SENTINEL_MASTER, the name the sentinels monitor the master by"))
	}
	var also []string
	for _, name := range []string{"REDIS_ADDR", "REDIS_ADDRS", "REDIS_URL"} {
		if r.get(name) != "" {
			also = append(also, name)
		}
	}
	if c.RedisCluster {
		also = append(also, "REDIS_CLUSTER=true")
	}
	if len(also) > 0 {
		r.fail(fmt.Errorf("REDIS_SENTINELS cannot be combined with %s: the sentinels name the master", strings.Join(also, ", ")))
	}
	c.RedisAddrs = nil
}

// secrets: token signers, the payment secret, the token key.
func (r *envReader) secrets(c *Config, need Need) {
	c.JWTSecret = []byte(r.secret("SECKILL_JWT_SECRET", r.devOr(DevJWTSecret)))
	c.PaymentSecret = []byte(r.secret("SECKILL_PAYMENT_SECRET", r.devOr(DevPaymentSecret)))
	c.TokenKey = []byte(r.secret("SECKILL_TOKEN_KEY", r.devOr(DevTokenKey)))
	c.AdminJWTSecret = []byte(r.secret("SECKILL_ADMIN_JWT_SECRET", r.devOr(DevAdminJWTSecret)))
	c.AdminToken = r.secret("SECKILL_ADMIN_TOKEN", "")
	if bytes.Equal(c.AdminJWTSecret, c.JWTSecret) && len(c.JWTSecret) > 0 {
		r.fail(errors.New("SECKILL_ADMIN_JWT_SECRET must differ from SECKILL_JWT_SECRET"))
	}
	c.JWTSecretPrevious = []byte(r.secret("SECKILL_JWT_SECRET_PREVIOUS", ""))
	c.TokenKeyPrevious = []byte(r.secret("SECKILL_TOKEN_KEY_PREVIOUS", ""))
	c.JWKSURL, c.JWTIssuer, c.JWTAudience = r.get("SECKILL_JWKS_URL"), r.get("SECKILL_JWT_ISSUER"), r.get("SECKILL_JWT_AUDIENCE")
	c.JWTUserClaim = r.str("SECKILL_JWT_USER_CLAIM", "sub")
	c.JWTRoleClaim = r.str("SECKILL_JWT_ROLE_CLAIM", "role")
	c.TokenCacheSize = r.integer("SECKILL_TOKEN_CACHE_SIZE", 1<<17)
	if c.JWKSURL != "" && (c.JWTIssuer == "" || c.JWTAudience == "") {
		r.fail(errors.New("SECKILL_JWKS_URL needs SECKILL_JWT_ISSUER and SECKILL_JWT_AUDIENCE"))
	}
	r.operators(c)
	c.PaymentSecretPrevious = []byte(r.secret("SECKILL_PAYMENT_SECRET_PREVIOUS", ""))
	if !r.dev {
		for name, v := range map[string][]byte{"SECKILL_JWT_SECRET_PREVIOUS": c.JWTSecretPrevious, "SECKILL_PAYMENT_SECRET_PREVIOUS": c.PaymentSecretPrevious,
			"SECKILL_TOKEN_KEY_PREVIOUS": c.TokenKeyPrevious} {
			if len(v) > 0 && len(v) < 32 {
				r.fail(fmt.Errorf("%s must be empty or at least 32 bytes outside development mode", name))
			}
		}
	}
	if !r.dev {
		r.refusePublished(c)
		for _, sec := range []struct {
			name string
			v    []byte
			need Need
		}{{"SECKILL_JWT_SECRET", c.JWTSecret, NeedUserSigner}, {"SECKILL_ADMIN_JWT_SECRET", c.AdminJWTSecret, NeedAdminSigner},
			{"SECKILL_PAYMENT_SECRET", c.PaymentSecret, NeedPayment}, {"SECKILL_TOKEN_KEY", c.TokenKey, NeedTokenKey}} {
			if len(sec.v) < 32 && (need&sec.need != 0 || len(sec.v) > 0) {
				r.fail(fmt.Errorf("%s must be at least 32 bytes outside development mode", sec.name))
			}
		}
	}
}

// operators reads the operators' identity provider. Its issuer and
// audience are required in every mode: without them any token of the
// provider carrying the role would administer.
func (r *envReader) operators(c *Config) {
	c.AdminJWKSURL = r.get("SECKILL_ADMIN_JWKS_URL")
	c.AdminJWTIssuer, c.AdminJWTAudience = r.get("SECKILL_ADMIN_JWT_ISSUER"), r.get("SECKILL_ADMIN_JWT_AUDIENCE")
	c.AdminJWTRoleClaim = r.str("SECKILL_ADMIN_JWT_ROLE_CLAIM", "roles")
	c.AdminJWTRole = r.str("SECKILL_ADMIN_JWT_ROLE", "seckill-admin")
	if c.AdminJWKSURL == "" {
		return
	}
	if c.AdminJWTIssuer == "" || c.AdminJWTAudience == "" {
		r.fail(errors.New("SECKILL_ADMIN_JWKS_URL needs SECKILL_ADMIN_JWT_ISSUER and SECKILL_ADMIN_JWT_AUDIENCE"))
	}
}

// refusePublished refuses, outside development mode, a secret whose value
// is published (publishedValues) or a placeholder: with it anyone who reads
// the repository can mint admin tokens or sign payment webhooks. The error
// names the variable, never the value.
func (r *envReader) refusePublished(c *Config) {
	for _, sec := range []struct {
		name string
		v    string
	}{
		{"MYSQL_DSN", c.MySQLDSN}, {"MYSQL_READ_DSN", c.MySQLReadDSN}, {"REDIS_PASSWORD", c.RedisPassword}, {"REDIS_URL", c.RedisURL},
		{"REDIS_SENTINEL_PASSWORD", c.RedisSentinelPassword},
		{"SECKILL_JWT_SECRET", string(c.JWTSecret)}, {"SECKILL_ADMIN_JWT_SECRET", string(c.AdminJWTSecret)},
		{"SECKILL_PAYMENT_SECRET", string(c.PaymentSecret)}, {"SECKILL_TOKEN_KEY", string(c.TokenKey)},
		{"SECKILL_JWT_SECRET_PREVIOUS", string(c.JWTSecretPrevious)},
		{"SECKILL_PAYMENT_SECRET_PREVIOUS", string(c.PaymentSecretPrevious)},
		{"SECKILL_TOKEN_KEY_PREVIOUS", string(c.TokenKeyPrevious)},
	} {
		if published(sec.v) {
			r.fail(fmt.Errorf("%s holds a published value (a development default or a template's %s placeholder) "+
				"outside development mode: set a secret of your own", sec.name, placeholderMark))
		}
	}
}

// published reports whether v is a value anyone can read in seckill's
// sources: a development default, a value of the deployment's secrets
// template, or anything holding its placeholder mark.
func published(v string) bool {
	if v == "" {
		return false
	}
	return strings.Contains(strings.ToUpper(v), placeholderMark) || slices.Contains(publishedValues, v)
}

// limits: token buckets and the trusted addresses.
func (r *envReader) limits(c *Config) {
	c.GlobalRPS = r.num("SECKILL_GLOBAL_RPS", 200000)
	c.GlobalBurst = r.integer("SECKILL_GLOBAL_BURST", 20000)
	c.PerAddrRPS = r.num("SECKILL_PER_ADDR_RPS", 50)
	c.PerAddrBurst = r.integer("SECKILL_PER_ADDR_BURST", 100)
	c.PerUserRPS = r.num("SECKILL_PER_USER_RPS", 5)
	c.PerUserBurst = r.integer("SECKILL_PER_USER_BURST", 10)
	c.ReadRPS = r.num("SECKILL_READ_RPS", 50)
	c.ReadBurst = r.integer("SECKILL_READ_BURST", 100)
	c.ReadPerUserRPS = r.num("SECKILL_READ_PER_USER_RPS", 10)
	c.ReadPerUserBurst = r.integer("SECKILL_READ_PER_USER_BURST", 20)
	trustedDefault := ""
	if r.dev {
		trustedDefault = "127.0.0.0/8,::1/128"
	}
	c.TrustedAddrs = r.prefixes("SECKILL_TRUSTED_ADDRS", trustedDefault)
	c.TrustedProxies = r.prefixes("SECKILL_TRUSTED_PROXIES", "")
	c.ProxyHeader = r.str("SECKILL_PROXY_HEADER", "X-Forwarded-For")
	corsDefault := ""
	if r.dev {
		corsDefault = "*"
	}
	c.CORSOrigins = splitList(r.str("SECKILL_CORS_ORIGINS", corsDefault))
}

// Degraded are the degraded mode's settings, which package degraded is
// configured with: when a sale leaves Redis for the database path, how
// much that path takes, and when the sale comes back.
type Degraded struct {
	// FallbackRPS is the database path's rate per instance while a sale
	// is in database mode (0: unlimited).
	FallbackRPS float64
	// FallbackInFlight bounds the database path's reservations in flight
	// per instance; a reservation beyond it is refused at once (429). Its
	// default is what FallbackRPS keeps in flight at 50 ms a reservation
	// (at least 16): fewer slots would refuse what the rate allows.
	FallbackInFlight int
	// ModeMinDwell is the least time a sale stays in a mode (Redis or
	// database) before it changes again; RedisHealthyFor is how long Redis
	// must have answered before a sale goes back to it.
	ModeMinDwell    time.Duration
	RedisHealthyFor time.Duration
}

// degraded: the degraded mode's settings.
func (r *envReader) degraded(c *Config) {
	c.FallbackRPS = r.num("SECKILL_FALLBACK_RPS", 500)
	c.FallbackInFlight = max(r.integer("SECKILL_FALLBACK_IN_FLIGHT", fallbackInFlightFor(c.FallbackRPS)), 1)
	c.ModeMinDwell = r.dur("SECKILL_MODE_MIN_DWELL", 5*time.Second)
	c.RedisHealthyFor = r.dur("SECKILL_REDIS_HEALTHY_FOR", 3*time.Second)
}

// edge: timeouts, connection caps, queues.
func (r *envReader) edge(c *Config) {
	c.RedisTimeout = r.dur("SECKILL_REDIS_TIMEOUT", 250*time.Millisecond)
	c.ClockSkew = r.dur("SECKILL_CLOCK_SKEW", 500*time.Millisecond)
	c.MaxConns = r.integer("SECKILL_MAX_CONNS", 0)
	c.MaxConnsPerAddr = r.integer("SECKILL_MAX_CONNS_PER_ADDR", 256)
	c.IdleTimeout = r.dur("SECKILL_IDLE_TIMEOUT", 60*time.Second)
	c.HeaderTimeout = r.dur("SECKILL_HEADER_TIMEOUT", 5*time.Second)
	c.BodyTimeout = r.dur("SECKILL_BODY_TIMEOUT", 10*time.Second)
	c.StarterQueue = r.integer("SECKILL_STARTER_QUEUE", 4096)
	c.OpeningPool = r.optDur("SECKILL_OPENING_POOL", 2*time.Second)
	c.OpeningGrace = r.dur("SECKILL_OPENING_GRACE", 5*time.Second)
	c.ShutdownTimeout = r.dur("SECKILL_SHUTDOWN_TIMEOUT", 10*time.Second)
	// No load balancer watches a development instance's /readyz.
	delay := 5 * time.Second
	if r.dev {
		delay = 0
	}
	c.ShutdownDelay = r.optDur("SECKILL_SHUTDOWN_DELAY", delay)
}

// process: logging, instance names, the worker, tracing.
func (r *envReader) process(c *Config) {
	host, _ := os.Hostname()
	if err := c.LogLevel.UnmarshalText([]byte(r.str("LOG_LEVEL", "info"))); err != nil {
		r.fail(fmt.Errorf("LOG_LEVEL: %w", err))
	}
	c.Instance = r.str("SECKILL_INSTANCE", fmt.Sprintf("%s-%d", host, os.Getpid()))
	c.RelayConsumer = r.str("SECKILL_RELAY_CONSUMER", c.Instance)
	c.RelayMaxDelivery = int64(r.integer("SECKILL_RELAY_MAX_DELIVERY", 10))
	c.RelayMinIdle = r.dur("SECKILL_RELAY_MIN_IDLE", 30*time.Second)
	c.RelayDeadAfter = r.dur("SECKILL_RELAY_DEAD_AFTER", 10*time.Minute)
	c.WorkerMetricsAddr = r.str("WORKER_METRICS_ADDR", "127.0.0.1:9091")
	if c.WorkerGOGC = r.integer("SECKILL_WORKER_GOGC", 400); r.get("GOGC") != "" {
		c.WorkerGOGC = 0
	}
	if c.WorkerStickyCache = r.integer("SECKILL_WORKER_STICKY_CACHE", 2000); c.WorkerStickyCache < 1 {
		r.fail(fmt.Errorf("SECKILL_WORKER_STICKY_CACHE: at least 1, not %d", c.WorkerStickyCache))
	}
	if c.ReconcileConcurrency = r.integer("SECKILL_RECONCILE_CONCURRENCY", 2); c.ReconcileConcurrency < 1 {
		r.fail(fmt.Errorf("SECKILL_RECONCILE_CONCURRENCY: at least 1, not %d", c.ReconcileConcurrency))
	}
	c.FaultExitAfterReserve = r.dev && r.get("SECKILL_FAULT_EXIT_AFTER_RESERVE") == "1"
	c.SaleSweep = r.switchOn("SECKILL_SALE_SWEEP", true)
	c.APIStartsRedisOrders = r.switchOn("SECKILL_API_STARTS_REDIS_ORDERS", false)
	if r.dev {
		c.PprofAddr = r.get("SECKILL_PPROF_ADDR")
	}
	c.FaultFailAfterCommit = r.dev && r.get("SECKILL_FAULT_FAIL_AFTER_COMMIT") == "1"
	// Traces follow OpenTelemetry's own variables: on when an OTLP endpoint
	// is named, off when unset (benchmarks), OTEL_SDK_DISABLED=true or
	// OTEL_TRACES_EXPORTER=none. The exporter reads the rest itself
	// (headers, OTEL_SERVICE_NAME...).
	c.TracesProtocol = r.str("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", r.str("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"))
	c.Tracing = (r.get("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || r.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") &&
		r.get("OTEL_SDK_DISABLED") != "true" && r.str("OTEL_TRACES_EXPORTER", "otlp") == "otlp"
	if c.Tracing && c.TracesProtocol != "grpc" && c.TracesProtocol != "http/protobuf" {
		r.fail(fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: grpc or http/protobuf, not %q", c.TracesProtocol))
	}
	// With OTEL_TRACES_SAMPLER set the SDK reads both variables itself.
	if r.get("OTEL_TRACES_SAMPLER") == "" {
		c.TraceRatio = r.num("OTEL_TRACES_SAMPLER_ARG", 0.1)
		if c.TraceRatio < 0 || c.TraceRatio > 1 {
			r.fail(fmt.Errorf("OTEL_TRACES_SAMPLER_ARG: a ratio from 0 to 1, not %v", c.TraceRatio))
		}
	}
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

// fallbackInFlightFor is SECKILL_FALLBACK_IN_FLIGHT's default: the
// database path's reservations in flight at rps a second and 50 ms each,
// at least 16. A request holds its slot for its whole reservation, so
// fewer slots would refuse "saturated" while the rate still had tokens.
func fallbackInFlightFor(rps float64) int {
	return max(16, int(math.Ceil(rps*0.05)))
}
