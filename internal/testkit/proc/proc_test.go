package proc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// state is the process's state letter in /proc/<pid>/stat (T: stopped).
func state(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, err)
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return fields[0]
}

// A process is started with its environment and log, frozen and thawed as
// a whole group, killed, and started again with the same arguments.
func TestAProcessIsFrozenThawedKilledAndRestarted(t *testing.T) {
	p := &Proc{Name: "sleeper", Bin: "bash", Args: []string{"-c", `echo "hello $WHO"; sleep 60 & wait`},
		Env: map[string]string{"WHO": "proc"}, LogPath: filepath.Join(t.TempDir(), "sleeper.log")}
	p.Ready = func(context.Context) error {
		if !strings.Contains(p.Log(), "hello proc") {
			return errors.New("no greeting yet")
		}
		return nil
	}
	require.NoError(t, p.Start(t.Context(), 10*time.Second))
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	require.True(t, p.Running())

	require.NoError(t, p.Freeze())
	require.True(t, p.Frozen())
	require.Eventually(t, func() bool { return state(t, p.Pid()) == "T" }, 5*time.Second, time.Millisecond, "SIGSTOP reaches the process")
	require.NoError(t, p.Thaw())
	require.False(t, p.Frozen())
	require.Eventually(t, func() bool { return state(t, p.Pid()) != "T" }, 5*time.Second, time.Millisecond, "SIGCONT resumes it")

	first := p.Pid()
	require.NoError(t, p.Kill())
	require.False(t, p.Running())
	require.ErrorContains(t, p.Signal(syscall.SIGTERM), "not running")

	require.NoError(t, p.Start(t.Context(), 10*time.Second))
	require.NotEqual(t, first, p.Pid())
	require.Eventually(t, func() bool { return strings.Count(p.Log(), "hello proc") == 2 }, 10*time.Second, 10*time.Millisecond,
		"the second run appends to the log")
	require.NoError(t, p.StopGracefully(5*time.Second), "SIGTERM ends it")
}

// A process that exits before it is ready fails WaitReady at once, naming
// its log; one that never becomes ready fails after within.
func TestReadinessFailures(t *testing.T) {
	dir := t.TempDir()
	gone := &Proc{Name: "gone", Bin: "true", LogPath: filepath.Join(dir, "gone.log"),
		Ready: func(context.Context) error { return errors.New("never") }}
	err := gone.Start(t.Context(), 10*time.Second)
	require.ErrorContains(t, err, "exited before it was ready")
	require.ErrorContains(t, err, gone.LogPath)

	slow := &Proc{Name: "slow", Bin: "sleep", Args: []string{"30"}, LogPath: filepath.Join(dir, "slow.log"),
		Ready: func(context.Context) error { return errors.New("not yet") }}
	t.Cleanup(func() { slow.Stop(5 * time.Second) })
	began := time.Now()
	require.ErrorContains(t, slow.Start(t.Context(), 500*time.Millisecond), "not ready within")
	require.Less(t, time.Since(began), 5*time.Second)

	missing := &Proc{Name: "missing", Bin: filepath.Join(dir, "no-such-binary"), LogPath: filepath.Join(dir, "missing.log")}
	require.Error(t, missing.Launch())
}

// HTTPReady wants a 200.
func TestHTTPReady(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(status.Load())) }))
	t.Cleanup(srv.Close)
	ready := HTTPReady(srv.URL)
	require.ErrorContains(t, ready(t.Context()), "answered 503")
	status.Store(http.StatusOK)
	require.NoError(t, ready(t.Context()))
	addr, err := FreeAddr()
	require.NoError(t, err)
	require.Error(t, HTTPReady("http://"+addr)(t.Context()), "nothing listens on a free port")
}

// An address once handed out is not handed out again, though its port is
// free again at once.
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
	}
}

// The process's CPU time grows with work done.
func TestSelfCPUCountsWork(t *testing.T) {
	before, err := SelfCPU()
	if err != nil {
		t.Fatal(err)
	}
	deadline, sink := time.Now().Add(20*time.Millisecond), 0
	for time.Now().Before(deadline) {
		sink++
	}
	after, err := SelfCPU()
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 5*time.Millisecond {
		t.Fatalf("CPU time grew by %v over 20 ms of work (%d rounds)", after-before, sink)
	}
}
