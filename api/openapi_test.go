package api

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/seckill/seckill/config"
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
		domain.ENotImplemented, domain.ERequestTimeout, domain.EChallengeRequired, domain.EChallengeFailed,
		domain.ENotEligible, domain.EAppealExists} {
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

// TestOpenAPILint holds api/openapi.yaml to rules kin-openapi's validation
// leaves open: strict YAML (a repeated key is an error, not a silent
// overwrite), an operationId on every operation, an example for every JSON
// body an operation takes or answers with (validated against its schema),
// and a format on every integer so that clients generate 64-bit ids.
func TestOpenAPILint(t *testing.T) {
	var strict map[string]any
	require.NoError(t, yaml.Unmarshal(openAPI, &strict), "api/openapi.yaml is not strict YAML")

	doc, err := openapi3.NewLoader().LoadFromData(openAPI)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background(), openapi3.EnableExamplesValidation()))

	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			require.NotEmpty(t, op.OperationID, "%s has no operationId", where)
			if op.RequestBody != nil {
				for mt, media := range op.RequestBody.Value.Content {
					require.True(t, hasExample(media), "%s: request body %s has no example", where, mt)
				}
			}
			for status, resp := range op.Responses.Map() {
				if status[0] != '2' {
					continue
				}
				for mt, media := range resp.Value.Content {
					if mt == "application/json" {
						require.True(t, hasExample(media), "%s: %s answer has no example", where, status)
					}
				}
			}
		}
	}
	lintIntegers(t, "", strict)
}

// hasExample reports whether a media type carries an example itself or
// through its schema.
func hasExample(m *openapi3.MediaType) bool {
	return m.Example != nil || len(m.Examples) > 0 || (m.Schema != nil && m.Schema.Value.Example != nil)
}

// lintIntegers walks the raw document: every schema of type integer names
// its format (int64 for ids and counts, int32 where the range is small).
func lintIntegers(t *testing.T, at string, node any) {
	t.Helper()
	switch n := node.(type) {
	case map[string]any:
		if n["type"] == "integer" {
			require.Contains(t, []any{"int32", "int64"}, n["format"], "integer at %s has no format", at)
		}
		for k, v := range n {
			lintIntegers(t, at+"/"+k, v)
		}
	case []any:
		for i, v := range n {
			lintIntegers(t, fmt.Sprintf("%s/%d", at, i), v)
		}
	}
}

// TestOpenAPITagsAndServers: every operation has one tag, declared in the
// document's tag list, and the server's URL is a variable with a default.
func TestOpenAPITagsAndServers(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openAPI)
	require.NoError(t, err)
	declared := map[string]bool{}
	for _, tag := range doc.Tags {
		require.NotEmpty(t, tag.Description, "tag %s has no description", tag.Name)
		declared[tag.Name] = true
	}
	used := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			require.Len(t, op.Tags, 1, "%s %s needs exactly one tag", method, path)
			require.True(t, declared[op.Tags[0]], "%s %s: tag %s is not declared", method, path, op.Tags[0])
			used[op.Tags[0]] = true
		}
	}
	require.Equal(t, declared, used, "every declared tag is used")
	require.Len(t, doc.Servers, 1)
	base := doc.Servers[0].Variables["base"]
	require.NotNil(t, base, "the server's URL is the variable base")
	require.Equal(t, "{base}", doc.Servers[0].URL)
	require.NotEmpty(t, base.Default)
}

// TestOpenAPIMatchesRoutes: every route the API registers (its public
// routes, the operators' and the development login) is an operation of
// api/openapi.yaml, and every operation there is routed.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) { c.Env = "dev"; c.AdminAddr = "" })
	doc, err := openapi3.NewLoader().LoadFromData(openAPI)
	require.NoError(t, err)
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	param := regexp.MustCompile(`:([a-z_]+)`)
	routed := map[string]bool{}
	for _, r := range h.server.App.GetRoutes(true) {
		if r.Method == fiber.MethodHead { // Fiber answers HEAD for every GET
			continue
		}
		routed[r.Method+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	for route := range routed {
		require.True(t, documented[route], "%s is routed but not in api/openapi.yaml", route)
	}
	for op := range documented {
		require.True(t, routed[op], "%s is in api/openapi.yaml but not routed", op)
	}
	require.Len(t, routed, 42, "the contract's 36 operations, the storefront's sales list and the operators' five beyond it: the sales list, one sale's view, the audit, the console's page and files")
}
