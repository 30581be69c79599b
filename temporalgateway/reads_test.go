package temporalgateway

import (
	"errors"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/domain"
)

// An update's refusal is read from its application error type, the domain
// code, or the type name a worker of the previous release writes; a
// message that merely begins with a code is no refusal, and neither is an
// outage: both stay Temporal's errors.
func TestClassifyReadsTheRefusalType(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string // "" for Temporal's own failure
	}{
		{"code", temporal.NewNonRetryableApplicationError("not_payable: reservation is PAID", domain.ENotPayable, nil), domain.ENotPayable},
		{"legacy type", temporal.NewNonRetryableApplicationError("not_payable: reservation is PAID", "NotPayable", nil), domain.ENotPayable},
		{"cancel code", temporal.NewNonRetryableApplicationError("x", domain.ENotCancellable, nil), domain.ENotCancellable},
		{"cancel legacy", temporal.NewNonRetryableApplicationError("x", "NotCancellable", nil), domain.ENotCancellable},
		{"other refusal", temporal.NewNonRetryableApplicationError("x", domain.ESoldOut, nil), domain.ESoldOut},
		{"message prefix only", temporal.NewApplicationError("not_payable: looks like one", "wrapError"), ""},
		{"outage", errors.New("context deadline exceeded"), ""},
	} {
		err := classify("1-x", domain.UpdatePay, tc.err)
		var de *domain.Error
		isRefusal := errors.As(err, &de)
		switch {
		case tc.want == "" && (isRefusal || errors.Is(err, ErrClosed)):
			t.Errorf("%s: %v read as a refusal or a closed workflow", tc.name, err)
		case tc.want == "" && !errors.Is(err, tc.err):
			t.Errorf("%s: %v does not wrap Temporal's error", tc.name, err)
		case tc.want != "" && domain.ErrorCode(err) != tc.want:
			t.Errorf("%s: %s, want %s", tc.name, domain.ErrorCode(err), tc.want)
		}
	}
	for _, closed := range []error{serviceerror.NewNotFound("gone"), errors.New("workflow execution already completed")} {
		if err := classify("1-x", domain.UpdatePay, closed); !errors.Is(err, ErrClosed) {
			t.Errorf("%v: %v, want ErrClosed", closed, err)
		}
	}
}
