package ops

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// goListImports is the packages pkg imports itself (its test files'
// imports left out), from `go list` run at the repository's root.
func goListImports(t *testing.T, pkg string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-f", `{{join .Imports "\n"}}`, pkg)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	require.NoError(t, err, "go list %s", pkg)
	return strings.Fields(string(out))
}

// TestAPIImportsNoStore fails when the HTTP layer imports the store: a
// handler decodes, calls one service method and encodes, and the API
// builds its services through backend, so no request reaches the database
// but through a service. The API's tests may still use the store to set
// up and check.
func TestAPIImportsNoStore(t *testing.T) {
	imports := goListImports(t, "./api")
	require.Contains(t, imports, module+"backend", "api's imports")
	require.NotContains(t, imports, module+"store", "api imports the store: reach it through a service package instead")
}
