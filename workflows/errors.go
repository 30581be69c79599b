package workflows

import (
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/temporalgateway"
)

// A business refusal crosses Temporal as a non-retryable application error
// whose type is its domain code (domain.E*): the activities refuse that way
// (activities.classify maps the store's refusals to codes), the order
// workflow's update handlers too (reject), and every reader takes the code
// back with temporalgateway.RefusalCode. The API answers the code through its one status
// map (api/errors.go); nothing reads a message.

// reject is an update handler's or validator's refusal: its type is the
// domain code. Its message is the domain error's text, which begins with
// the code: API processes of the previous release matched that prefix
// during a deploy; this release reads only the type.
func reject(code, format string, args ...any) error {
	e := domain.Errorf(code, format, args...)
	return temporal.NewNonRetryableApplicationError(e.Error(), code, nil)
}

// refusal reports whether err is the refusal code (a failure of an activity
// recorded under either name of the code).
func refusal(err error, code string) bool {
	return err != nil && temporalgateway.RefusalCode(err) == code
}
