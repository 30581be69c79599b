package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
)

// An update's refusal is read from its application error type, the domain
// code, or the type name a worker of the previous release writes; a
// message that merely begins with a code is no refusal.
func TestUpdateErrorReadsTheRefusalType(t *testing.T) {
	s := &server{logger: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"code", temporal.NewNonRetryableApplicationError("not_payable: reservation is PAID", domain.ENotPayable, nil), domain.ENotPayable},
		{"legacy type", temporal.NewNonRetryableApplicationError("not_payable: reservation is PAID", "NotPayable", nil), domain.ENotPayable},
		{"cancel code", temporal.NewNonRetryableApplicationError("x", domain.ENotCancellable, nil), domain.ENotCancellable},
		{"cancel legacy", temporal.NewNonRetryableApplicationError("x", "NotCancellable", nil), domain.ENotCancellable},
		{"message prefix only", temporal.NewApplicationError("not_payable: looks like one", "wrapError"), domain.EUnavailable},
		{"outage", errors.New("context deadline exceeded"), domain.EUnavailable},
	} {
		if got := domain.ErrorCode(s.updateError(ctx, "1-x", tc.err)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if err := s.updateError(ctx, "1-x", serviceerror.NewNotFound("gone")); !errors.Is(err, errWorkflowClosed) {
		t.Errorf("not found: %v", err)
	}
}

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
