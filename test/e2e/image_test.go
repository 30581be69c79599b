//go:build image

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// TestImageReservation drives the API and worker running as containers of
// the Containerfile's image in production mode (scripts/test-image.sh
// starts them with published ports and sets the URLs and the secrets the
// tokens are signed with; go tool task test:image): a sale, a reservation
// that the worker in its container turns into a PENDING_PAYMENT order, a
// payment, and both processes' metrics.
func TestImageReservation(t *testing.T) {
	api, metrics := os.Getenv("SECKILL_IMAGE_API_URL"), os.Getenv("SECKILL_IMAGE_WORKER_METRICS_URL")
	require.NotEmpty(t, api, "SECKILL_IMAGE_API_URL: run through scripts/test-image.sh")
	require.NotEmpty(t, metrics, "SECKILL_IMAGE_WORKER_METRICS_URL: run through scripts/test-image.sh")
	userSecret, adminSecret := []byte(os.Getenv("SECKILL_IMAGE_JWT_SECRET")), []byte(os.Getenv("SECKILL_IMAGE_ADMIN_JWT_SECRET"))
	require.NotEmpty(t, userSecret, "SECKILL_IMAGE_JWT_SECRET: run through scripts/test-image.sh")
	call := func(t *testing.T, method, url string, user int64, body any) (int, map[string]any) {
		t.Helper()
		secret, role := userSecret, authtoken.RoleUser
		if user == -1 {
			secret, role, user = adminSecret, authtoken.RoleAdmin, 1
		}
		tok, err := authtoken.Mint(secret, user, role, time.Hour)
		require.NoError(t, err)
		code, out, err := testenv.DoWithToken(method, url, tok, body)
		require.NoError(t, err)
		return code, out
	}
	// A development token is refused: no development defaults here.
	code, _ := testenv.MustDo(t, "GET", api+"/api/v1/me/reservations", testenv.UniqueUser(), nil)
	require.Equal(t, http.StatusUnauthorized, code)

	now := time.Now().UTC()
	code, sale := call(t, "POST", api+"/admin/v1/sales", -1, map[string]any{
		"goods_id": 1, "title": "image", "price_cents": 500, "stock": 2, "buckets": 2,
		"starts_at": now.Add(-time.Minute).Format(time.RFC3339), "ends_at": now.Add(3 * time.Minute).Format(time.RFC3339),
		"payment_window_seconds": 120,
	})
	require.Equal(t, http.StatusCreated, code, "%v", sale)
	saleID := int64(sale["sale_id"].(float64))
	code, body := call(t, "POST", fmt.Sprintf("%s/admin/v1/sales/%d/warmup", api, saleID), -1, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)

	user := testenv.UniqueUser()
	code, body = call(t, "POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", api, saleID), user, map[string]any{"request_id": "image-request-1"})
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	token := body["token"].(string)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := call(t, "GET", api+"/api/v1/reservations/"+token, user, nil)
		assert.Equal(c, http.StatusOK, code)
		assert.Equal(c, "PENDING_PAYMENT", body["status"])
	}, 60*time.Second, 250*time.Millisecond)
	code, body = call(t, "POST", api+"/api/v1/reservations/"+token+"/payment", user, map[string]any{"payment_ref": "image-pay-1"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "PAID", body["status"])

	for url, want := range map[string][]string{
		api + "/metrics": {"seckill_http_request_duration_seconds_bucket", "temporal_request_total"},
		metrics:          {"seckill_redis_script_duration_seconds_bucket", "temporal_activity_execution_latency_seconds_bucket"},
	} {
		resp, err := httpClient.Get(url)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		for _, w := range want {
			assert.True(t, strings.Contains(string(b), w), "%s lacks %s", url, w)
		}
	}
}
