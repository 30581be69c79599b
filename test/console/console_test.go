// Package console drives the operator console in headless Chromium against
// real API and worker processes, the console on the API's admin listener.
package console

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// mustBrowser starts a headless Chromium (Debian's package, which the test
// scripts install) with a fresh profile, stopped at the end of the test.
// SECKILL_CHROMIUM names another binary.
func mustBrowser(tb testing.TB) context.Context {
	tb.Helper()
	bin := os.Getenv("SECKILL_CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if bin != "" {
			break
		}
		if p, err := exec.LookPath(name); err == nil {
			bin = p
		}
	}
	if bin == "" {
		tb.Fatal("no Chromium found: run the tests with `go tool task test`, which installs it (apt-get install chromium)")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.WindowSize(1440, 960),
	)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithLogf(tb.Logf))
	tb.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("start Chromium %s: %v", bin, err)
	}
	return ctx
}

func do(t *testing.T, browser context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, 30*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

func eval[T any](browser context.Context, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(browser, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// waitPage polls a JavaScript condition until it is true.
func waitPage(t *testing.T, browser context.Context, what, cond string, timeout time.Duration) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ok, err := eval[bool](browser, cond)
		assert.NoError(c, err)
		assert.True(c, ok, "%s: %s", what, cond)
	}, timeout, 200*time.Millisecond, "page never showed: %s", what)
}

// confirm clicks the confirmation dialog's Confirm and waits for it to
// close (a refused action keeps it open: the test then fails here).
func confirm(t *testing.T, browser context.Context, what string) {
	t.Helper()
	do(t, browser, chromedp.WaitVisible(chromedp.ID("confirm-ok")), chromedp.Click(chromedp.ID("confirm-ok")))
	waitPage(t, browser, what+" confirmed", "!document.getElementById('confirm').open", 30*time.Second)
}

func screenshot(t *testing.T, browser context.Context, paths ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	for _, p := range paths {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, png, 0o644))
		t.Logf("screenshot: %s", p)
	}
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

	browser := mustBrowser(t)
	signIn(t, browser, admin)
	saleID := createAndWarm(t, browser)
	burst(t, browser, api.URL, saleID)

	appealResolved(t, browser, api.URL, admin, saleID)

	// docs/images/console.png (docs/operations.md shows it) is written when
	// missing or when SECKILL_UPDATE_DOCS=1, so a test run leaves the tree
	// clean.
	shots := []string{filepath.Join(t.ArtifactDir(), "console-live.png")}
	if doc := filepath.Join(testenv.RepoRoot(), "docs", "images", "console.png"); os.Getenv("SECKILL_UPDATE_DOCS") == "1" || !exists(doc) {
		shots = append(shots, doc)
	}
	screenshot(t, browser, shots...)
	paused(t, browser, api.URL, saleID)
}

func signIn(t *testing.T, browser context.Context, admin string) {
	do(t, browser, chromedp.Navigate(admin+"/console"), chromedp.WaitVisible(chromedp.ID("token")))
	do(t, browser, chromedp.SetValue(chromedp.ID("token"), "not-a-token"), chromedp.Click(chromedp.ID("sign-in")))
	waitPage(t, browser, "a refused token", "document.getElementById('login-error').textContent !== ''", 10*time.Second)
	do(t, browser, chromedp.SetValue(chromedp.ID("token"), testenv.MustToken(t, testenv.AdminUser)), chromedp.Click(chromedp.ID("sign-in")))
	waitPage(t, browser, "signed in", "!document.getElementById('app').hidden", 10*time.Second)
	stored, err := eval[bool](browser, "sessionStorage.getItem('seckill.console.token') !== null && localStorage.length === 0")
	require.NoError(t, err)
	require.True(t, stored, "the token is kept in session storage only")
}

