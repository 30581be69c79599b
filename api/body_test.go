package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/strictjson"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// TestStrictBodies: keys match exactly and once, and only application/json
// is read, on every route that takes a body; nothing changes on a refusal.
func TestStrictBodies(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(5)
	res := "/api/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/reservations"
	user := h.MustToken(testenv.UniqueUser(), "")
	stockBefore := h.redisInt("{sale:" + strconv.FormatInt(sale.ID, 10) + "}:stock")

	send := func(path, token, contentType, body string) response {
		req, err := http.NewRequest("POST", h.base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := h.http.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return response{Status: resp.StatusCode, Header: resp.Header, Body: buf.Bytes()}
	}
	cases := []struct {
		name, path, token, ct, body string
		status                      int
		code                        string
	}{
		{"miscased key", res, user, "application/json", `{"REQUEST_ID":"abcdefgh"}`, 400, domain.EInvalid},
		{"key case differs once", res, user, "application/json", `{"Request_id":"abcdefgh"}`, 400, domain.EInvalid},
		{"duplicate key", res, user, "application/json", `{"request_id":"abcdefgh","request_id":"abcdefgi"}`, 400, domain.EInvalid},
		{"duplicate quantity", res, user, "application/json", `{"request_id":"abcdefgh","quantity":1,"quantity":1}`, 400, domain.EInvalid},
		{"text/plain", res, user, "text/plain", `{"request_id":"abcdefgh"}`, 415, domain.EUnsupportedMediaType},
		{"no content type", res, user, "", `{"request_id":"abcdefgh"}`, 415, domain.EUnsupportedMediaType},
		{"json look-alike", res, user, "application/jsonx", `{"request_id":"abcdefgh"}`, 415, domain.EUnsupportedMediaType},
		{"payment miscased", "/api/v1/reservations/x/payment", user, "application/json", `{"Payment_Ref":"p1"}`, 404, domain.ENotFound},
		{"admin miscased", "/admin/v1/sales", h.admin, "application/json", `{"Goods_ID":1}`, 400, domain.EInvalid},
		{"admin duplicate", "/admin/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/stock", h.admin, "application/json", `{"delta":1,"delta":-1}`, 400, domain.EInvalid},
		{"admin text/plain", "/admin/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/stock", h.admin, "text/plain", `{"delta":1}`, 415, domain.EUnsupportedMediaType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := send(tc.path, tc.token, tc.ct, tc.body)
			require.Equal(t, tc.status, r.Status, "body %s", r.Body)
			require.Equal(t, tc.code, r.errCode(t))
			require.NotContains(t, string(r.Body), "REQUEST_ID")
		})
	}
	require.Equal(t, stockBefore, h.redisInt("{sale:"+strconv.FormatInt(sale.ID, 10)+"}:stock"), "a refused body changed the stock")

	r := send(res, user, "application/json; charset=utf-8", `{"request_id":"strict-ok-01"}`)
	require.Equal(t, 202, r.Status, "parameters are allowed: %s", r.Body)
	r = send(res, user, "Application/JSON;charset=UTF-8", `{"quantity":1,"request_id":"strict-ok-01"}`)
	require.Equal(t, 202, r.Status, "%s", r.Body)
}

// topKeys lists the top-level keys of a JSON object as written, repeats
// included (a walk of its own, independent of strictjson's).
func topKeys(t *testing.T, body []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m))
	dec := json.NewDecoder(bytes.NewReader(body))
	_, err := dec.Token()
	require.NoError(t, err)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, tok.(string))
		var v json.RawMessage
		require.NoError(t, dec.Decode(&v))
	}
	return keys
}

// fuzzStrict: whatever the body, the strict decoder answers invalid_request
// or accepts an object whose keys are the type's, exactly, each once; what
// it accepts survives a round trip unchanged.
func fuzzStrict[T any](f *testing.F, seeds ...string) {
	for _, s := range append(seeds, ``, `[]`, `null`, `{}`, `{"a":1}`, `{} {}`, `"x"`) {
		f.Add([]byte(s))
	}
	allowed := strictjson.Fields(reflect.TypeFor[T]())
	f.Fuzz(func(t *testing.T, body []byte) {
		var v T
		if err := strictjson.Decode(body, &v); err != nil {
			if domain.ErrorCode(err) != domain.EInvalid {
				t.Fatalf("error code %q for %q", domain.ErrorCode(err), body)
			}
			return
		}
		seen := map[string]bool{}
		for _, k := range topKeys(t, body) {
			if !slices.Contains(allowed, k) {
				t.Fatalf("accepted key %q (allowed %v) in %q", k, allowed, body)
			}
			if seen[k] {
				t.Fatalf("accepted repeated key %q in %q", k, body)
			}
			seen[k] = true
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("re-encode %q: %v", body, err)
		}
		var w T
		if err := strictjson.Decode(again, &w); err != nil || !reflect.DeepEqual(v, w) {
			t.Fatalf("round trip of %q: %v, %+v vs %+v", body, err, v, w)
		}
	})
}

func FuzzPaymentBody(f *testing.F) {
	fuzzStrict[payRequest](f, `{"payment_ref":"p1"}`, `{"PAYMENT_REF":"p1"}`, `{"payment_ref":"a","payment_ref":"b"}`)
}

func FuzzWebhookBody(f *testing.F) {
	fuzzStrict[webhookRequest](f, `{"token":"1-00","payment_ref":"p","amount_cents":0}`, `{"Token":"x"}`, `{"amount_cents":1,"amount_cents":2}`)
}

func FuzzCreateSaleBody(f *testing.F) {
	fuzzStrict[domain.SaleSpec](f, `{"goods_id":1,"title":"t","price_cents":0,"stock":1,"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-02T00:00:00Z"}`, `{"Title":"x"}`, `{"stock":1,"stock":2}`)
}

func FuzzStockBody(f *testing.F) {
	fuzzStrict[domain.StockChange](f, `{"delta":1}`, `{"delta":-1}`, `{"DELTA":1}`, `{"delta":1,"delta":2}`, `{"delta":2147483648}`)
}

func FuzzCancelBody(f *testing.F) { fuzzStrict[struct{}](f, `{"x":1}`) }

func FuzzDevLoginBody(f *testing.F) {
	fuzzStrict[devLoginRequest](f, `{"user_id":1}`, `{"USER_ID":1}`, `{"user_id":1,"user_id":2}`)
}
