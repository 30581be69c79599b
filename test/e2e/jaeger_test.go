//go:build jaeger

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// jaegerTrace is the part of Jaeger's query API answer the test reads.
type jaegerTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		OperationName string `json:"operationName"`
		ProcessID     string `json:"processID"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// TestJaegerTrace runs the Jaeger `task up` runs (SECKILL_JAEGER_BIN,
// jaeger-dev/config.yaml) and the real API and worker exporting to it over
// OTLP, makes one reservation and reads its trace back through Jaeger's
// query API: one trace, both services, the request, the script, the start
// and the activities. Outside CI: go tool task test:jaeger.
func TestJaegerTrace(t *testing.T) {
	otlp, queryURL := startJaeger(t)
	env := testenv.ProcEnv(t, "e2e-jaeger-"+fmt.Sprint(time.Now().UnixNano()), map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + otlp,
	})
	api := testenv.MustAPI(t, "api", env)
	testenv.MustWorker(t, "worker", env)

	reservePending(t, api, "jaeger", 3*time.Minute, 120)
	// The batches reach Jaeger within a few seconds of the spans ending.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := httpClient.Get(queryURL + "/api/traces?service=seckill-api&operation=" +
			"%2Fapi%2Fv1%2Fsales%2F%3Asale_id%2Freservations&limit=20&lookback=1h")
		if !assert.NoError(c, err) {
			return
		}
		defer resp.Body.Close()
		var out struct {
			Data []jaegerTrace `json:"data"`
		}
		if !assert.NoError(c, json.NewDecoder(resp.Body).Decode(&out)) || !assert.NotEmpty(c, out.Data) {
			return
		}
		best := map[string]bool{}
		for _, tr := range out.Data {
			seen := map[string]bool{}
			for _, s := range tr.Spans {
				svc := tr.Processes[s.ProcessID].ServiceName
				seen["service "+svc] = true
				switch {
				case s.OperationName == "/api/v1/sales/:sale_id/reservations", s.OperationName == "evalsha":
					seen[s.OperationName] = true
				case strings.HasPrefix(s.OperationName, "StartWorkflow:"):
					seen["StartWorkflow"] = true
				case strings.HasPrefix(s.OperationName, "RunActivity:") && svc == "seckill-worker":
					seen["RunActivity in the worker"] = true
				}
			}
			if len(seen) > len(best) {
				best = seen
			}
		}
		for _, w := range []string{"service seckill-api", "service seckill-worker", "/api/v1/sales/:sale_id/reservations",
			"evalsha", "StartWorkflow", "RunActivity in the worker"} {
			assert.True(c, best[w], "no trace has %s (best: %v)", w, best)
		}
	}, 60*time.Second, time.Second)
}

// startJaeger runs the built Jaeger on free ports and returns its OTLP
// address and query URL once it answers.
func startJaeger(t *testing.T) (otlp, queryURL string) {
	bin := os.Getenv("SECKILL_JAEGER_BIN")
	require.NotEmpty(t, bin, "SECKILL_JAEGER_BIN: run through scripts/test-jaeger.sh")
	conf := filepath.Join(testenv.RepoRoot(), "jaeger-dev", "config.yaml")
	var query, grpc string
	otlp, query, grpc = testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	j := testenv.StartCommand(t, "jaeger", bin, map[string]string{
		"JAEGER_OTLP_ADDR": otlp, "JAEGER_QUERY_ADDR": query, "JAEGER_QUERY_GRPC_ADDR": grpc,
	}, "--config", conf)
	queryURL = "http://" + query
	j.WaitReady(t, 60*time.Second, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, queryURL+"/api/services", nil)
		if err != nil {
			return err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("jaeger answered %d", resp.StatusCode)
		}
		return nil
	})
	return otlp, queryURL
}
