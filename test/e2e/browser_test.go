package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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

// mustSale creates a sale through the admin API, open from starts to
// ends; extra fields join the creation's body.
func mustSale(t *testing.T, base, title string, price, stock, window int, starts, ends time.Time, extra ...map[string]any) int64 {
	t.Helper()
	req := map[string]any{
		"goods_id": 7, "title": title, "price_cents": price, "stock": stock, "buckets": 2,
		"starts_at": starts.UTC().Format(time.RFC3339), "ends_at": ends.UTC().Format(time.RFC3339),
		"payment_window_seconds": window,
	}
	for _, e := range extra {
		for k, v := range e {
			req[k] = v
		}
	}
	code, sale := call(t, "POST", base+"/admin/v1/sales", -1, req)
	require.Equal(t, http.StatusCreated, code, "%v", sale)
	return int64(sale["sale_id"].(float64))
}

// mustLiveSale creates and warms a sale open since a minute ago.
func mustLiveSale(t *testing.T, base, title string, price, stock, window int, extra ...map[string]any) int64 {
	t.Helper()
	now := time.Now()
	id := mustSale(t, base, title, price, stock, window, now.Add(-time.Minute), now.Add(2*time.Hour), extra...)
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
	browseTheListing(t, browser, api.URL, out)
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

// listedIDs is the sale ids a section of the landing page lists, in order.
func listedIDs(t *testing.T, browser context.Context, section string) []int64 {
	t.Helper()
	ids, err := chrome.Eval[[]int64](browser, fmt.Sprintf("Array.from(document.querySelectorAll('#%s .sales a'), (a) => Number(a.dataset.saleId))", section))
	require.NoError(t, err)
	return ids
}

// moreUntil presses a section's "More" until done holds for its sales or
// the section has no next page, at most pages times; it answers the ids
// listed then.
func moreUntil(t *testing.T, browser context.Context, section string, pages int, done func([]int64) bool) []int64 {
	t.Helper()
	more := fmt.Sprintf("document.querySelector('#%s .more')", section)
	for range pages {
		ids := listedIDs(t, browser, section)
		if done(ids) {
			return ids
		}
		hidden, err := chrome.Eval[bool](browser, more+".hidden")
		require.NoError(t, err)
		if hidden {
			return ids
		}
		chrome.Do(t, browser, chromedp.Click(chromedp.CSS("#"+section+" .more")))
		chrome.WaitPage(t, browser, section+"'s next page", fmt.Sprintf(
			"!%[1]s.disabled && (%[1]s.hidden || document.querySelectorAll('#%[2]s .sales a').length > %[3]d)", more, section, len(ids)), 30*time.Second)
	}
	t.Fatalf("%s: still more after %d pages", section, pages)
	return nil
}

// browseTheListing: the landing page lists the live sales and the
// upcoming ones through GET /api/v1/sales, a page at a time: "More" brings
// the next page by its cursor, none listed twice, the upcoming in opening
// order, and a listed sale links to its page.
func browseTheListing(t *testing.T, browser context.Context, apiURL, out string) {
	const pageSize = 20 // the page's
	live := mustLiveSale(t, apiURL, "Listed kettle", 4900, 2, 900)
	first := time.Now().Add(30 * time.Minute).Truncate(time.Minute)
	var upcoming []int64
	for i := range pageSize + 5 {
		opens := first.Add(time.Duration(i) * time.Minute)
		id := mustSale(t, apiURL, fmt.Sprintf("Listed lamp %02d", i), 2900, 1, 900, opens, opens.Add(time.Hour))
		upcoming = append(upcoming, id)
		// Stopped, they leave the listing that later runs read.
		t.Cleanup(func() {
			code, body := call(t, "POST", fmt.Sprintf("%s/admin/v1/sales/%d/stop", apiURL, id), -1, nil)
			require.Equal(t, http.StatusOK, code, "stop sale %d: %v", id, body)
		})
	}

	chrome.Do(t, browser, chromedp.Navigate(apiURL+"/"))
	chrome.WaitPage(t, browser, "the first upcoming page", "document.querySelectorAll('#upcoming .sales a').length > 0 && !document.querySelector('#upcoming .more').disabled", 20*time.Second)
	require.Len(t, listedIDs(t, browser, "upcoming"), pageSize, "one page at first")
	shown, err := chrome.Eval[bool](browser, "document.getElementById('sale').getClientRects().length > 0")
	require.NoError(t, err)
	require.False(t, shown, "the landing page shows no sale card")
	chrome.Screenshot(t, browser, filepath.Join(out, "listing.png"))

	all := moreUntil(t, browser, "upcoming", 50, func([]int64) bool { return false })
	require.Greater(t, len(all), pageSize, "More brought the next pages")
	at := make(map[int64]int, len(all))
	for i, id := range all {
		_, twice := at[id]
		require.False(t, twice, "sale %d listed twice: %v", id, all)
		at[id] = i
	}
	for i, id := range upcoming {
		require.Contains(t, at, id, "upcoming sale %d not listed: %v", id, all)
		if i > 0 {
			require.Greater(t, at[id], at[upcoming[i-1]], "upcoming sales are listed soonest first")
		}
	}

	lives := moreUntil(t, browser, "live", 50, func(ids []int64) bool { return slices.Contains(ids, live) })
	require.Contains(t, lives, live, "the live sale is listed")
	require.NotContains(t, lives, upcoming[0], "an upcoming sale is not listed as live")
	link := fmt.Sprintf("#live a[data-sale-id='%d']", live)
	title, err := chrome.Eval[string](browser, fmt.Sprintf("document.querySelector(%q).querySelector('.sale-title').textContent", link))
	require.NoError(t, err)
	require.Equal(t, "Listed kettle", title)
	chrome.Do(t, browser, chromedp.Click(chromedp.CSS(link)))
	chrome.WaitPage(t, browser, "the listed sale's page", fmt.Sprintf("location.search === '?sale=%d' && document.getElementById('title').textContent === 'Listed kettle' && !document.getElementById('back').hidden && document.getElementById('listing').getClientRects().length === 0", live), 20*time.Second)
}
