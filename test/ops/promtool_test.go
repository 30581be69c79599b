package ops

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// promtool is Debian's (package prometheus); scripts/test.sh installs it.
// Missing, the test fails: the rules would go unchecked.
func mustPromtool(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool is needed (apt-get install prometheus; scripts/test.sh does it)")
	return bin
}

// TestPromtoolRules runs `promtool check config` on the Prometheus config
// `task up` runs, `promtool check rules` on the alert rules and
// `promtool test rules` on their unit tests, and checks that every alert has
// a unit test in which it fires.
func TestPromtoolRules(t *testing.T) {
	bin := mustPromtool(t)
	dir := filepath.Join(testenv.RepoRoot(), "deploy", "prometheus")
	for _, args := range [][]string{
		{"check", "config", "prometheus.yml"}, // checks alerts.yml too
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
		require.Contains(t, string(out), "SUCCESS", "promtool %s:\n%s", strings.Join(args, " "), out)
	}

	raw, err := os.ReadFile(filepath.Join(dir, "alerts.yml"))
	require.NoError(t, err)
	var rf ruleFile
	require.NoError(t, yaml.Unmarshal(raw, &rf))
	raw, err = os.ReadFile(filepath.Join(dir, "alerts_test.yml"))
	require.NoError(t, err)
	var tf struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &tf))
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tf.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			require.True(t, fires[r.Alert], "alerts_test.yml has no case in which %s fires", r.Alert)
		}
	}
}
