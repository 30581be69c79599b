// Package buildinfo says which build of seckill is running: its version
// and commit, for `seckill version`, the seckill_build_info metric and the
// traces' service.version.
package buildinfo

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Stamped by the build with -ldflags "-X
// github.com/seckill/seckill/internal/buildinfo.version=... -X
// github.com/seckill/seckill/internal/buildinfo.commit=...": set, they win
// over what the toolchain embedded, which is nothing where it sees no VCS
// (an image built from a clone without .git, a -buildvcs=false build, a
// git worktree).
var (
	version string
	commit  string
)

// devel is the toolchain's version of a build without a module version.
const devel = "(devel)"

// Info is one build's identity.
type Info struct {
	Version   string // the stamped version, else the module's, else (devel)
	Commit    string // the stamped commit, else vcs.revision, else unknown
	Modified  bool   // built from a tree with uncommitted changes
	Time      string // the commit's time (vcs.time), when known
	GoVersion string
}

// Read is this binary's build identity.
func Read() Info {
	info := Info{Version: devel, Commit: "unknown", GoVersion: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.GoVersion = bi.GoVersion
		if bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			case "vcs.time":
				info.Time = s.Value
			}
		}
	}
	if version != "" {
		info.Version = version
	}
	if commit != "" {
		info.Commit = commit
	}
	return info
}

// ServiceVersion names the build in one word: its version, or its commit
// when it has none.
func (i Info) ServiceVersion() string {
	if i.Version == devel && i.Commit != "unknown" {
		return i.Commit
	}
	return i.Version
}

// String is the line `seckill version` prints.
func (i Info) String() string {
	modified, built := "", ""
	if i.Modified {
		modified = " (modified)"
	}
	if i.Time != "" {
		built = " " + i.Time
	}
	return fmt.Sprintf("seckill %s commit %s%s%s %s", i.Version, i.Commit, modified, built, i.GoVersion)
}

// Collector is the gauge seckill_build_info{version,commit,go_version} = 1
// of this build, for a process's registry: a dashboard or an alert joins
// on it to tell which build a series comes from (during a rolling deploy,
// two).
func Collector() prometheus.Collector {
	i := Read()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "seckill_build_info",
		Help:        "The running build: version, commit and Go version as labels; always 1.",
		ConstLabels: prometheus.Labels{"version": i.Version, "commit": i.Commit, "go_version": i.GoVersion},
	})
	g.Set(1)
	return g
}
