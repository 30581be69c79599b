package api

import (
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// Once the instance drains, /readyz answers 503 naming shutdown, and every answer, the routes', the errors' and the
// transport's, closes its connection while still being served.
func TestDrainFailsReadinessAndClosesConnections(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(4)
	salePath := "/api/v1/sales/" + strconv.FormatInt(sale.ID, 10)
	status, _, closed := h.doClose(t, "GET", "/readyz")
	require.Equal(t, 200, status)
	require.False(t, closed, "a ready instance keeps its connections")

	h.server.Drain()
	status, body, closed := h.doClose(t, "GET", "/readyz")
	require.Equal(t, 503, status)
	require.JSONEq(t, `{"status":"unavailable","missing":["shutdown"]}`, body)
	require.True(t, closed, "/readyz: Connection: close")
	for _, c := range []struct {
		method, path string
		status       int
	}{{"GET", "/healthz", 200}, {"GET", salePath, 200}, {"GET", "/no/such/route", 404}, {"BREW", "/healthz", 501}} {
		status, _, closed := h.doClose(t, c.method, c.path)
		require.Equal(t, c.status, status, "%s %s", c.method, c.path)
		require.True(t, closed, "%s %s: Connection: close", c.method, c.path)
	}
	require.Equal(t, 202, h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), ""), "request-drain-1").Status)
}

// doClose sends a request without a body and reports the answer's status,
// its body and whether it closed the connection (Go's client takes the
// Connection header out of the answer).
func (h *harness) doClose(t *testing.T, method, path string) (int, string, bool) {
	t.Helper()
	req, err := http.NewRequest(method, h.base+path, nil)
	require.NoError(t, err)
	resp, err := h.http.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Close
}
