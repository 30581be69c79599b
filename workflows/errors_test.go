package workflows

import (
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/temporalgateway"
)

func TestRefusalCodeReadsCodesAndLegacyTypes(t *testing.T) {
	for typ, want := range map[string]string{
		domain.ESoldOut:          domain.ESoldOut,
		domain.EAlreadyPurchased: domain.EAlreadyPurchased,
		domain.ENotPayable:       domain.ENotPayable,
		domain.ENotCancellable:   domain.ENotCancellable,
		domain.ENotFound:         domain.ENotFound,
		"NoStock":                domain.ESoldOut,
		"AlreadyPurchased":       domain.EAlreadyPurchased,
		"NotPayable":             domain.ENotPayable,
		"NotCancellable":         domain.ENotCancellable,
		"SaleMissing":            domain.ENotFound,
		"wrapError":              "",
		domain.EInternal:         "",
	} {
		err := fmt.Errorf("activity: %w", temporal.NewNonRetryableApplicationError("msg", typ, nil))
		if got := temporalgateway.RefusalCode(err); got != want {
			t.Errorf("type %q: %q, want %q", typ, got, want)
		}
	}
	if temporalgateway.RefusalCode(errors.New("not_payable: a message is no refusal")) != "" || temporalgateway.RefusalCode(nil) != "" {
		t.Error("a plain error read as a refusal")
	}
	rej := reject(domain.ENotPayable, "reservation is %s", domain.StatusPaid)
	var ae *temporal.ApplicationError
	if !errors.As(rej, &ae) || ae.Type() != domain.ENotPayable || !ae.NonRetryable() || temporalgateway.RefusalCode(rej) != domain.ENotPayable {
		t.Errorf("reject: %v", rej)
	}
}
