package redisgateway_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Production packages reach Redis only through redisgateway.Client. redisgateway and
// internal/conn (which dials) may import go-redis; so may the test
// support and every _test file.
//
// notProduction are the module's packages that never serve production
// traffic (the test harness, everything under internal/testkit/, and the
// tools), and the gateway itself with the one opener of connections (redisgateway,
// internal/conn): every other package is production code, a new one
// included. An entry ending in "/" covers every package under it.
var notProduction = []string{
	"redisgateway", "internal/conn", "internal/testkit/",
	"internal/dashboards", "cmd/seckill-bench", "cmd/seckill-chaos", "cmd/seckill-dashboards", "test/",
}

func production(path string) bool {
	rel := strings.TrimPrefix(path, module)
	for _, p := range notProduction {
		if rel == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(rel, p)) || strings.HasPrefix(rel, p+"/") {
			return false
		}
	}
	return true
}

// keyLayout are redisgateway's names that build keys or parse raw values: only
// redisgateway's own code (and tests) may use them.
var keyLayout = map[string]bool{
	"SaleKeys": true, "Keys": true, "ReserveKeys": true, "InboxGroup": true,
	"EventChannel": true, "EventChannelPattern": true, "TokenState": true,
	"ParseInboxEntry": true, "Scripts": true, "New": true,
}

const module = "github.com/seckill/seckill/"

type listed struct {
	path, dir string
	imports   []string
	files     []string
}

// goList lists the production packages' direct imports and Go files
// (tests excluded).
func goList(t *testing.T) []listed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .Imports \" \"}}\t{{join .GoFiles \" \"}}"}
	args = append(args, "./...")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	var pkgs []listed
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		require.Len(t, f, 4, "go list line %q", line)
		if production(f[0]) {
			pkgs = append(pkgs, listed{path: f[0], dir: f[1], imports: strings.Fields(f[2]), files: strings.Fields(f[3])})
		}
	}
	paths := make([]string, len(pkgs))
	for i, p := range pkgs {
		paths[i] = strings.TrimPrefix(p.path, module)
	}
	for _, want := range []string{"api", "reservation", "status", "salecache", "sales", "worker", "cmd/seckill"} {
		require.Contains(t, paths, want, "production packages")
	}
	require.NotContains(t, paths, "test/chaos")
	return pkgs
}

// TestOnlyTheGatewayImportsGoRedis fails when a production package other
// than redisgateway and internal/conn imports go-redis: Redis is reached through
// redisgateway.Client's typed operations, so the key layout, the encodings and the
// scripts have one home.
func TestOnlyTheGatewayImportsGoRedis(t *testing.T) {
	for _, p := range goList(t) {
		for _, imp := range p.imports {
			if strings.HasPrefix(imp, "github.com/redis/go-redis") {
				t.Errorf("%s imports %s: reach Redis through redisgateway.Client instead", p.path, imp)
			}
		}
	}
}

// TestNoKeysBuiltOutsideTheGateway fails when production code outside redisgateway
// uses redisgateway's key layout or raw-value parsers (redisgateway.SaleKeys and the like).
func TestNoKeysBuiltOutsideTheGateway(t *testing.T) {
	fset := token.NewFileSet()
	for _, p := range goList(t) {
		for _, name := range p.files {
			file, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			local := ""
			for _, imp := range file.Imports {
				if imp.Path.Value == `"`+module+`redisgateway"` {
					local = "redisgateway"
					if imp.Name != nil {
						local = imp.Name.Name
					}
				}
			}
			if local == "" {
				continue
			}
			ast.Inspect(file, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && keyLayout[sel.Sel.Name] {
					t.Errorf("%s: redisgateway.%s outside redisgateway: add a typed operation to redisgateway.Client instead", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
	}
}
