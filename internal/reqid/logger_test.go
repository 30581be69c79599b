package reqid

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// A service logs with the request's own logger when the request gave one,
// else with its id.
func TestLoggerOfARequest(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, nil))
	Logger(With(context.Background(), "req-1"), base).Info("a")
	Logger(WithLogger(context.Background(), base.With("admin_user_id", 7)), base).Info("b")
	Logger(context.Background(), base).Info("c")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], LogKey+"=req-1") || !strings.Contains(lines[1], "admin_user_id=7") ||
		strings.Contains(lines[2], LogKey) {
		t.Fatalf("lines: %q", lines)
	}
}
