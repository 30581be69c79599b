package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/chrome"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

func text(t *testing.T, browser context.Context, id string) string {
	t.Helper()
	s, err := chrome.Eval[string](browser, fmt.Sprintf("document.getElementById(%q).textContent", id))
	require.NoError(t, err)
	return s
}

// mustLiveSale creates and warms a sale through the admin API; extra
// fields join the creation's body.
func mustLiveSale(t *testing.T, base, title string, price, stock, window int, extra ...map[string]any) int64 {
	t.Helper()
	now := time.Now().UTC()
	req := map[string]any{
		"goods_id": 7, "title": title, "price_cents": price, "stock": stock, "buckets": 2,
		"starts_at": now.Add(-time.Minute).Format(time.RFC3339), "ends_at": now.Add(2 * time.Hour).Format(time.RFC3339),
		"payment_window_seconds": window,
	}
	for _, e := range extra {
		for k, v := range e {
			req[k] = v
		}
	}
	code, sale := call(t, "POST", base+"/admin/v1/sales", -1, req)
	require.Equal(t, http.StatusCreated, code, "%v", sale)
	id := int64(sale["sale_id"].(float64))
	code, body := call(t, "POST", fmt.Sprintf("%s/admin/v1/sales/%d/warmup", base, id), -1, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	return id
}

// login signs in through the page's development login.
func login(t *testing.T, browser context.Context, user int64) {
	t.Helper()
	chrome.Do(t, browser,
		chromedp.WaitVisible(chromedp.ID("user-id")),
		chromedp.SetValue(chromedp.ID("user-id"), strconv.FormatInt(user, 10)),
		chromedp.Click(chromedp.ID("login")),
	)
	chrome.WaitPage(t, browser, "logged in", fmt.Sprintf("document.getElementById('who').textContent.includes('user %d')", user), 20*time.Second)
}

// TestStorefrontInABrowser drives the storefront in headless Chromium against
// the real API and worker processes: buy (double click, one reservation),
// the order settles to PENDING_PAYMENT, pay, PAID; and a sold-out sale says so.
func TestStorefrontInABrowser(t *testing.T) {
	env := testenv.ProcEnv(t, "browser-"+strconv.FormatInt(time.Now().UnixNano(), 10), nil)
	api := testenv.MustAPI(t, "api", env)
	testenv.MustWorker(t, "worker", env)
	browser := chrome.MustBrowser(t, 960, 900)
	out := t.ArtifactDir()
	buyAndPayInTheBrowser(t, browser, api.URL, out)
	soldOutThenWaitlist(t, browser, api.URL, out)
	solveTheChallenge(t, browser, api.URL)
	followByPolling(t, browser, api.URL)
}

// buyAndPayInTheBrowser: two quick clicks make one reservation, followed by
// its event stream to PENDING_PAYMENT, then paid from the page.
func buyAndPayInTheBrowser(t *testing.T, browser context.Context, apiURL, out string) {
	const title = "Mechanical keyboard, limited edition"
	saleID := mustLiveSale(t, apiURL, title, 19900, 3, 900)
	user := testenv.UniqueUser()

	chrome.Do(t, browser, chromedp.Navigate(fmt.Sprintf("%s/?sale=%d", apiURL, saleID)))
	chrome.WaitPage(t, browser, "the sale", fmt.Sprintf("document.getElementById('title').textContent === %q", title), 20*time.Second)
	require.Equal(t, "¥199.00", text(t, browser, "price"))
	require.Equal(t, "3", text(t, browser, "stock-total"))
	login(t, browser, user)
	chrome.WaitPage(t, browser, "buy enabled", "!document.getElementById('buy').disabled", 20*time.Second)

	// Two real clicks in a row: the first disables the button, so the
	// second reaches a disabled button and sends nothing.
	chrome.Do(t, browser, chromedp.Click(chromedp.ID("buy")), chromedp.Click(chromedp.ID("buy")))
	chrome.WaitPage(t, browser, "PENDING_PAYMENT", "document.getElementById('res-status').textContent === 'PENDING_PAYMENT'", 3*time.Minute)
	transport, err := chrome.Eval[string](browser, "window.seckillTransport")
	require.NoError(t, err)
	require.Equal(t, "stream", transport, "the page follows the reservation's event stream")
	chrome.WaitPage(t, browser, "the payment countdown", "!document.getElementById('pay-by-row').hidden && /\\d\\d:\\d\\d/.test(document.getElementById('pay-by').textContent)", 10*time.Second)

	code, mine := call(t, "GET", fmt.Sprintf("%s/api/v1/me/reservations?sale_id=%d", apiURL, saleID), user, nil)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, mine["reservations"], 1, "two quick clicks make exactly one reservation: %v", mine)

	chrome.WaitPage(t, browser, "stock left updated", "document.getElementById('stock').textContent === '2'", 20*time.Second)
	shots := []string{filepath.Join(out, "pending-payment.png")}
	// docs/storefront.png (shown by the README) is written when missing or
	// when SECKILL_UPDATE_DOCS=1, so a test run leaves the tree clean.
	if doc := filepath.Join(testenv.RepoRoot(), "docs", "storefront.png"); os.Getenv("SECKILL_UPDATE_DOCS") == "1" || !chrome.Exists(doc) {
		shots = append(shots, doc)
	}
	chrome.Screenshot(t, browser, shots...)

	chrome.Do(t, browser, chromedp.Click(chromedp.ID("pay")))
	chrome.WaitPage(t, browser, "PAID", "document.getElementById('res-status').textContent === 'PAID'", 2*time.Minute)
	chrome.WaitPage(t, browser, "paid message", "document.getElementById('message').dataset.code === 'paid'", 10*time.Second)
	chrome.Screenshot(t, browser, filepath.Join(out, "paid.png"))
	code, res := call(t, "GET", apiURL+"/api/v1/reservations/"+mine["reservations"].([]any)[0].(map[string]any)["token"].(string), user, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "PAID", res["status"])
}

