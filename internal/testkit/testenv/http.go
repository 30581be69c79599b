package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/authtoken"
)

// AdminUser, given as the user of Do, sends an admin token.
const AdminUser = -1

var httpClient = &http.Client{Timeout: 15 * time.Second}

// Do sends a JSON request to a development-mode API as user (0: no token;
// AdminUser: an operator) and decodes a JSON answer. It does not touch the
// test, so goroutines may call it; a transport error comes back as err.
func Do(method, url string, user int64, body any) (int, map[string]any, error) {
	token := ""
	if user != 0 {
		tok, err := Token(user)
		if err != nil {
			return 0, nil, err
		}
		token = tok
	}
	return DoWithToken(method, url, token, body)
}

// DoWithToken is Do with a bearer token of the caller's making ("": none).
func DoWithToken(method, url, token string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("%s %s: encode body: %w", method, url, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: read body: %w", method, url, err)
	}
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%s %s: body %q: %w", method, url, raw, err)
		}
	}
	return resp.StatusCode, out, nil
}

// MustDo is Do that fails the test on a transport or decoding error.
func MustDo(tb testing.TB, method, url string, user int64, body any) (int, map[string]any) {
	tb.Helper()
	code, out, err := Do(method, url, user, body)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return code, out
}

// Token mints a development-mode token for user (AdminUser: an operator).
func Token(user int64) (string, error) {
	return authtoken.MintDev(user, user == AdminUser, time.Hour)
}

// MustToken is Token that fails the test on an error.
func MustToken(tb testing.TB, user int64) string {
	tb.Helper()
	tok, err := Token(user)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return tok
}

// DoRetrying is Do as a client following the contract sends a reservation:
// a 503 ("outcome unknown" or "not ready", with Retry-After) is sent again
// with the same body, so the same request_id, up to attempts times in
// all, a short pause between; it answers the last reply. Under a loaded
// machine a Redis call can outlast its timeout, and the contract's answer
// to that is this retry, not a failed test.
func DoRetrying(method, url string, user int64, body any, attempts int) (int, map[string]any, error) {
	for i := 1; ; i++ {
		code, out, err := Do(method, url, user, body)
		if err != nil || code != http.StatusServiceUnavailable || i >= attempts {
			return code, out, err
		}
		time.Sleep(time.Duration(i) * 200 * time.Millisecond)
	}
}
