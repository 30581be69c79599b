package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// Payments and cancels have buckets of their own (issue: a loop of made-up
// tokens loaded the primary): beyond the per-user burst the answer is 429
// with Retry-After, before anything is read.
func TestPaymentsAndCancelsAreRateLimitedPerUser(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) { c.PerUserRPS, c.PerUserBurst = 1, 4 })
	jwt := h.MustToken(testenv.UniqueUser(), "")
	made := "1-" + strings.Repeat("ab", 16)
	codes := map[int]int{}
	var retry string
	for i := range 12 {
		path := "/api/v1/reservations/" + made + "/payment"
		body := `{"payment_ref":"made-up"}`
		if i%2 == 1 {
			path, body = "/api/v1/reservations/"+made+"/cancel", ""
		}
		r := h.do(http.MethodPost, path, jwt, body)
		codes[r.Status]++
		if r.Status == http.StatusTooManyRequests {
			retry = r.Header.Get("Retry-After")
		}
	}
	require.Equal(t, 4, codes[http.StatusNotFound], "the burst is answered: %v", codes)
	require.Equal(t, 8, codes[http.StatusTooManyRequests], "the rest is refused: %v", codes)
	require.NotEmpty(t, retry)
	// A reservation still goes through: its budget is its own.
	sale := h.MustWarmSale(2)
	require.Equal(t, http.StatusAccepted, h.reserve(sale.ID, jwt, "after-writes-1").Status)
}