// soldOutThenWaitlist: a late user sees the sale sold out, joins the
// waitlist and gets the unit the first buyer returns.
func soldOutThenWaitlist(t *testing.T, browser context.Context, apiURL, out string) {
	// A sold-out sale: another user takes the only unit first.
	soldOut := mustLiveSale(t, apiURL, "Sold-out sneakers", 59900, 1, 900)
	firstBuyer := testenv.UniqueUser()
	code, body := call(t, "POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", apiURL, soldOut), firstBuyer, map[string]any{"request_id": "browser-first-buyer"})
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	firstToken := body["token"].(string)
	late := testenv.UniqueUser()
	chrome.Do(t, browser, chromedp.Navigate(fmt.Sprintf("%s/?sale=%d", apiURL, soldOut)))
	chrome.WaitPage(t, browser, "the sold-out sale", "document.getElementById('title').textContent === 'Sold-out sneakers'", 20*time.Second)
	login(t, browser, late)
	// The sale view may still show the unit (stock_left lags by a second):
	// then the click gets the contract's 410 sold_out. Either way the page
	// must say sold out.
	_, err := chrome.Eval[bool](browser, "(() => { const b = document.getElementById('buy'); if (!b.disabled) b.click(); return true; })()")
	require.NoError(t, err)
	chrome.WaitPage(t, browser, "sold-out message", "document.getElementById('message').dataset.code === 'sold_out' && document.getElementById('message').textContent.startsWith('Sold out')", 20*time.Second)
	chrome.Screenshot(t, browser, filepath.Join(out, "sold-out.png"))
	code, mine := call(t, "GET", fmt.Sprintf("%s/api/v1/me/reservations?sale_id=%d", apiURL, soldOut), late, nil)
	require.Equal(t, http.StatusOK, code)
	require.Empty(t, mine["reservations"])

	// The late user joins the waitlist; the first buyer cancels; the
	// returned unit becomes the late user's reservation on the page.
	chrome.WaitPage(t, browser, "the waitlist offered", "!document.getElementById('waitlist').hidden && !document.getElementById('wait').hidden", 10*time.Second)
	chrome.Do(t, browser, chromedp.Click(chromedp.ID("wait")))
	chrome.WaitPage(t, browser, "the waitlist position", "document.getElementById('wait-position').textContent.startsWith('You are number 1 ')", 10*time.Second)
	chrome.Screenshot(t, browser, filepath.Join(out, "waitlist.png"))
	code, body = call(t, "POST", apiURL+"/api/v1/reservations/"+firstToken+"/cancel", firstBuyer, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	chrome.WaitPage(t, browser, "the handed-over unit", "document.getElementById('res-status').textContent === 'PENDING_PAYMENT' && document.getElementById('waitlist').hidden", 2*time.Minute)
}

