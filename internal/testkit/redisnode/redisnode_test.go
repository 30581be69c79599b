package redisnode

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// A single server has no cluster arguments; a cluster node has its bus and
// config file; a proxied node announces the proxy's port and its own bus.
func TestArgs(t *testing.T) {
	single := strings.Join(Args(Options{Port: 7000, Dir: "/d"}), " ")
	for _, want := range []string{"--port 7000", "--dir /d", "--appendonly yes", "--appendfsync everysec", "--save "} {
		if !strings.Contains(single, want) {
			t.Errorf("single server: no %q in %q", want, single)
		}
	}
	if strings.Contains(single, "cluster") || strings.Contains(single, "--logfile") {
		t.Errorf("single server: %q", single)
	}
	node := Args(Options{Port: 7001, Bus: 17001, Announce: 8001, Dir: "/n", LogFile: "/n/redis.log"})
	for _, pair := range [][2]string{{"--cluster-enabled", "yes"}, {"--cluster-port", "17001"}, {"--cluster-config-file", "/n/nodes.conf"},
		{"--cluster-node-timeout", "5000"}, {"--cluster-announce-port", "8001"}, {"--cluster-announce-bus-port", "17001"}, {"--logfile", "/n/redis.log"}} {
		i := slices.Index(node, pair[0])
		if i < 0 || i+1 >= len(node) || node[i+1] != pair[1] {
			t.Errorf("cluster node: %s is not %s in %q", pair[0], pair[1], node)
		}
	}
}

// The development and test services' redis-server (scripts/redis.sh) runs
// with the harnesses' durability settings: the shell and Go spell them
// apart, and this keeps them one.
func TestTheScriptKeepsTheDurabilitySettings(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "scripts", "redis.sh"))
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.ReplaceAll(string(src), "\\\n", " ")
	var line string
	for _, l := range strings.Split(joined, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "redis-server" {
			line = l
		}
	}
	if line == "" {
		t.Fatal("no redis-server command in scripts/redis.sh")
	}
	args := strings.Fields(strings.ReplaceAll(line, "''", `""`))
	for i := 0; i < len(Durability); i += 2 {
		flag, want := Durability[i], Durability[i+1]
		if want == "" {
			want = `""`
		}
		j := slices.Index(args, flag)
		if j < 0 || j+1 >= len(args) || args[j+1] != want {
			t.Errorf("scripts/redis.sh: %s is not %s in %q", flag, want, line)
		}
	}
}