// createAndWarm creates a sale of five units from the console's form and
// warms it from its toolbar; it returns the sale's id.
func createAndWarm(t *testing.T, browser context.Context) int64 {
	title := "Console drill " + strconv.FormatInt(time.Now().Unix(), 10)
	do(t, browser, chromedp.Click(chromedp.ID("new-sale")), chromedp.WaitVisible(chromedp.ID("f-title")),
		chromedp.SetValue(chromedp.ID("f-title"), title), chromedp.SetValue(chromedp.ID("f-stock"), "5"),
		chromedp.SetValue(chromedp.ID("f-buckets"), "2"), chromedp.SetValue(chromedp.ID("f-price"), "129.00"))
	confirm(t, browser, "create")
	waitPage(t, browser, "the new sale's view", fmt.Sprintf("document.getElementById('d-title').textContent === %q", title), 20*time.Second)
	id, err := eval[float64](browser, "Number(/sale=(\\d+)/.exec(location.hash)[1])")
	require.NoError(t, err)
	saleID := int64(id)
	waitPage(t, browser, "the sale in the list", fmt.Sprintf("!!document.querySelector('#sales tr[data-sale-id=\"%d\"]')", saleID), 10*time.Second)

	do(t, browser, chromedp.Click(chromedp.CSS(`[data-action="warmup"]`)))
	confirm(t, browser, "warm-up")
	waitPage(t, browser, "the warm-up logged", "document.getElementById('log').textContent.includes('Warmed sale')", 10*time.Second)
	return saleID
}

// burst: three buyers reserve through the public API and a blacklisted
// user is refused; the console's funnel and orders follow.
func burst(t *testing.T, browser context.Context, apiURL string, saleID int64) {
	for range 3 {
		code, body := reserve(t, apiURL, saleID, testenv.UniqueUser())
		require.Equal(t, http.StatusAccepted, code, "%v", body)
	}
	waitPage(t, browser, "three orders pending payment", "document.getElementById('d-pending').textContent === '3'", 2*time.Minute)
	waitPage(t, browser, "stock left", "document.getElementById('d-stock').textContent === '2 / 5'", 20*time.Second)
	waitPage(t, browser, "the funnel's passes", "Number(document.querySelector('#funnel tr[data-layer=\"sale_cache\"]')?.dataset.pass) >= 3", 10*time.Second)

	do(t, browser, chromedp.Click(chromedp.CSS(`[data-action="reconcile"]`)))
	confirm(t, browser, "reconciliation")
	waitPage(t, browser, "a consistent report", "document.getElementById('report-verdict')?.textContent.includes('consistent')", 20*time.Second)
	verdict, err := eval[string](browser, "document.getElementById('report-verdict').textContent")
	require.NoError(t, err)
	require.Equal(t, "✓ consistent", verdict)
}

// appealResolved: the console blacklists a user, whose reservation is
// refused (the funnel counts it); their appeal shows up and is resolved
// from the console, and they reserve.
func appealResolved(t *testing.T, browser context.Context, apiURL, admin string, saleID int64) {
	user := testenv.UniqueUser()
	do(t, browser, chromedp.SetValue(chromedp.ID("user-id"), strconv.FormatInt(user, 10)),
		chromedp.Click(chromedp.CSS(`[data-user="blacklist-add"]`)))
	confirm(t, browser, "blacklist")
	code, body := reserve(t, apiURL, saleID, user)
	require.Equal(t, http.StatusForbidden, code, "%v", body)
	require.Equal(t, "blacklisted", errorCode(body))
	waitPage(t, browser, "the refusal in the funnel", "Number(document.querySelector('#funnel tr[data-layer=\"blacklist\"]')?.dataset.refused) >= 1", 10*time.Second)

	code, body = testenv.MustDo(t, "POST", apiURL+"/api/v1/appeals", user,
		map[string]any{"sale_id": saleID, "reason": "blacklisted", "message": "I am a real customer"})
	require.Equal(t, http.StatusCreated, code, "%v", body)
	appeal := int64(body["appeal_id"].(float64))
	row := fmt.Sprintf(`#appeals button[data-resolve="%d"]`, appeal)
	waitPage(t, browser, "the open appeal", fmt.Sprintf("!!document.querySelector('%s')", row), 10*time.Second)
	do(t, browser, chromedp.Click(chromedp.CSS(row)), chromedp.WaitVisible(chromedp.ID("f-action-unblacklist")))
	confirm(t, browser, "resolve")
	waitPage(t, browser, "the appeal gone from the open list", fmt.Sprintf("!document.querySelector('%s')", row), 10*time.Second)

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
	do(t, browser, chromedp.Click(chromedp.CSS(`[data-action="pause"]`)))
	confirm(t, browser, "pause")
	waitPage(t, browser, "paused", "document.getElementById('d-control').textContent === 'paused'", 10*time.Second)
	waitPage(t, browser, "resume offered", "!document.querySelector('[data-action=\"resume\"]').disabled", 10*time.Second)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := reserve(t, apiURL, saleID, testenv.UniqueUser())
		assert.Equal(c, http.StatusForbidden, code)
		assert.Equal(c, "sale_paused", errorCode(body))
	}, 10*time.Second, 300*time.Millisecond)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
