package chaos

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The classes of the single mariadbd, as they were before the database
// failover was added: their order is what a seed's schedule draws from.
var singleDBClasses = []string{FAPIKill, FAPIFreeze, FWorkerKill, FWorkerFreeze, FRedisKill, FRedisFreeze, FMySQLKill, FMySQLFreeze,
	FMySQLDown, FTemporalKill, FTemporalFreeze, FLinkCut, FLinkSlow, FRedisAOFLoss, FRedisKeysDeleted, FWorkflowTerminate,
	FAPIDeploy, FWorkerDeploy, FRedisFailover}

// Without Galera a run draws no database failover, and the CI seeds'
// schedules are the ones they drew before it existed.
func TestTheDatabaseFailoverNeedsGalera(t *testing.T) {
	single := Options{}.FaultsFor(AllFaults)
	assert.Equal(t, singleDBClasses, single)
	for _, seed := range []int64{1, 3} {
		assert.Equal(t, Schedule(seed, 3*time.Minute, singleDBClasses), Schedule(seed, 3*time.Minute, single), "seed %d", seed)
	}
	for _, p := range Schedule(61, 10*time.Minute, single) {
		assert.NotContains(t, galeraFaults, p.Class)
	}
	assert.Empty(t, Options{}.FaultsFor(galeraFaults), "-faults db-failover-sigkill without -db galera injects nothing")
}

// With Galera the failover replaces the single mariadbd's kill, freeze and
// long outage, and a run of a few minutes draws several of it.
func TestGaleraRunsDrawTheDatabaseFailover(t *testing.T) {
	o := Options{DB: DBGalera}
	classes := o.FaultsFor(AllFaults)
	assert.Subset(t, classes, []string{FDBFailoverKill, FDBFailoverCut})
	for _, c := range singleDBFaults {
		assert.NotContains(t, classes, c)
	}
	assert.Len(t, classes, len(AllFaults)-len(singleDBFaults))
	assert.Equal(t, []string{FRedisKill, FDBFailoverCut}, o.FaultsFor([]string{FMySQLKill, FRedisKill, FDBFailoverCut}), "the order kept")
	both := Options{DB: DBGalera, Redis: RedisCluster}.FaultsFor(AllFaults)
	assert.NotContains(t, both, FRedisFailover)
	assert.Contains(t, both, FDBFailoverKill)

	plan := Schedule(62, 5*time.Minute, classes)
	failovers := 0
	for _, p := range plan {
		if !slices.Contains(galeraFaults, p.Class) {
			continue
		}
		failovers++
		assert.Equal(t, "mysql", resource(p))
		if p.At+p.Span < 5*time.Minute-5*time.Second { // the run's end shortens the last
			assert.GreaterOrEqual(t, p.Span, 10*time.Second, "past the 6 s after which the others go on without the node: %+v", p)
		}
		assert.Contains(t, CrowdTimes([]Planned{p}), max(p.At-crowdLead, 0), "a crowd arrives before the writer fails")
	}
	assert.GreaterOrEqual(t, failovers, 2, "a 5-minute run fails the writer over more than once: %v", plan)
}

// Two database failovers never overlap: the second starts after the first
// healed (its node rejoined).
func TestDatabaseFailoversNeverOverlap(t *testing.T) {
	plan := Schedule(62, 10*time.Minute, Options{DB: DBGalera}.FaultsFor([]string{FDBFailoverKill, FDBFailoverCut, FRedisKill}))
	var last *Planned
	for i, p := range plan {
		if resource(p) != "mysql" {
			continue
		}
		if last != nil {
			assert.GreaterOrEqual(t, p.At, last.At+last.Span, "%+v after %+v", p, *last)
		}
		last = &plan[i]
	}
	assert.NotNil(t, last)
}

func TestGaleraReportName(t *testing.T) {
	assert.Equal(t, "galera-62", Options{Seed: 62, DB: DBGalera}.ReportName())
	assert.Equal(t, "62", Options{Seed: 62, DB: DBSingle}.ReportName())
}

// A database failover on one mariadbd, or the single server's faults on
// the cluster, are refused rather than acting on something else.
func TestDatabaseFaultsNeedTheirDatabase(t *testing.T) {
	n := &Nemesis{D: &Deployment{}}
	for _, c := range galeraFaults {
		heal, _, _, err := n.inject(context.Background(), Planned{Class: c})
		assert.Nil(t, heal)
		assert.ErrorContains(t, err, "-db galera", c)
	}
	for _, c := range singleDBFaults {
		heal, _, _, err := n.inject(context.Background(), Planned{Class: c})
		assert.Nil(t, heal)
		assert.ErrorContains(t, err, "single mariadbd", c)
	}
}

// The report says the database was the cluster and how to replay it.
func TestGaleraReportHeader(t *testing.T) {
	r := &Result{Opts: Options{Seed: 62, Duration: 5 * time.Minute, DB: DBGalera, Faults: []string{FDBFailoverKill}}}
	md := r.Markdown()
	assert.Contains(t, md, "# Chaos run, seed 62 (Galera)")
	assert.Contains(t, md, "-duration 5m0s -db galera -faults db-failover-sigkill")
	assert.Contains(t, md, "a three-node Galera cluster behind HAProxy")
}
