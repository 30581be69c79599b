// Package console drives the operator console in headless Chromium against
// real API and worker processes, the console on the API's admin listener.
package console

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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/chrome"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// confirm clicks the confirmation dialog's Confirm and waits for it to
// close (a refused action keeps it open: the test then fails here).
func confirm(t *testing.T, browser context.Context, what string) {
	t.Helper()
	chrome.Do(t, browser, chromedp.WaitVisible(chromedp.ID("confirm-ok")), chromedp.Click(chromedp.ID("confirm-ok")))
	chrome.WaitPage(t, browser, what+" confirmed", "!document.getElementById('confirm').open", 30*time.Second)
}

// reserve sends one reservation as user through the public API.
func reserve(t *testing.T, apiURL string, saleID, user int64) (int, map[string]any) {
	t.Helper()
	return testenv.MustDo(t, "POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", apiURL, saleID), user,
		map[string]any{"request_id": fmt.Sprintf("console-%d-%d", saleID, user)})
}

func errorCode(body map[string]any) string {
	if e, ok := body["error"].(map[string]any); ok {
		code, _ := e["code"].(string)
		return code
	}
	return ""
}

// TestConsoleInABrowser: an operator signs in with an admin token, creates
// and warms a sale from the console, watches a burst of reservations move
// the funnel and the orders, blacklists a user, resolves their appeal, and
// pauses the sale; the public API answers each change.
func TestConsoleInABrowser(t *testing.T) {
	adminAddr := testenv.FreeAddr(t)
	env := testenv.ProcEnv(t, "console-"+strconv.FormatInt(time.Now().UnixNano(), 10), map[string]string{"ADMIN_ADDR": adminAddr})
	api := testenv.MustAPI(t, "api", env)
	testenv.MustWorker(t, "worker", env)
	admin := "http://" + adminAddr
	code, _ := testenv.MustDo(t, "GET", api.URL+"/console", 0, nil)
	require.Equal(t, http.StatusNotFound, code, "the console is on the admin listener alone")

	browser := chrome.MustBrowser(t, 1440, 960)
	signIn(t, browser, admin)
	saleID := createAndWarm(t, browser)
	burst(t, browser, api.URL, saleID)

	appealResolved(t, browser, api.URL, admin, saleID)

	// docs/images/console.png (docs/operations.md shows it) is written when
	// missing or when SECKILL_UPDATE_DOCS=1, so a test run leaves the tree
	// clean.
	shots := []string{filepath.Join(t.ArtifactDir(), "console-live.png")}
	if doc := filepath.Join(testenv.RepoRoot(), "docs", "images", "console.png"); os.Getenv("SECKILL_UPDATE_DOCS") == "1" || !chrome.Exists(doc) {
		shots = append(shots, doc)
	}
	chrome.Screenshot(t, browser, shots...)
	paused(t, browser, api.URL, saleID)
}

func signIn(t *testing.T, browser context.Context, admin string) {
	chrome.Do(t, browser, chromedp.Navigate(admin+"/console"), chromedp.WaitVisible(chromedp.ID("token")))
	chrome.Do(t, browser, chromedp.SetValue(chromedp.ID("token"), "not-a-token"), chromedp.Click(chromedp.ID("sign-in")))
	chrome.WaitPage(t, browser, "a refused token", "document.getElementById('login-error').textContent !== ''", 10*time.Second)
	chrome.Do(t, browser, chromedp.SetValue(chromedp.ID("token"), testenv.MustToken(t, testenv.AdminUser)), chromedp.Click(chromedp.ID("sign-in")))
	chrome.WaitPage(t, browser, "signed in", "!document.getElementById('app').hidden", 10*time.Second)
	stored, err := chrome.Eval[bool](browser, "sessionStorage.getItem('seckill.console.token') !== null && localStorage.length === 0")
	require.NoError(t, err)
	require.True(t, stored, "the token is kept in session storage only")
}

// createAndWarm creates a sale of five units from the console's form and
// warms it from its toolbar; it returns the sale's id.
func createAndWarm(t *testing.T, browser context.Context) int64 {
	title := "Console drill " + strconv.FormatInt(time.Now().Unix(), 10)
	chrome.Do(t, browser, chromedp.Click(chromedp.ID("new-sale")), chromedp.WaitVisible(chromedp.ID("f-title")),
		chromedp.SetValue(chromedp.ID("f-title"), title), chromedp.SetValue(chromedp.ID("f-stock"), "5"),
		chromedp.SetValue(chromedp.ID("f-buckets"), "2"), chromedp.SetValue(chromedp.ID("f-price"), "129.00"))
	confirm(t, browser, "create")
	chrome.WaitPage(t, browser, "the new sale's view", fmt.Sprintf("document.getElementById('d-title').textContent === %q", title), 20*time.Second)
	id, err := chrome.Eval[float64](browser, "Number(/sale=(\\d+)/.exec(location.hash)[1])")
	require.NoError(t, err)
	saleID := int64(id)
	chrome.WaitPage(t, browser, "the sale in the list", fmt.Sprintf("!!document.querySelector('#sales tr[data-sale-id=\"%d\"]')", saleID), 10*time.Second)

	chrome.Do(t, browser, chromedp.Click(chromedp.CSS(`[data-action="warmup"]`)))
	confirm(t, browser, "warm-up")
	chrome.WaitPage(t, browser, "the warm-up logged", "document.getElementById('log').textContent.includes('Warmed sale')", 10*time.Second)
	return saleID
}

