package galera

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// The cluster forms behind HAProxy; a row written through HAProxy (on
// the writer) is read on every other node; SIGKILLed, the writer's place
// goes to the next node and the killed node rejoins with the rows written
// meanwhile; a node whose network is cut leaves the primary component
// while it runs, HAProxy routes around it, and it rejoins once healed.
func TestClusterFailsOverAndRejoins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs())
		}
	})
	must(t, c.Exec(ctx, "CREATE DATABASE h"))
	must(t, c.Exec(ctx, "CREATE TABLE h.t (id INT PRIMARY KEY, v VARCHAR(16))"))
	must(t, c.Exec(ctx, "INSERT INTO h.t VALUES (1, 'first')"))
	for i := 1; i < 3; i++ {
		wantRows(ctx, t, c, i, 1)
	}

	must(t, c.Kill(0))
	killed := time.Now()
	w, err := c.WaitWriter(ctx, 0)
	must(t, err)
	must(t, c.Exec(ctx, "INSERT INTO h.t VALUES (2, 'after kill')"))
	t.Logf("SIGKILL: %s writes through HAProxy %s after the kill", c.nodes[w].Name, time.Since(killed).Round(time.Millisecond))
	if w != 1 {
		t.Errorf("the first backup takes over: %s did", c.nodes[w].Name)
	}
	must(t, c.Restart(ctx, 0))
	wantRows(ctx, t, c, 0, 2)

	// The first node is back: HAProxy moves back to it. Cut it.
	must(t, c.WaitWriterIs(ctx, 0))
	cutAt := time.Now()
	must(t, c.Cut(ctx, 0))
	must(t, c.WaitCut(ctx, 0))
	w, err = c.WaitWriter(ctx, 0)
	must(t, err)
	must(t, c.Exec(ctx, "INSERT INTO h.t VALUES (3, 'after cut')"))
	t.Logf("cut: %s writes through HAProxy %s after the cut", c.nodes[w].Name, time.Since(cutAt).Round(time.Millisecond))
	s, err := c.State(ctx, 0)
	must(t, err)
	if s.Primary || s.Writable() {
		t.Errorf("the cut node still counts itself in the primary component: %s", s)
	}
	must(t, c.Heal(ctx, 0))
	wantRows(ctx, t, c, 0, 3)
}

// wantRows waits until node i holds n rows of h.t.
func wantRows(ctx context.Context, t *testing.T, c *Cluster, i, n int) {
	t.Helper()
	db, err := sql.Open("mysql", "root@tcp("+c.nodes[i].Addr()+")/h?timeout=2s&readTimeout=5s")
	must(t, err)
	defer db.Close()
	err = proc.Poll(ctx, 0, "rows on "+c.nodes[i].Name, func(ctx context.Context) error {
		var got int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&got); err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("%d rows, not %d", got, n)
		}
		return nil
	})
	must(t, err)
}

// HAProxy prefers the first node, holds the others as backups, and
// checks each through its agent at the harness's pace.
func TestHAProxyConfig(t *testing.T) {
	cfg := HAProxyConfig("127.0.0.1:3306", "/d/haproxy.sock", []HAProxyServer{
		{Name: "node-1", Addr: "127.0.0.1:3307", Check: "127.0.0.1:9201"},
		{Name: "node-2", Addr: "127.0.0.1:3308", Check: "127.0.0.1:9202"},
	})
	for _, want := range []string{"bind 127.0.0.1:3306", "mode tcp", "option httpchk GET /", "http-check expect status 200",
		"inter 500ms fall 2 rise 2 on-marked-down shutdown-sessions on-marked-up shutdown-backup-sessions",
		"server node-1 127.0.0.1:3307 check addr 127.0.0.1 port 9201\n",
		"server node-2 127.0.0.1:3308 check addr 127.0.0.1 port 9202 backup\n"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("no %q in\n%s", want, cfg)
		}
	}
}

// The check answers 503 for a node it cannot read, with the reason.
func TestCheckDownWhenTheNodeDoesNotAnswer(t *testing.T) {
	db, err := OpenCheck("127.0.0.1:1")
	must(t, err)
	defer db.Close()
	rec := httptest.NewRecorder()
	CheckHandler(db).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.HasPrefix(rec.Body.String(), "down: ") {
		t.Errorf("a node that does not answer: %d %q", rec.Code, rec.Body.String())
	}
	for _, s := range []State{{Ready: true, Primary: true, Local: "Donor/Desynced", ClusterSize: 3},
		{Ready: false, Primary: false, Local: "Initialized", ClusterSize: 1}, {Ready: true, Primary: false, Local: "Synced", ClusterSize: 1}} {
		if s.Writable() {
			t.Errorf("writable: %s", s)
		}
	}
	if s := (State{Ready: true, Primary: true, Local: "Synced", ClusterSize: 2}); !s.Writable() {
		t.Errorf("not writable: %s", s)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The development stack's cluster (scripts/galera.sh) runs with the
// tests' provider options: the shell and Go spell them apart, and this
// keeps them one.
func TestTheScriptKeepsTheTuning(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "scripts", "galera.sh"))
	must(t, err)
	if want := `tuning="` + Tuning + `"`; !strings.Contains(string(src), want) {
		t.Errorf("scripts/galera.sh does not set %s", want)
	}
	for _, want := range []string{"--wsrep-sst-method=rsync", "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2", "--wsrep-provider=" + Provider} {
		if !strings.Contains(string(src), want) {
			t.Errorf("scripts/galera.sh does not pass %s", want)
		}
	}
}
