package bench

import (
	"testing"
	"time"
)

func TestParseCommandStatsReadsCallsByCommand(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_get:calls=10511,usec=5000,usec_per_call=0.48,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_xinfo|groups:calls=1846,usec=900,usec_per_call=0.49,rejected_calls=0,failed_calls=0\r\n"
	got, err := parseCommandStats(info)
	if err != nil {
		t.Fatal(err)
	}
	if got["get"] != 10511 || got["xinfo|groups"] != 1846 || len(got) != 2 {
		t.Fatalf("parsed %v", got)
	}
	if _, err := parseCommandStats("cmdstat_get:calls=x,usec=1\r\n"); err == nil {
		t.Fatal("a malformed count parsed")
	}
}

func TestMarketCostPerSaleIsTheGrowthOverSalesAndInstances(t *testing.T) {
	w := 10 * time.Second
	before := marketIdleCost{instances: 3, window: w, commands: 3_000}
	after := marketIdleCost{instances: 3, window: w, commands: 3_000 + 10*3*1_000*0.05, byCommand: map[string]int64{"get": 1500}}
	sc := marketScenario(marketFigures{n: 1_000, idle0: before, idleN: after})
	for _, f := range sc.Figures {
		if f.Name == "idle Redis commands/s per live sale per instance" {
			if f.Value < 0.0499 || f.Value > 0.0501 {
				t.Fatalf("per sale per instance: %v, want 0.05", f.Value)
			}
			return
		}
	}
	t.Fatal("no per-sale figure")
}
