package api

import (
	"context"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
)

// TestOpenAPIIsValid loads api/openapi.yaml with kin-openapi and validates
// it against the OpenAPI 3 rules; it also checks that every error code the
// API can send is in the Error schema, every operation documents the
// transport answers and every operation with a body documents 415.
func TestOpenAPIIsValid(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openAPI)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))

	codes := doc.Components.Schemas["Error"].Value.Properties["error"].Value.Properties["code"].Value.Enum
	for _, c := range []string{domain.EInvalid, domain.EUnauthorized, domain.EForbidden, domain.ENotFound,
		domain.EMethodNotAllowed, domain.ETooLarge, domain.ESoldOut, domain.EAlreadyPurchased, domain.ESaleNotStarted,
		domain.ESaleEnded, domain.ESalePaused, domain.EBlacklisted, domain.ERateLimited, domain.EUnavailable,
		domain.ENotPayable, domain.ENotCancellable, domain.EAmountMismatch, domain.EAlreadyLive, domain.EInsufficient,
		domain.EConflict, domain.EInternal, domain.EUnsupportedMediaType, domain.EHeadersTooLarge,
		domain.ENotImplemented, domain.ERequestTimeout} {
		require.True(t, slices.Contains(codes, any(c)), "error code %s missing from the Error schema", c)
		if c != domain.EInternal {
			require.NotEqual(t, 500, statusOf(c), "code %s has no status", c)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for _, status := range []int{408, 431} {
				require.NotNil(t, op.Responses.Status(status), "%s %s does not document %d", method, path, status)
			}
			if op.RequestBody != nil {
				require.NotNil(t, op.Responses.Status(415), "%s %s takes a body but does not document 415", method, path)
			}
		}
	}
}
