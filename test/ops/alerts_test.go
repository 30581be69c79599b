package ops

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// ruleFile is the Prometheus rule-file format (the fields seckill uses).
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// registeredMetrics finds the metric names the code registers: the Name of
// every prometheus *Opts literal and the first argument of every NewDesc.
func registeredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	re := regexp.MustCompile(`(?:Name:\s*|NewDesc\(\s*)"(seckill_[a-z0-9_]+)"`)
	root := testenv.RepoRoot()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "temporal-dev") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	require.NoError(t, err)
	return names
}

func TestAlertRules(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "prometheus", "alerts.yml"))
	require.NoError(t, err)
	var rf ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true) // a misspelt key is an error, as in Prometheus
	require.NoError(t, dec.Decode(&rf))
	require.NotEmpty(t, rf.Groups)

	metrics := registeredMetrics(t)
	for _, want := range []string{"seckill_inbox_lag", "seckill_inbox_pending", "seckill_inbox_dead_letters_total",
		"seckill_reconciliation_consistent", "seckill_reconciliation_discrepancies", "seckill_orders_ended_total"} {
		require.True(t, metrics[want], "the code should register %s", want)
	}
	runbook, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "runbook.md"))
	require.NoError(t, err)
	anchors := headingAnchors(string(runbook))

	metricRef := queriedMetric
	seen := map[string]bool{}
	groups := map[string]bool{}
	for _, g := range rf.Groups {
		require.NotEmpty(t, g.Name)
		require.False(t, groups[g.Name], "group %s twice", g.Name)
		groups[g.Name] = true
		require.NotEmpty(t, g.Rules, g.Name)
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "group %s: only alerting rules here", g.Name)
			require.False(t, seen[r.Alert], "alert %s twice", r.Alert)
			seen[r.Alert] = true
			require.NotEmpty(t, strings.TrimSpace(r.Expr), r.Alert)
			require.Equal(t, strings.Count(r.Expr, "("), strings.Count(r.Expr, ")"), "%s: unbalanced parentheses", r.Alert)
			refs := metricRef.FindAllString(r.Expr, -1)
			require.NotEmpty(t, refs, "%s: expr uses no seckill or Temporal SDK metric", r.Alert)
			for _, m := range refs {
				m = histogramFamily(m)
				if strings.HasPrefix(m, "temporal_") {
					continue // the SDK's: TestQueriedMetricsExistLive
				}
				require.True(t, metrics[m], "%s: expr uses %s, which no code registers", r.Alert, m)
			}
			if r.For != "" {
				_, err := time.ParseDuration(r.For)
				require.NoError(t, err, "%s: for", r.Alert)
			}
			require.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			require.NotContains(t, r.Annotations, "runbook", "%s: the annotation is runbook_url", r.Alert)
			link := r.Annotations["runbook_url"]
			require.True(t, strings.HasPrefix(link, runbookURL), "%s: runbook_url %q", r.Alert, link)
			anchor := strings.TrimPrefix(link, runbookURL)
			require.Equal(t, strings.ToLower(r.Alert), anchor, "%s: anchor", r.Alert)
			require.True(t, anchors[anchor], "%s: docs/runbook.md has no section %q", r.Alert, anchor)
		}
	}
}

// runbookURL is where alerts link docs/runbook.md.
const runbookURL = "https://github.com/seckill/seckill/blob/main/docs/runbook.md#"

// histogramFamily is the family a histogram's series belongs to.
func histogramFamily(name string) string {
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return base
		}
	}
	return name
}

// headingAnchors are GitHub-style anchors of the markdown headings.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		out[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return out
}