// burst: three buyers reserve through the public API and a blacklisted
// user is refused; the console's funnel and orders follow.
func burst(t *testing.T, browser context.Context, apiURL string, saleID int64) {
	for range 3 {
		code, body := reserve(t, apiURL, saleID, testenv.UniqueUser())
		require.Equal(t, http.StatusAccepted, code, "%v", body)
	}
	chrome.WaitPage(t, browser, "three orders pending payment", "document.getElementById('d-pending').textContent === '3'", 2*time.Minute)
	chrome.WaitPage(t, browser, "stock left", "document.getElementById('d-stock').textContent === '2 / 5'", 20*time.Second)
	chrome.WaitPage(t, browser, "the funnel's passes", "Number(document.querySelector('#funnel tr[data-layer=\"sale_cache\"]')?.dataset.pass) >= 3", 10*time.Second)

	chrome.Do(t, browser, chromedp.Click(chromedp.CSS(`[data-action="reconcile"]`)))
	confirm(t, browser, "reconciliation")
	chrome.WaitPage(t, browser, "a consistent report", "document.getElementById('report-verdict')?.textContent.includes('consistent')", 20*time.Second)
	verdict, err := chrome.Eval[string](browser, "document.getElementById('report-verdict').textContent")
	require.NoError(t, err)
	require.Equal(t, "✓ consistent", verdict)
}

// appealResolved: the console blacklists a user, whose reservation is
// refused (the funnel counts it); their appeal shows up and is resolved
// from the console, and they reserve.
func appealResolved(t *testing.T, browser context.Context, apiURL, admin string, saleID int64) {
	user := testenv.UniqueUser()
	chrome.Do(t, browser, chromedp.SetValue(chromedp.ID("user-id"), strconv.FormatInt(user, 10)),
		chromedp.Click(chromedp.CSS(`[data-user="blacklist-add"]`)))
	confirm(t, browser, "blacklist")
	code, body := reserve(t, apiURL, saleID, user)
	require.Equal(t, http.StatusForbidden, code, "%v", body)
	require.Equal(t, "blacklisted", errorCode(body))
	chrome.WaitPage(t, browser, "the refusal in the funnel", "Number(document.querySelector('#funnel tr[data-layer=\"blacklist\"]')?.dataset.refused) >= 1", 10*time.Second)

	code, body = testenv.MustDo(t, "POST", apiURL+"/api/v1/appeals", user,
		map[string]any{"sale_id": saleID, "reason": "blacklisted", "message": "I am a real customer"})
	require.Equal(t, http.StatusCreated, code, "%v", body)
	appeal := int64(body["appeal_id"].(float64))
	row := fmt.Sprintf(`#appeals button[data-resolve="%d"]`, appeal)
	chrome.WaitPage(t, browser, "the open appeal", fmt.Sprintf("!!document.querySelector('%s')", row), 10*time.Second)
	chrome.Do(t, browser, chromedp.Click(chromedp.CSS(row)), chromedp.WaitVisible(chromedp.ID("f-action-unblacklist")))
	confirm(t, browser, "resolve")
	chrome.WaitPage(t, browser, "the appeal gone from the open list", fmt.Sprintf("!document.querySelector('%s')", row), 10*time.Second)

	code, body = testenv.MustDo(t, "GET", admin+"/admin/v1/appeals?state=resolved", testenv.AdminUser, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	found := false
	for _, a := range body["appeals"].([]any) {
		found = found || int64(a.(map[string]any)["appeal_id"].(float64)) == appeal
	}
	require.True(t, found, "appeal %d resolved: %v", appeal, body)
	code, body = reserve(t, apiURL, saleID, user)
	require.Equal(t, http.StatusAccepted, code, "unblacklisted, the user reserves: %v", body)
}

// paused: the console pauses the sale and the public API refuses new
// reservations with sale_paused.
func paused(t *testing.T, browser context.Context, apiURL string, saleID int64) {
	chrome.Do(t, browser, chromedp.Click(chromedp.CSS(`[data-action="pause"]`)))
	confirm(t, browser, "pause")
	chrome.WaitPage(t, browser, "paused", "document.getElementById('d-control').textContent === 'paused'", 10*time.Second)
	chrome.WaitPage(t, browser, "resume offered", "!document.querySelector('[data-action=\"resume\"]').disabled", 10*time.Second)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := reserve(t, apiURL, saleID, testenv.UniqueUser())
		assert.Equal(c, http.StatusForbidden, code)
		assert.Equal(c, "sale_paused", errorCode(body))
	}, 10*time.Second, 300*time.Millisecond)
}
