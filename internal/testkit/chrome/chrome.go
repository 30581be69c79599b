// Package chrome drives a headless Chromium for the browser tests (the
// storefront's and the operator console's): one browser per test, every
// action bounded.
package chrome

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// MustBrowser starts a headless Chromium (Debian's package, which the test
// scripts install) with a fresh profile and a window of width×height; it is
// stopped at the end of the test. SECKILL_CHROMIUM names another binary.
func MustBrowser(tb testing.TB, width, height int) context.Context {
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
		chromedp.WindowSize(width, height),
	)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithLogf(tb.Logf))
	tb.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("start Chromium %s: %v", bin, err)
	}
	return ctx
}

// Do runs browser actions with a bound.
func Do(t *testing.T, browser context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, 30*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](browser context.Context, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(browser, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// WaitPage polls a JavaScript condition until it is true.
func WaitPage(t *testing.T, browser context.Context, what, cond string, timeout time.Duration) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ok, err := Eval[bool](browser, cond)
		assert.NoError(c, err)
		assert.True(c, ok, "%s: %s", what, cond)
	}, timeout, 200*time.Millisecond, "page never showed: %s", what)
}

// Screenshot writes the whole page as a PNG to each path.
func Screenshot(t *testing.T, browser context.Context, paths ...string) {
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

// Exists reports whether a file is there (a screenshot to keep).
func Exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