// solveTheChallenge: on a sale with a challenge the page solves it
// (SHA-256 in the browser, with its progress shown), trades it for a pass
// and reserves with it.
func solveTheChallenge(t *testing.T, browser context.Context, apiURL string) {
	guarded := mustLiveSale(t, apiURL, "Guarded console", 49900, 2, 900, map[string]any{"challenge_difficulty": 20000})
	chrome.Do(t, browser, chromedp.Navigate(fmt.Sprintf("%s/?sale=%d", apiURL, guarded)))
	chrome.WaitPage(t, browser, "the guarded sale", "document.getElementById('title').textContent === 'Guarded console'", 20*time.Second)
	guardedBuyer := testenv.UniqueUser()
	login(t, browser, guardedBuyer)
	chrome.WaitPage(t, browser, "buy enabled", "!document.getElementById('buy').disabled", 20*time.Second)
	chrome.Do(t, browser, chromedp.Click(chromedp.ID("buy")))
	chrome.WaitPage(t, browser, "PENDING_PAYMENT after the challenge", "document.getElementById('res-status').textContent === 'PENDING_PAYMENT'", 3*time.Minute)
	solved, err := chrome.Eval[int](browser, "window.seckillChallengesSolved || 0")
	require.NoError(t, err)
	require.Equal(t, 1, solved, "one challenge solved for one reservation")
	code, mine := call(t, "GET", fmt.Sprintf("%s/api/v1/me/reservations?sale_id=%d", apiURL, guarded), guardedBuyer, nil)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, mine["reservations"], 1)
	code, body := call(t, "POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", apiURL, guarded), testenv.UniqueUser(), map[string]any{"request_id": "browser-no-pass"})
	require.Equal(t, http.StatusForbidden, code, "without a pass: %v", body)
}

// followByPolling: without the stream (forced here; a failing stream falls
// back the same way) the page polls and still sees the order settle.
func followByPolling(t *testing.T, browser context.Context, apiURL string) {
	polled := mustLiveSale(t, apiURL, "Polled lamp", 9900, 1, 900)
	chrome.Do(t, browser, chromedp.Navigate(fmt.Sprintf("%s/?sale=%d&transport=poll", apiURL, polled)))
	chrome.WaitPage(t, browser, "the polled sale", "document.getElementById('title').textContent === 'Polled lamp'", 20*time.Second)
	login(t, browser, testenv.UniqueUser())
	chrome.WaitPage(t, browser, "buy enabled", "!document.getElementById('buy').disabled", 20*time.Second)
	chrome.Do(t, browser, chromedp.Click(chromedp.ID("buy")))
	chrome.WaitPage(t, browser, "PENDING_PAYMENT by polling", "document.getElementById('res-status').textContent === 'PENDING_PAYMENT' && window.seckillTransport === 'poll'", 3*time.Minute)
}
