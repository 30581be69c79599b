package startup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// templateSecrets is deploy/k8s/base/secrets.env.example's KEY=VALUE lines,
// the values a deployment that forgot to replace them would run with.
func templateSecrets(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "k8s", "base", "secrets.env.example"))
	require.NoError(t, err)
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "secrets.env.example: %q is not KEY=VALUE", line)
		out[k] = v
	}
	require.GreaterOrEqual(t, len(out), 5, "the template's values")
	return out
}

// runSeckill runs the real binary with args in production mode (no
// SECKILL_ENV) with only env and the test services' addresses, and returns
// its exit code and its output. A process still running after a minute
// fails the test.
func runSeckill(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	bin := testenv.MustBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"REDIS_ADDR=" + testenv.RedisAddr(), "TEMPORAL_ADDRESS=" + testenv.TemporalAddress(),
		"API_ADDR=" + testenv.FreeAddr(t), "WORKER_METRICS_ADDR=" + testenv.FreeAddr(t)}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "seckill %s did not exit within a minute:\n%s", strings.Join(args, " "), out)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	require.NoError(t, err, "run seckill %s", strings.Join(args, " "))
	return 0, string(out)
}

// The API and the worker, started in production mode with the template's
// values, exit non-zero at once, naming every variable that holds one and
// printing none of the values.
func TestProductionRefusesTheTemplatesSecrets(t *testing.T) {
	secrets := templateSecrets(t)
	for _, command := range []string{"api", "worker"} {
		code, out := runSeckill(t, secrets, command)
		require.NotEqual(t, 0, code, "seckill %s started with the template's secrets:\n%s", command, out)
		require.Contains(t, out, "load configuration", "seckill %s failed reading its configuration", command)
		for name, value := range secrets {
			require.Contains(t, out, name+" holds a published value", "seckill %s names %s", command, name)
			require.NotContains(t, out, value, "seckill %s printed the value of %s", command, name)
		}
	}
}

// What is refused is the value, not the variable: a user token is minted
// with a secret of one's own, and refused with the template's or the
// development default, named and unprinted.
func TestProductionRefusesOnlyPublishedValues(t *testing.T) {
	const own = "a-user-token-secret-of-our-own-0123456789"
	code, out := runSeckill(t, map[string]string{"SECKILL_JWT_SECRET": own}, "token", "--user", "7")
	require.Equal(t, 0, code, "seckill token with a secret of its own:\n%s", out)
	require.Regexp(t, `^ey[\w-]+\.[\w-]+\.[\w-]+\s*$`, out, "a JWT")

	for _, published := range []string{templateSecrets(t)["SECKILL_JWT_SECRET"], "seckill-dev-secret"} {
		code, out = runSeckill(t, map[string]string{"SECKILL_JWT_SECRET": published}, "token", "--user", "7")
		require.Equal(t, 1, code, "seckill token with a published secret:\n%s", out)
		require.Contains(t, out, "SECKILL_JWT_SECRET holds a published value")
		require.NotContains(t, out, published)
	}
}

// The real API and worker each export seckill_build_info = 1 on /metrics,
// labelled with the version and commit `seckill version` prints.
func TestBothProcessesExportTheirBuild(t *testing.T) {
	code, out := runSeckill(t, nil, "version")
	require.Equal(t, 0, code, out)
	m := regexp.MustCompile(`^seckill (\S+) commit (\S+)`).FindStringSubmatch(out)
	require.NotNil(t, m, "version line %q", out)
	want := regexp.MustCompile(`(?m)^seckill_build_info\{commit="` + regexp.QuoteMeta(m[2]) +
		`",go_version="go[^"]+",version="` + regexp.QuoteMeta(m[1]) + `"\} 1$`)

	env := testenv.ProcEnv(t, fmt.Sprintf("startup-build-%d", time.Now().UnixNano()), nil)
	api := testenv.MustAPI(t, "api", env)
	worker := testenv.MustWorker(t, "worker", env)
	for name, url := range map[string]string{"api": api.URL + "/metrics", "worker": worker.MetricsURL} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err, "GET %s", url)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Regexp(t, want, string(body), "the %s's /metrics carries its build", name)
	}
}
