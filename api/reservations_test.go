package api

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/domain"
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
