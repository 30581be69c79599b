package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHelpPrintsUsageAndDoesNothingElse: --help lists both modes and the
// flags and exits 0 without connecting anywhere.
func TestHelpPrintsUsageAndDoesNothingElse(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"baseline", "--help"}} {
		var out, errOut bytes.Buffer
		require.Equal(t, 0, realMain(args, &out, &errOut), "%v: %s", args, errOut.String())
		require.Contains(t, out.String(), "usage: seckill-bench")
		require.Contains(t, out.String(), "-redis")
		require.Empty(t, errOut.String(), "%v logged: nothing may run", args)
	}
	var out, errOut bytes.Buffer
	realMain([]string{"--help"}, &out, &errOut)
	require.Contains(t, out.String(), "seckill-bench baseline")
	require.Equal(t, 2, realMain([]string{"-bogus"}, &out, &errOut))
	require.Equal(t, 2, realMain([]string{"baseline", "extra"}, &out, &errOut))
}

// A -db run that cannot run is refused before anything starts.
func TestDatabaseTiersAreCheckedFirst(t *testing.T) {
	for _, args := range [][]string{
		{"-db", "single"},
		{"-db", "single,galera", "-rounds", "0"},
		{"-db", "single,galera", "-ab", "K=V"},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, 1, realMain(args, &out, &errOut), "%v", args)
		require.NotContains(t, errOut.String(), "bench starting", "%v started", args)
	}
}
