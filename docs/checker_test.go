package docs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSlugIsGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		"Kubernetes":                             "kubernetes",
		"Managed Temporal, Redis and MariaDB":    "managed-temporal-redis-and-mariadb",
		"`SECKILL_API_STARTS_REDIS_ORDERS` (on)": "seckill_api_starts_redis_orders-on",
		"Scenario 9: the churn soak":             "scenario-9-the-churn-soak",
		"What's left — and why":                  "whats-left--and-why",
		"SeckillWorkerDown":                      "seckillworkerdown",
		"秒杀 flow":                                "秒杀-flow",
	} {
		assert.Equal(t, want, slug(heading), heading)
	}
}

func TestHeadingAnchors(t *testing.T) {
	md := "# Top\n\ntext\n\n## Alerts\n\n```sh\n# not a heading\n```\n\n### Alerts\n\n#### Alerts ##\n#nospace\n"
	got := headingAnchors(md)
	assert.Equal(t, map[string]bool{"top": true, "alerts": true, "alerts-1": true, "alerts-2": true}, got)
}

// writeFiles writes name -> content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// The checker reports each kind of broken link and nothing else.
func TestCheckManualFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"README.md": "# Readme\n\n[ok](docs/a.md) [ok anchor](docs/a.md#deploy-it) [web](https://example.com/x.md#nope)\n" +
			"[gone](docs/missing.md) [bad anchor](docs/a.md#kubernetes) ![img](docs/pic.png)\n" +
			"`[code](docs/nowhere.md)`\n\n```\n[fenced](docs/nowhere.md)\n```\n",
		"docs/a.md": "# A\n\n## Deploy it\n\n[self](#a) [self bad](#b) [up](../README.md#readme) [dir](../docs)\n" +
			"[ref]: b.md#nothing-here\n",
		"docs/b.md":    "# B\n",
		"docs/pic.png": "png",
	})
	files := []string{filepath.Join(dir, "README.md"), filepath.Join(dir, "docs", "a.md"), filepath.Join(dir, "docs", "b.md")}
	broken, checked, err := checkManual(files)
	require.NoError(t, err)
	assert.Equal(t, 10, checked, "links outside code, web links left out")
	require.Len(t, broken, 4, "%q", broken)
	assert.Contains(t, broken[0], "link docs/missing.md: no such file")
	assert.Contains(t, broken[1], `link docs/a.md#kubernetes: no heading with the anchor "kubernetes"`)
	assert.Contains(t, broken[2], `link #b: no heading with the anchor "b"`)
	assert.Contains(t, broken[3], `link b.md#nothing-here: no heading with the anchor "nothing-here"`)
}

// An anchor that code or a manifest names must be a heading of its page.
func TestCheckNamedAnchorsFindsAMissingSection(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"docs/deploy.md":                "# Deploy\n\n## Container image\n",
		"deploy/k8s/kustomization.yaml": "# see docs/deploy.md#kubernetes and docs/deploy.md#container-image\n",
		"api/api.go":                    "// docs/nope.md#x\n",
		".data/ignored.yml":             "docs/deploy.md#ignored\n",
	})
	broken, checked, err := checkNamedAnchors(dir)
	require.NoError(t, err)
	assert.Equal(t, 3, checked)
	require.Len(t, broken, 2, "%q", broken)
	assert.Contains(t, broken[0], "docs/nope.md#x: no such file")
	assert.Contains(t, broken[1], `docs/deploy.md#kubernetes: no heading with the anchor "kubernetes"`)
}
