package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// startLimitedAPI runs `seckill api` under `ulimit -n nofile`.
func startLimitedAPI(t *testing.T, nofile int, env map[string]string) *testenv.API {
	t.Helper()
	addr := testenv.FreeAddr(t)
	e := testenv.ProcEnv(t, "edge-"+fmt.Sprint(time.Now().UnixNano()), env)
	e["API_ADDR"] = addr
	p := testenv.StartCommand(t, "api", "bash", e, "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" api`, nofile), testenv.MustBinary(t))
	a := &testenv.API{Proc: p, URL: "http://" + addr}
	a.WaitHealthy(t)
	return a
}

// flood opens n connections and holds them (sending nothing) until the
// returned function closes them.
func flood(t *testing.T, addr string, n int) func() {
	t.Helper()
	var conns []net.Conn
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			continue // the kernel backlog may be full: that is the flood too
		}
		conns = append(conns, c)
	}
	require.NotEmpty(t, conns)
	return func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}
}

// metric reads one sample of the API's /metrics; 0 when absent.
func metric(t *testing.T, url, sample string) float64 {
	t.Helper()
	resp, err := httpClient.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return v
}

// serves checks that a fresh client gets its answers: liveness, and
// readiness, which needs a database connection (a new descriptor).
func serves(t *testing.T, a *testenv.API) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	require.Eventually(t, func() bool {
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := client.Get(a.URL + path)
			if err != nil {
				return false
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return false
			}
		}
		return true
	}, 15*time.Second, 100*time.Millisecond)
}

// TestAPISurvivesDescriptorExhaustion runs the real binary with 64 file
// descriptors and floods it with more connections than that.
func TestAPISurvivesDescriptorExhaustion(t *testing.T) {
	const nofile, n = 64, 300

	t.Run("accept errors back off", func(t *testing.T) {
		// A connection cap above the descriptor limit: accept meets EMFILE.
		a := startLimitedAPI(t, nofile, map[string]string{"SECKILL_MAX_CONNS": "100000", "SECKILL_MAX_CONNS_PER_ADDR": "0"})
		release := flood(t, strings.TrimPrefix(a.URL, "http://"), n)
		time.Sleep(time.Second)
		select {
		case <-a.Done():
			t.Fatalf("the API exited under the flood:\n%s", a.Log())
		default:
		}
		release()
		serves(t, a)
		require.Positive(t, metric(t, a.URL, "seckill_http_accept_errors_total"), "EMFILE was never met: the test proves nothing")
	})

	t.Run("the process cap closes what is over it", func(t *testing.T) {
		// The default cap stays below the descriptor limit.
		a := startLimitedAPI(t, nofile, map[string]string{"SECKILL_MAX_CONNS_PER_ADDR": "0"})
		release := flood(t, strings.TrimPrefix(a.URL, "http://"), n)
		time.Sleep(time.Second)
		release()
		serves(t, a)
		require.Positive(t, metric(t, a.URL, `seckill_http_connections_refused_total{cap="process"}`))
		require.Zero(t, metric(t, a.URL, "seckill_http_accept_errors_total"), "the cap should keep accept from running out of descriptors")
	})
}
