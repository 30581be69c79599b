package temporalgateway

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/domain"
)

// A business refusal crosses Temporal as a non-retryable application error
// whose type is its domain code (domain.E*); RefusalCode takes the code
// back. Nothing reads a message.

// legacyErrorTypes are the application error types written before the
// domain codes were the types. Histories recorded before then carry them in
// their activity failures (testdata/order_failed*.json: a PlaceOrder that
// failed "NoStock"), and a worker of the previous release still writes them
// during a deploy, so RefusalCode keeps reading them: never remove an entry
// while such a history can replay (OrderWorkflow's retirement rule).
var legacyErrorTypes = map[string]string{
	"NoStock":          domain.ESoldOut,
	"AlreadyPurchased": domain.EAlreadyPurchased,
	"NotPayable":       domain.ENotPayable,
	"NotCancellable":   domain.ENotCancellable,
	"SaleMissing":      domain.ENotFound,
}

// refusalCodes are the domain codes activities and workflows refuse with.
var refusalCodes = map[string]bool{
	domain.ESoldOut:          true,
	domain.EAlreadyPurchased: true,
	domain.ENotPayable:       true,
	domain.ENotCancellable:   true,
	domain.ENotFound:         true,
	domain.EInvalid:          true,
}

// RefusalCode returns the domain code of the business refusal err carries
// (an activity's failure, an update's rejection), under its current or its
// legacy type name; "" when err is no refusal (an outage, a bug, nil).
func RefusalCode(err error) string {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		return ""
	}
	if code, ok := legacyErrorTypes[ae.Type()]; ok {
		return code
	}
	if refusalCodes[ae.Type()] {
		return ae.Type()
	}
	return ""
}
