package workflows

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

// Histories of real runs, replayed against the current code: a change to
// a workflow's command sequence that is not guarded by workflow.GetVersion
// fails TestReplay. Histories are append-only: once committed, a file is
// never changed or removed (TestHistoriesAreAppendOnly), because a history
// recorded before a change is what proves the change safe for workflows
// that were in flight when it was deployed. New behaviour gets new files
// (recorded with a new tag, see TestRecordHistories).

const historyDir = "testdata"

// historyManifest lists the first recording's files with their SHA-256;
// each later recording adds its own manifest, histories@<tag>.sha256, so no
// committed file is ever edited. Together they list every history.
const historyManifest = "histories.sha256"

// manifestFiles lists the manifests, the first one first.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	tagged, err := filepath.Glob(filepath.Join(historyDir, "histories@*.sha256"))
	require.NoError(t, err)
	sort.Strings(tagged)
	return append([]string{filepath.Join(historyDir, historyManifest)}, tagged...)
}

// Prefixes of the history files, by workflow type.
const (
	orderHistoryPrefix = "order_"
	saleHistoryPrefix  = "sale_"
)

// newReplayer registers the workflows under their contract names.
func newReplayer() worker.WorkflowReplayer {
	r := worker.NewWorkflowReplayer()
	RegisterOrderTypes(r)
	RegisterSaleTypes(r)
	return r
}

// historyFiles lists the recorded histories of dir.
func historyFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	for _, p := range []string{orderHistoryPrefix, saleHistoryPrefix} {
		got, err := filepath.Glob(filepath.Join(dir, p+"*.json"))
		require.NoError(t, err)
		files = append(files, got...)
	}
	sort.Strings(files)
	return files
}

// historyRetired lists the histories whose branch was retired under
// OrderWorkflow's retirement rule: "<file>  <why>" per line, append-only.
const historyRetired = "retired.txt"

// readRetired reads the retired histories; the file may not exist yet.
func readRetired(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	body, err := os.ReadFile(filepath.Join(historyDir, historyRetired))
	if os.IsNotExist(err) {
		return out
	}
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		name, why, ok := strings.Cut(line, "  ")
		require.True(t, ok && strings.TrimSpace(why) != "", "%s: %q is not '<file>  <why>'", historyRetired, line)
		out[name] = true
	}
	return out
}

// TestReplay replays every committed history, of both workflows, against
// the current code, but those retired under the retirement rule.
func TestReplay(t *testing.T) {
	files := historyFiles(t, historyDir)
	require.NotEmpty(t, files, "no recorded histories in %s", historyDir)
	retired := readRetired(t)
	var sales int
	for _, f := range files {
		if retired[filepath.Base(f)] {
			continue
		}
		if strings.HasPrefix(filepath.Base(f), saleHistoryPrefix) {
			sales++
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			require.NoError(t, newReplayer().ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
	require.NotZero(t, sales, "no SaleWorkflow history recorded")
}

var manifestLine = regexp.MustCompile(`^([0-9a-f]{64})  ([A-Za-z0-9_.@-]+\.json)$`)

// readManifest reads the manifests as file -> checksum, refusing a file
// listed twice.
func readManifest(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, path := range manifestFiles(t) {
		f, err := os.Open(path)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			m := manifestLine.FindStringSubmatch(sc.Text())
			require.NotNil(t, m, "%s line %d is not '<sha256>  <file>.json': %q", path, n, sc.Text())
			_, dup := out[m[2]]
			require.False(t, dup, "%s lists %s twice", path, m[2])
			out[m[2]] = m[1]
		}
		require.NoError(t, sc.Err())
		require.NoError(t, f.Close())
	}
	return out
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", args...).CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// TestHistoriesAreAppendOnly fails when a committed history was changed or
// removed, in the working tree or in any commit of the branch's history:
// every history file is listed in the manifest with its checksum and
// matches it, the manifest itself only ever gained lines, and git has never
// seen a history file modified, deleted or renamed.
func TestHistoriesAreAppendOnly(t *testing.T) {
	manifest := readManifest(t)
	files := historyFiles(t, historyDir)
	require.NotEmpty(t, files)
	onDisk := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		onDisk[name] = true
		want, ok := manifest[name]
		require.True(t, ok, "%s is not listed in any manifest: add testdata/histories@<tag>.sha256 (sha256sum *@<tag>.json) when committing a new recording", name)
		require.Equal(t, want, sha256File(t, f), "%s was changed after it was recorded; histories are append-only (record a new file instead)", name)
	}
	for name := range manifest {
		require.True(t, onDisk[name], "%s is listed in a manifest but gone; histories are append-only", name)
	}
	for name := range readRetired(t) {
		require.True(t, onDisk[name], "%s retires %s, which is not a recorded history", historyRetired, name)
	}

	// The git history: CI runs on a full clone. A shallow clone cannot
	// prove anything, so it fails rather than passes.
	require.Equal(t, "false\n", git(t, "rev-parse", "--is-shallow-repository"), "a shallow clone cannot check the histories' git log; fetch the full history")
	changed := git(t, "log", "--diff-filter=MDR", "--format=%H", "--name-only", "--", historyDir)
	for _, line := range strings.Split(changed, "\n") {
		line = strings.TrimSpace(line)
		base := filepath.Base(line)
		if strings.HasSuffix(base, ".sha256") {
			t.Errorf("a commit modified, deleted or renamed the manifest %s: a recording adds its own (git log --diff-filter=MDR -- workflows/testdata)", line)
		}
		if !strings.HasSuffix(line, ".json") {
			continue
		}
		if strings.HasPrefix(base, orderHistoryPrefix) || strings.HasPrefix(base, saleHistoryPrefix) {
			t.Errorf("a commit modified, deleted or renamed the history %s (git log --diff-filter=MDR -- workflows/testdata)", line)
		}
	}
	// The retired list may only gain lines.
	patch := git(t, "log", "--format=", "-p", "--", filepath.Join(historyDir, historyRetired))
	for _, line := range strings.Split(patch, "\n") {
		if strings.HasPrefix(line, "-") && !strings.HasPrefix(line, "---") {
			t.Errorf("a commit removed a line of %s: %q", historyRetired, line)
		}
	}
	// Uncommitted edits are caught by the checksums above; a history
	// changed and re-listed in the same uncommitted change is caught here.
	dirty := git(t, "status", "--porcelain", "--", historyDir)
	for _, line := range strings.Split(dirty, "\n") {
		if len(line) > 3 && (line[0] == 'M' || line[1] == 'M' || line[0] == 'D' || line[1] == 'D' || line[0] == 'R') &&
			(strings.HasSuffix(line, ".json") || strings.HasSuffix(line, ".sha256")) {
			t.Errorf("uncommitted change of a recorded history: %s", line)
		}
	}
	t.Logf("histories: %d files, all listed and unchanged", len(files))
}
