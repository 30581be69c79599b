package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/seckill/seckill/internal/dashboards"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// scrape returns a /metrics endpoint's text.
func scrape(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, url)
	return string(b)
}

// scrapeNames returns the sample names a /metrics endpoint exposes (a
// histogram's _bucket, _sum and _count included).
func scrapeNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, line := range strings.Split(scrape(t, url), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// labelPair matches one name="value" pair of the text exposition format.
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// tokenLike is the shape of a reservation token (domain.DeriveToken).
var tokenLike = regexp.MustCompile(`^[0-9]+-[0-9a-f]{32}$`)

// requireNoPersonalLabels scrapes url and fails when a label is named for,
// or holds, a reservation token or a user id: such a label grows the
// series without bound and puts a bearer's id in every scrape.
func requireNoPersonalLabels(t *testing.T, url string, user int64, token string) {
	t.Helper()
	body := scrape(t, url)
	userID := strconv.FormatInt(user, 10)
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, m := range labelPair.FindAllStringSubmatch(line, -1) {
			name, value := m[1], m[2]
			require.NotContains(t, []string{"token", "user", "user_id"}, name, "%s: %s", url, line)
			require.False(t, tokenLike.MatchString(value) || strings.Contains(value, token), "%s: a label holds a token: %s", url, line)
			require.NotEqual(t, userID, value, "%s: a label holds the user id: %s", url, line)
		}
	}
}

// queriedMetric finds the metric names in PromQL (and in the dashboards'
// JSON, which holds only PromQL and prose): seckill's and the Temporal SDK's.
var queriedMetric = regexp.MustCompile(`\b(?:seckill|temporal)_[a-z0-9_]+`)

// TestDashboardsAreGenerated checks that deploy/grafana holds exactly what
// internal/dashboards builds (go run ./cmd/seckill-dashboards rewrites it).
func TestDashboardsAreGenerated(t *testing.T) {
	files, err := dashboards.Files()
	require.NoError(t, err)
	dir := filepath.Join(testenv.RepoRoot(), "deploy", "grafana")
	committed, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.Len(t, committed, len(files), "deploy/grafana has other JSON files than the generator writes")
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, "run: go run ./cmd/seckill-dashboards")
		// Not require.Equal: its diff of two whole dashboards buries the message.
		require.True(t, bytes.Equal(want, got), "deploy/grafana/%s is stale: go run ./cmd/seckill-dashboards", name)
	}
}

// TestGrafanaProvisioning checks deploy/grafana/provisioning: one default
// Prometheus datasource and one file provider for the dashboards, decoded
// strictly (a misspelt key is an error, as Grafana ignores it silently).
func TestGrafanaProvisioning(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "deploy", "grafana", "provisioning")
	decode := func(name string, v any) {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		require.NoError(t, dec.Decode(v), name)
	}
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, Access, URL string
			IsDefault                    bool           `yaml:"isDefault"`
			JSONData                     map[string]any `yaml:"jsonData"`
		}
	}
	decode("datasources/seckill.yaml", &ds)
	require.Equal(t, 1, ds.APIVersion)
	require.Len(t, ds.Datasources, 1)
	require.Equal(t, "prometheus", ds.Datasources[0].Type)
	require.True(t, ds.Datasources[0].IsDefault)
	var dp struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name, Folder, Type    string
			DisableDeletion       bool `yaml:"disableDeletion"`
			AllowUIUpdates        bool `yaml:"allowUiUpdates"`
			UpdateIntervalSeconds int  `yaml:"updateIntervalSeconds"`
			Options               struct {
				Path                      string
				FoldersFromFilesStructure bool `yaml:"foldersFromFilesStructure"`
			}
		}
	}
	decode("dashboards/seckill.yaml", &dp)
	require.Equal(t, 1, dp.APIVersion)
	require.Len(t, dp.Providers, 1)
	require.Equal(t, "file", dp.Providers[0].Type)
	require.NotEmpty(t, dp.Providers[0].Options.Path)
}

// TestQueriedMetricsExistLive starts the real API and worker, makes a
// reservation end to end, and checks that every metric an alert or a
// dashboard panel queries is exported by one of them (up is Prometheus's).
func TestQueriedMetricsExistLive(t *testing.T) {
	wanted := map[string][]string{} // metric -> where it is queried
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "prometheus", "alerts.yml"))
	require.NoError(t, err)
	var rf ruleFile
	require.NoError(t, yaml.Unmarshal(raw, &rf))
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			for _, m := range queriedMetric.FindAllString(r.Expr, -1) {
				wanted[m] = append(wanted[m], "alert "+r.Alert)
			}
		}
	}
	files, err := dashboards.Files()
	require.NoError(t, err)
	for name, b := range files {
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
			Templating struct {
				List []struct {
					Query any `json:"query"`
				} `json:"list"`
			} `json:"templating"`
		}
		require.NoError(t, json.Unmarshal(b, &d), name)
		n := 0
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				for _, m := range queriedMetric.FindAllString(tg.Expr, -1) {
					wanted[m] = append(wanted[m], name+": "+p.Title)
					n++
				}
			}
		}
		for _, v := range d.Templating.List {
			q, _ := json.Marshal(v.Query)
			for _, m := range queriedMetric.FindAllString(string(q), -1) {
				wanted[m] = append(wanted[m], name+": variable")
			}
		}
		require.Positive(t, n, "%s queries no metric", name)
	}

	s := MustStack(t, "livemetrics", nil)
	sale := s.MustLiveSale(t, 5, 60, 10*time.Minute)
	user, token := s.MustPending(t, sale)
	for _, url := range []string{s.api.URL + "/metrics", s.worker.MetricsURL} {
		requireNoPersonalLabels(t, url, user, token)
	}
	var missing []string
	// The SDK's series are reported each second by its metrics scope.
	deadline := time.Now().Add(30 * time.Second)
	for {
		live := scrapeNames(t, s.api.URL+"/metrics")
		for n := range scrapeNames(t, s.worker.MetricsURL) {
			live[n] = true
		}
		missing = missing[:0]
		for m, where := range wanted {
			if !live[m] && !onlyWhileItHolds[m] {
				missing = append(missing, fmt.Sprintf("%s (%s)", m, strings.Join(where, "; ")))
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	sort.Strings(missing)
	require.Empty(t, missing, "queried but not exported by the live API or worker")
}

// onlyWhileItHolds are series that appear with a sale's first check (each
// minute), possibly after this test, with the SDK's first failure, or
// while a sale is off the Redis path (TestDatabasePathOrderIsPayableAtOnce
// finds that one); their alerts compare values or increases from the
// first sample on.
var onlyWhileItHolds = map[string]bool{
	"seckill_reservations_without_workflow":         true,
	"seckill_sale_database_mode":                    true,
	"temporal_workflow_task_execution_failed_total": true,
}
