package buildinfo

import (
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// stamp sets the -ldflags -X variables for one test.
func stamp(t *testing.T, v, c string) {
	t.Helper()
	oldV, oldC := version, commit
	t.Cleanup(func() { version, commit = oldV, oldC })
	version, commit = v, c
}

// A stamped version and commit win over the toolchain's; unstamped, the
// toolchain's are used (a test binary has no VCS stamp: (devel), unknown).
func TestStampedValuesWin(t *testing.T) {
	stamp(t, "", "")
	plain := Read()
	if plain.GoVersion != runtime.Version() {
		t.Errorf("go version %q, want %q", plain.GoVersion, runtime.Version())
	}
	if plain.Version == "" || plain.Commit == "" {
		t.Fatalf("empty identity: %+v", plain)
	}
	stamp(t, "v1.4.0", "0123abcd")
	got := Read()
	if got.Version != "v1.4.0" || got.Commit != "0123abcd" || got.ServiceVersion() != "v1.4.0" {
		t.Fatalf("stamped build read as %+v (service version %q)", got, got.ServiceVersion())
	}
	if !regexp.MustCompile(`^seckill v1\.4\.0 commit 0123abcd.* go1\.\d+`).MatchString(got.String()) {
		t.Errorf("version line %q", got.String())
	}
}

// A build with no module version is named by its commit in traces.
func TestServiceVersionFallsBackToTheCommit(t *testing.T) {
	if got := (Info{Version: devel, Commit: "0123abcd"}).ServiceVersion(); got != "0123abcd" {
		t.Errorf("service version %q", got)
	}
	if got := (Info{Version: devel, Commit: "unknown"}).ServiceVersion(); got != devel {
		t.Errorf("service version %q", got)
	}
}

// /metrics served from a registry holding the collector carries
// seckill_build_info = 1 with the build's labels.
func TestBuildInfoIsExported(t *testing.T) {
	stamp(t, "v1.4.0", "0123abcd")
	reg := prometheus.NewRegistry()
	if err := reg.Register(Collector()); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	want := `seckill_build_info{commit="0123abcd",go_version="` + runtime.Version() + `",version="v1.4.0"} 1`
	if !strings.Contains(rec.Body.String(), want) {
		t.Fatalf("/metrics lacks %s:\n%s", want, rec.Body.String())
	}
}
