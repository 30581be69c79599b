package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
)

// fakeAdmin is an admin API that records each request and answers from a
// table of "METHOD path?query" to body.
type fakeAdmin struct {
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	route, auth, key, body string
}

func (f *fakeAdmin) serve(t *testing.T, answers map[string]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		route := r.Method + " " + r.URL.RequestURI()
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{route: route, auth: r.Header.Get("Authorization"), key: r.Header.Get("Idempotency-Key"), body: string(b)})
		f.mu.Unlock()
		body, ok := answers[route]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such sale"}}`)
			return
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (f *fakeAdmin) last() recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[len(f.reqs)-1]
}

const saleJSON = `{"sale_id":7,"title":"t","stock_total":5,"state":"live"}`

// Each subcommand calls its route with the flag's token and prints the
// answer as JSON lines.
func TestAdminSubcommandsCallTheAdminAPI(t *testing.T) {
	t.Setenv("SECKILL_ENV", "dev")
	f := &fakeAdmin{}
	srv := f.serve(t, map[string]string{
		"GET /api/v1/sales/7":                              saleJSON,
		"POST /admin/v1/sales/7/pause":                     saleJSON,
		"POST /admin/v1/sales/7/resume":                    saleJSON,
		"POST /admin/v1/sales/7/stop":                      saleJSON,
		"POST /admin/v1/sales/7/stock":                     saleJSON,
		"POST /admin/v1/sales":                             saleJSON,
		"GET /admin/v1/sales/7/reconciliation?repair=true": `{"sale_id":7,"stock_total":5,"consistent":true}`,
		"GET /admin/v1/appeals?state=open":                 `{"appeals":[{"appeal_id":1}],"next_cursor":"c1"}`,
		"GET /admin/v1/appeals?cursor=c1&state=open":       `{"appeals":[{"appeal_id":2}],"next_cursor":""}`,
		"POST /admin/v1/appeals/2/resolve":                 `{"appeal_id":2,"state":"rejected"}`,
	})
	admin := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(append([]string{"admin", "--api", srv.URL, "--token", "op-token"}, args...), &out, &errOut)
		require.Equal(t, 0, code, "%v: %s", args, errOut.String())
		require.Equal(t, "Bearer op-token", f.last().auth)
		return out.String()
	}
	var listed domain.SaleView
	require.NoError(t, json.Unmarshal([]byte(admin("list", "7")), &listed))
	require.Equal(t, domain.SaleView{SaleID: 7, Title: "t", StockTotal: 5, State: domain.StateLive}, listed)
	for _, action := range []string{"pause", "resume", "stop"} {
		admin(action, "7")
		require.Equal(t, "POST /admin/v1/sales/7/"+action, f.last().route)
	}
	admin("stock", "--key", "k-1", "7", "-2")
	require.Equal(t, recorded{route: "POST /admin/v1/sales/7/stock", auth: "Bearer op-token", key: "k-1", body: `{"delta":-2}`}, f.last())
	admin("create", "--title", "Keyboard", "--stock", "5", "--starts", "2026-12-03T10:00:00Z", "--key", "k-2")
	var created map[string]any
	require.NoError(t, json.Unmarshal([]byte(f.last().body), &created))
	require.Equal(t, "Keyboard", created["title"])
	require.Equal(t, "2026-12-03T11:00:00Z", created["ends_at"], "an hour after the start by default")
	require.Equal(t, "k-2", f.last().key)
	require.Contains(t, admin("reconcile", "--repair", "7"), `"consistent":true`)
	lines := strings.Split(strings.TrimSpace(admin("appeals", "list")), "\n")
	require.Len(t, lines, 2, "every page")
	require.Contains(t, admin("appeals", "resolve", "2", "reject"), `"state":"rejected"`)
	require.Equal(t, `{"action":"reject"}`, f.last().body)
}

// The URL and token come from SECKILL_ADMIN_URL and SECKILL_ADMIN_TOKEN;
// a refusal and a bad argument fail the command.
func TestAdminTakesItsSettingsFromTheEnvironment(t *testing.T) {
	t.Setenv("SECKILL_ENV", "dev")
	f := &fakeAdmin{}
	srv := f.serve(t, map[string]string{"POST /admin/v1/sales/7/pause": saleJSON})
	t.Setenv("SECKILL_ADMIN_URL", srv.URL)
	t.Setenv("SECKILL_ADMIN_TOKEN", "env-token")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"admin", "pause", "7"}, &out, &errOut), errOut.String())
	require.Equal(t, "Bearer env-token", f.last().auth)

	errOut.Reset()
	require.Equal(t, 1, run([]string{"admin", "pause", "8"}, &out, &errOut))
	require.Contains(t, errOut.String(), domain.ENotFound)
	require.Equal(t, 1, run([]string{"admin", "pause", "x"}, &out, &errOut))
	require.Equal(t, 1, run([]string{"admin", "bogus"}, &out, &errOut))
	require.Equal(t, 1, run([]string{"admin"}, &out, &errOut))
}
