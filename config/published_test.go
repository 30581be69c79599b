package config

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
)

// exampleSecrets reads deploy/k8s/base/secrets.env.example, the template a
// deployment copies: its KEY=VALUE lines.
func exampleSecrets(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("../deploy/k8s/base/secrets.env.example")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("secrets.env.example: not KEY=VALUE: %q", line)
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 5 {
		t.Fatalf("secrets.env.example holds %d values", len(out))
	}
	return out
}

// refused loads a production environment with extra and returns the error,
// which must name name and must not hold value.
func refused(t *testing.T, name, value string, extra ...string) {
	t.Helper()
	_, err := load(productionEnv(extra...))
	if err == nil {
		t.Fatalf("production accepted a published %s", name)
	}
	if !strings.Contains(err.Error(), name+" holds a published value") {
		t.Errorf("the error does not name %s: %v", name, err)
	}
	if strings.Contains(err.Error(), value) {
		t.Errorf("the error reveals the value of %s: %v", name, err)
	}
}

// Every value of the deployment's secrets template is refused in
// production, each exactly (the list in config.go matches the file) and
// each by its variable's name, the value never printed.
func TestProductionRefusesTheTemplatesValues(t *testing.T) {
	for name, value := range exampleSecrets(t) {
		if !slices.Contains(publishedValues, value) {
			t.Errorf("publishedValues lacks the template's %s", name)
		}
		refused(t, name, value, name, value)
	}
}

// The development defaults are refused by name in production, whatever
// variable carries them, and accepted in development mode.
func TestProductionRefusesTheDevelopmentDefaults(t *testing.T) {
	for _, name := range []string{"SECKILL_JWT_SECRET", "SECKILL_ADMIN_JWT_SECRET", "SECKILL_PAYMENT_SECRET", "SECKILL_TOKEN_KEY",
		"SECKILL_JWT_SECRET_PREVIOUS", "SECKILL_TOKEN_KEY_PREVIOUS", "SECKILL_PAYMENT_SECRET_PREVIOUS"} {
		for _, v := range []string{DevJWTSecret, DevAdminJWTSecret, DevPaymentSecret, DevTokenKey} {
			refused(t, name, v, name, v)
		}
	}
	c := mustLoad(t, env("SECKILL_ENV", "dev"))
	if string(c.TokenKey) != DevTokenKey || string(c.AdminJWTSecret) != DevAdminJWTSecret {
		t.Fatalf("development mode lost its defaults: %q %q", c.TokenKey, c.AdminJWTSecret)
	}
	mustLoad(t, env("SECKILL_ENV", "dev", "SECKILL_JWT_SECRET", "CHANGE-ME-but-only-in-development-mode-32"))
}

// A value holding the placeholder mark, in any case and anywhere, is
// refused, in a password or a DSN too; a secret of one's own is not.
func TestProductionRefusesPlaceholders(t *testing.T) {
	const mark = "a-long-enough-secret-change-me-0123456789"
	for _, name := range []string{"SECKILL_JWT_SECRET", "SECKILL_TOKEN_KEY", "REDIS_PASSWORD"} {
		refused(t, name, mark, name, mark)
	}
	refused(t, "MYSQL_DSN", "app:Change-Me@tcp(db:3306)/seckill", "MYSQL_DSN", "app:Change-Me@tcp(db:3306)/seckill")
	refused(t, "REDIS_URL", "redis://:CHANGE-ME@r:6379/0", "REDIS_URL", "redis://:CHANGE-ME@r:6379/0")
	refused(t, "REDIS_SENTINEL_PASSWORD", "sentinel-change-me", "REDIS_SENTINELS", "s:26379", "REDIS_SENTINEL_MASTER", "m",
		"REDIS_SENTINEL_PASSWORD", "sentinel-change-me")
	mustLoad(t, productionEnv("REDIS_PASSWORD", "a-password-of-our-own", "MYSQL_DSN", "app:pw@tcp(db:3306)/seckill"))
}

// A secret read from a file (SECKILL_TOKEN_KEY_FILE) is held to the same
// rule.
func TestPublishedSecretFromAFileIsRefused(t *testing.T) {
	path := t.TempDir() + "/key"
	const v = "CHANGE-ME-reservation-token-key-of-32-bytes-or-more"
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	get := func(k string) string {
		switch k {
		case "SECKILL_TOKEN_KEY":
			return ""
		case "SECKILL_TOKEN_KEY_FILE":
			return path
		}
		return productionEnv()(k)
	}
	_, err := load(get)
	if err == nil || !strings.Contains(err.Error(), "SECKILL_TOKEN_KEY holds a published value") || strings.Contains(err.Error(), v) {
		t.Fatalf("a published token key from a file: %v", err)
	}
}
