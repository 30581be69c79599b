package api

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/altcha"
)

// TestOpenAPISaleRulesAreTheDomains holds the defaults and bounds that
// api/openapi.yaml documents for the create-sale and stock bodies to the
// domain's constants, which the API enforces, so the two cannot drift.
func TestOpenAPISaleRulesAreTheDomains(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openAPI)
	require.NoError(t, err)

	create := bodyProperties(t, doc, "/admin/v1/sales")
	for field, want := range map[string][3]any{ // minimum, maximum, default; nil: none documented
		"goods_id":               {int64(1), nil, nil},
		"price_cents":            {int64(0), nil, nil},
		"stock":                  {int64(domain.MinStock), int64(domain.MaxStock), nil},
		"buckets":                {int64(domain.MinBuckets), int64(domain.MaxBuckets), int64(domain.DefaultBuckets)},
		"payment_window_seconds": {int64(domain.MinPaymentWindowSeconds), int64(domain.MaxPaymentWindowSeconds), int64(domain.DefaultPaymentWindowSeconds)},
		"challenge_difficulty":   {int64(0), int64(domain.MaxChallengeDifficulty), int64(0)},
	} {
		s := create[field]
		require.NotNil(t, s, "create-sale body has no %s", field)
		got := [3]any{documented(s.Value.Min), documented(s.Value.Max), documentedDefault(t, s.Value.Default)}
		require.Equal(t, want, got, "%s: minimum, maximum, default", field)
	}
	title := create["title"].Value
	require.EqualValues(t, 1, title.MinLength)
	require.NotNil(t, title.MaxLength)
	require.EqualValues(t, domain.MaxTitleBytes, *title.MaxLength)
	require.Equal(t, []any{float64(domain.PerUserLimit)}, create["per_user_limit"].Value.Enum)
	// A difficulty the widget's solver refuses would make a sale unsolvable.
	require.LessOrEqual(t, int64(domain.MaxChallengeDifficulty), int64(altcha.MaxNumber))

	delta := bodyProperties(t, doc, "/admin/v1/sales/{sale_id}/stock")["delta"].Value
	require.Equal(t, [2]any{int64(-domain.MaxStock), int64(domain.MaxStock)}, [2]any{documented(delta.Min), documented(delta.Max)})
}

// bodyProperties answers the properties of the JSON body that path's POST
// takes.
func bodyProperties(t *testing.T, doc *openapi3.T, path string) openapi3.Schemas {
	t.Helper()
	item := doc.Paths.Value(path)
	require.NotNil(t, item, "no path %s", path)
	require.NotNil(t, item.Post, "no POST %s", path)
	require.NotNil(t, item.Post.RequestBody, "POST %s takes no body", path)
	media := item.Post.RequestBody.Value.Content.Get("application/json")
	require.NotNil(t, media, "POST %s takes no JSON body", path)
	return media.Schema.Value.Properties
}

// documented is a documented bound as an integer, nil when there is none.
func documented(bound *float64) any {
	if bound == nil {
		return nil
	}
	return int64(*bound)
}

// documentedDefault is a documented default as an integer, nil when there
// is none.
func documentedDefault(t *testing.T, v any) any {
	t.Helper()
	switch d := v.(type) {
	case nil:
		return nil
	case float64:
		return int64(d)
	case int:
		return int64(d)
	case int64:
		return d
	}
	require.Failf(t, "default is not a number", "%T %v", v, v)
	return nil
}

// TestConsoleSaleFormIsTheDomains holds the operator console's create-sale
// form (its inputs' bounds and prefilled defaults) to the domain's
// constants, so the form neither refuses a valid sale nor offers another
// default than the API's.
func TestConsoleSaleFormIsTheDomains(t *testing.T) {
	js, err := consoleWeb.ReadFile("console/console.js")
	require.NoError(t, err)
	inputs := map[string]map[string]string{}
	for _, m := range regexp.MustCompile(`input\("(f-[a-z]+)", \{([^}]*)\}\)`).FindAllStringSubmatch(string(js), -1) {
		attrs := map[string]string{}
		for _, a := range regexp.MustCompile(`(\w+): "([^"]*)"`).FindAllStringSubmatch(m[2], -1) {
			attrs[a[1]] = a[2]
		}
		inputs[m[1]] = attrs
	}
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	for id, want := range map[string]map[string]string{
		"f-title":     {"maxlength": itoa(domain.MaxTitleBytes)},
		"f-stock":     {"min": itoa(domain.MinStock), "max": itoa(domain.MaxStock)},
		"f-buckets":   {"min": itoa(domain.MinBuckets), "max": itoa(domain.MaxBuckets), "value": itoa(domain.DefaultBuckets)},
		"f-window":    {"min": itoa(domain.MinPaymentWindowSeconds), "max": itoa(domain.MaxPaymentWindowSeconds), "value": itoa(domain.DefaultPaymentWindowSeconds)},
		"f-challenge": {"min": "0", "max": itoa(domain.MaxChallengeDifficulty), "value": "0"},
	} {
		got, ok := inputs[id]
		require.True(t, ok, "the console's create-sale form has no input %s", id)
		for attr, v := range want {
			require.Equal(t, v, got[attr], "console input %s: %s", id, attr)
		}
	}
}
