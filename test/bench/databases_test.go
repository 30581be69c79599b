package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseDatabasesWantsTwoKnownTiers(t *testing.T) {
	tiers, err := ParseDatabases("single, galera")
	require.NoError(t, err)
	require.Equal(t, []string{DBSingle, DBGalera}, tiers)
	for _, bad := range []string{"single", "single,single", "single,aurora", ""} {
		_, err := ParseDatabases(bad)
		require.Error(t, err, bad)
	}
}

func TestMedianOfRounds(t *testing.T) {
	require.Equal(t, 0.0, median(nil))
	require.Equal(t, 5.0, median([]float64{9, 1, 5}))
	require.Equal(t, 4.0, median([]float64{6, 2}), "of two, their mean")
}

// The side-by-side scenario compares each tier's median with the first
// tier's, keeps every round's value, and leaves out a scenario not run.
func TestTiersScenarioComparesMedians(t *testing.T) {
	got := map[string]tierRuns{
		DBSingle: {"5/accepted/s (202)": {400, 500, 450}, "5/p99 of the 202s": {10, 30, 20}},
		DBGalera: {"5/accepted/s (202)": {300, 200, 100}, "5/p99 of the 202s": {40, 60, 50}},
	}
	sc := tiersScenario([]string{DBSingle, DBGalera}, 3, got)
	byName := map[string]float64{}
	for _, f := range sc.Figures {
		byName[f.Name] = f.Value
	}
	require.Equal(t, 450.0, byName["single: accepted/s (202) (median)"])
	require.Equal(t, 200.0, byName["galera: accepted/s (202) (median)"])
	require.InDelta(t, 200.0/450, byName["galera: accepted/s (202) / single"], 1e-9)
	require.InDelta(t, 2.5, byName["galera: p99 of the 202s / single"], 1e-9)
	require.NotContains(t, byName, "single: orders drained/s (median)", "scenario 3 did not run")
	require.Contains(t, sc.Notes, "galera, accepted/s (202), each round: 300, 200, 100")
}
