package worker

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// The profiler is on the worker's metrics address in development mode
// only.
func TestMetricsServerProfilesOnlyWhenAsked(t *testing.T) {
	for _, profile := range []bool{true, false} {
		srv := httptest.NewServer(metricsServer(prometheus.NewRegistry(), profile).Handler)
		resp, err := http.Get(srv.URL + "/debug/pprof/")
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		want := http.StatusNotFound
		if profile {
			want = http.StatusOK
		}
		require.Equal(t, want, resp.StatusCode, "profile %v", profile)
		resp, err = http.Get(srv.URL + "/metrics")
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		srv.Close()
	}
}
