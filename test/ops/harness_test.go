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

const (
	module = "github.com/seckill/seckill/"
	// harness is the test harness's folder: every package under it is
	// test support, and none of it is production code.
	harness = module + "internal/testkit/"
)

// services are the packages that carry the product's behaviour. The
// harness starts and connects to the services' processes and stores; a
// harness that imported one would test the product with itself, and a
// change to a service would reach every test through the harness.
var services = []string{
	"activities", "api", "backend", "degraded", "gate", "operators", "temporalgateway",
	"reconcile", "reservation", "salecache", "sales", "status", "worker",
	"workflows",
}

// goListDeps maps each package the patterns match to its dependencies
// (transitive, tests excluded), from `go list -deps` run at the
// repository's root.
func goListDeps(t *testing.T, patterns ...string) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"list", "-f", "{{.ImportPath}}\t{{join .Deps \" \"}}"}, patterns...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	require.NoError(t, err, "go list %s", strings.Join(patterns, " "))
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, imports, ok := strings.Cut(line, "\t")
		require.True(t, ok, "go list line %q", line)
		deps[path] = strings.Fields(imports)
	}
	return deps
}

// isService reports whether path is one of the service packages or a
// package under one.
func isService(path string) bool {
	rel, ok := strings.CutPrefix(path, module)
	if !ok {
		return false
	}
	for _, s := range services {
		if rel == s || strings.HasPrefix(rel, s+"/") {
			return true
		}
	}
	return false
}

// TestHarnessImportsNoServicePackage fails when a package under
// internal/testkit depends, directly or not, on a service package: what a
// test needs from a service (warming a sale through sales, say) belongs in
// the test or in a helper under test/ (test/testsale).
func TestHarnessImportsNoServicePackage(t *testing.T) {
	all := goListDeps(t, "./...")
	var kit []string
	for path := range all {
		if strings.HasPrefix(path, harness) {
			kit = append(kit, path)
		}
	}
	require.Contains(t, kit, harness+"testenv", "the harness's packages")
	for _, s := range services {
		require.Contains(t, all, module+s, "service package %s is gone: update services", s)
	}
	for _, path := range kit {
		for _, dep := range all[path] {
			if isService(dep) {
				t.Errorf("%s depends on the service package %s: the harness imports no service", path, dep)
			}
		}
	}
}

// TestSeckillBinaryImportsNoHarness fails when the production binary
// depends on a package under internal/testkit.
func TestSeckillBinaryImportsNoHarness(t *testing.T) {
	deps := goListDeps(t, "./cmd/seckill")[module+"cmd/seckill"]
	require.Contains(t, deps, module+"api", "cmd/seckill's dependencies")
	for _, dep := range deps {
		if strings.HasPrefix(dep, harness) {
			t.Errorf("cmd/seckill depends on the harness package %s", dep)
		}
	}
}
