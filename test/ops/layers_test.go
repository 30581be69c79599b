package ops

import (
	"context"
	"go/ast"
	"os/exec"
	"slices"
	"strconv"
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

// TestLayersAPIImportsNoStore fails when the HTTP layer imports the store: a
// handler decodes, calls one service method and encodes, and the API
// receives its services built by backend, so no request reaches the database
// but through a service. The API's tests may still use the store to set
// up and check.
func TestLayersAPIImportsNoStore(t *testing.T) {
	imports := goListImports(t, "./api")
	require.Contains(t, imports, module+"backend", "api's imports")
	require.NotContains(t, imports, module+"store", "api imports the store: reach it through a service package instead")
}

// clients are the packages through which a service reaches the database,
// Redis or Temporal.
var clients = []string{module + "store", module + "redisgateway", "github.com/redis/go-redis/v9", "go.temporal.io/sdk/client"}

// apiConstructors is the module's packages whose constructors (New, New*)
// the API's code calls, by import path.
func apiConstructors(t *testing.T) map[string][]string {
	t.Helper()
	_, files := apiFiles(t)
	called := map[string][]string{}
	for _, f := range files {
		imports := map[string]string{}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !strings.HasPrefix(sel.Sel.Name, "New") {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && strings.HasPrefix(imports[id.Name], module) {
				called[imports[id.Name]] = append(called[imports[id.Name]], sel.Sel.Name)
			}
			return true
		})
	}
	return called
}

// TestLayersAPIBuildsNoService fails when the API builds a service: its
// code calls no constructor of a package that reaches the database, Redis
// or Temporal. Services are built and wired by backend.Build, and the API
// receives them built; what it builds itself (limiters, the edge, token
// verification) needs none of those clients.
func TestLayersAPIBuildsNoService(t *testing.T) {
	called := apiConstructors(t)
	require.NotEmpty(t, called, "the walk found the API's own constructors (limiters, the edge)")
	pkgs := make([]string, 0, len(called))
	for pkg := range called {
		pkgs = append(pkgs, pkg)
	}
	all := goListDeps(t, pkgs...)
	for pkg, names := range called {
		deps := all[pkg]
		require.NotNil(t, deps, "go list -deps %s", pkg)
		for _, c := range clients {
			if slices.Contains(deps, c) {
				t.Errorf("api calls %s.%v, which reaches %s: build it in backend and hand it to the API", pkg, names, c)
			}
		}
	}
}
