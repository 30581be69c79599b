package chaos

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The mechanisms are counted from the processes' JSON log lines; a line
// that only resembles one is not counted.
func TestCountMechanisms(t *testing.T) {
	log := `{"time":"x","level":"WARN","msg":"circuit breaker state change","breaker":"redis","from":"closed","to":"open"}
{"time":"x","level":"WARN","msg":"circuit breaker state change","breaker":"redis","from":"open","to":"half-open"}
{"time":"x","level":"WARN","msg":"reserve: redis","sale_id":3,"err":"client-side stall: reserve script: context deadline exceeded"}
{"time":"x","level":"WARN","msg":"reserve: redis","sale_id":3,"err":"reserve script: context deadline exceeded"}
{"time":"x","level":"INFO","msg":"resync: sale is back on Redis","sale_id":3}
{"time":"x","level":"INFO","msg":"relay: reclaimed pending inbox entries","sale":3,"entries":4}
{"time":"x","level":"INFO","msg":"reconcile: repaired by starting the token's workflow","sale_id":3}
{"time":"x","level":"INFO","msg":"reconcile: rebuilt Redis stock from the database","sale_id":3}
{"time":"x","level":"WARN","msg":"reconcile: repair start failed","sale_id":3}
{"time":"x","level":"ERROR","msg":"relay: inbox entry dead-lettered","sale":3}`
	got := map[string]int{}
	countMechanisms(log, got)
	assert.Equal(t, map[string]int{MBreakerOpened: 1, MClientStall: 1, MResync: 1, MReclaim: 1, MRepair: 2, MDeadLetter: 1}, got)
}

func TestHistoryRoundTripsThroughItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	r, err := NewRecorder(path)
	require.NoError(t, err)
	h, _ := sound()
	for _, e := range h {
		r.Add(e)
	}
	require.NoError(t, r.Close())
	back, err := ReadHistory(path)
	require.NoError(t, err)
	require.Len(t, back, len(h))
	for i := range h {
		assert.Equal(t, int64(i+1), back[i].Seq)
		assert.True(t, h[i].T.Equal(back[i].T))
		assert.Equal(t, h[i].Token, back[i].Token)
	}
}

func TestCountAndReport(t *testing.T) {
	h, f := sound()
	c := Count(h)
	assert.Equal(t, 4, c.Accepted)
	assert.Equal(t, 1, c.Paid)
	assert.Equal(t, 1, c.Refunds)
	assert.Equal(t, 2, c.Cancelled)
	assert.Equal(t, 1, c.Faults)
	assert.Equal(t, 1, c.ByOp[OpReserve]["503 unavailable"])

	vs, checked := Check(h, f)
	r := &Result{Opts: Options{Seed: 7, Duration: time.Minute, Faults: AllFaults}, Started: t0, WorkloadEnd: at(40), QuietEnd: at(99),
		History: h, Final: f, Violations: vs, Checked: checked, Sales: []SaleSpec{{ID: 1, Stock: 3, WindowSeconds: 10}}}
	md := r.Markdown()
	assert.Contains(t, md, "no violation")
	assert.Contains(t, md, "| redis-sigkill | redis | 4.0 | 4.0 |")
	png := filepath.Join(t.TempDir(), "7.png")
	require.NoError(t, r.DrawChart(png))

	// A violation is printed with the history around it.
	f.Sales[0].Refunds = nil
	r.Violations, _ = Check(h, f)
	md = r.Markdown()
	assert.Contains(t, md, "1 violations")
	assert.Contains(t, md, "webhook")
}
