// Package galera is how the test harnesses run a replicated MariaDB: a
// three-node Galera cluster (Debian's galera-4) with one writer at a time
// behind HAProxy, the shape docs/deploy.md describes. Each node is a
// mariadbd of mariadbnode's arguments with the wsrep settings added; the
// first is bootstrapped, the others join it by state transfer (rsync).
// HAProxy sends every client to the first node that its check finds
// Synced in the primary component, the others being backups, so every
// write reaches one node. A test can SIGKILL a node (Kill), cut its
// network while it keeps running (Cut, Heal) and start it again to rejoin
// (Restart). A cut takes root: it moves the node into a cgroup and adds
// nftables rules (cut.go). scripts/galera.sh runs the development stack's
// cluster with the same settings.
package galera

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/testkit/mariadbnode"
	"github.com/seckill/seckill/internal/testkit/proc"
)

// Provider is Debian's galera-4 library.
const Provider = "/usr/lib/galera/libgalera_smm.so"

// ClusterName names the cluster every node joins.
const ClusterName = "seckill"

// Tuning are the provider options every node shares (scripts/mariadb.sh
// passes the same, TestTheScriptKeepsTheTuning): a node silent for 3 s is
// suspected and one silent for 6 s leaves the component, so the survivors
// go on writing within seconds of a node's death instead of the defaults'
// 15 s; the write-set cache keeps enough history for a node that was away
// a few minutes to rejoin by incremental transfer (IST) instead of a full
// copy.
const Tuning = "gcache.size=64M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S"

// The health check's settings in HAProxy (haproxy.go): a check every
// CheckInterval, a node down after two failed checks in a row and up after
// two good ones, each bounded by CheckTimeout.
const (
	CheckInterval = 500 * time.Millisecond
	CheckTimeout  = time.Second
)

// Node is one cluster member's addresses and directory.
type Node struct {
	Name string
	// Port serves clients; Gcomm is group communication, IST the
	// incremental state transfer's receiver, SST the full copy's.
	Port, Gcomm, IST, SST int
	Dir                   string
}

// Addr is the node's client address.
func (n Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Port) }

// Socket is the node's Unix socket, which reaches it even while its
// network is cut.
func (n Node) Socket() string { return filepath.Join(n.Dir, "mysqld.sock") }

// Options are mariadbnode's options of node n.
func (n Node) Options() mariadbnode.Options {
	// Not durable: a killed node's last second of commits lives on in the
	// other nodes, and it rejoins by state transfer.
	return mariadbnode.Options{Port: n.Port, Dir: n.Dir, MaxConns: 300, BufferPool: "64M", User: nodeUser()}
}

// Args are mariadbd's arguments for n in a cluster of peers (every
// node's Gcomm port, n's included).
func Args(n Node, peers []int) []string {
	addrs := make([]string, len(peers))
	for i, p := range peers {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	provider := fmt.Sprintf("gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;%s", n.Gcomm, n.IST, Tuning)
	return append(mariadbnode.Args(n.Options()),
		"--wsrep-on=ON", "--wsrep-provider="+Provider, "--wsrep-cluster-name="+ClusterName,
		"--wsrep-node-name="+n.Name, "--wsrep-cluster-address=gcomm://"+strings.Join(addrs, ","),
		"--wsrep-node-address=127.0.0.1:"+strconv.Itoa(n.Gcomm), "--wsrep-provider-options="+provider,
		"--wsrep-sst-method=rsync", "--wsrep-sst-receive-address=127.0.0.1:"+strconv.Itoa(n.SST),
		"--binlog-format=ROW", "--innodb-autoinc-lock-mode=2")
}

// nodeUser runs the nodes: the rsync daemon of a state transfer runs as
// nobody when started by root, and cannot write a root-owned data
// directory, so root runs them as Debian's mysql account.
func nodeUser() string {
	if os.Geteuid() != 0 {
		return mariadbnode.User()
	}
	if _, err := user.Lookup("mysql"); err == nil {
		return "mysql"
	}
	return "root"
}

// ownDir makes dir the node user's and lets that user reach it: every
// directory above it gains the others' search bit (temporary directories
// are created 0700).
func ownDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("galera: %w", err)
	}
	if os.Geteuid() != 0 || nodeUser() == "root" {
		return nil
	}
	u, err := user.Lookup(nodeUser())
	if err != nil {
		return fmt.Errorf("galera: %w", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return fmt.Errorf("galera: uid of %s: %w", u.Username, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return fmt.Errorf("galera: gid of %s: %w", u.Username, err)
	}
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	}); err != nil {
		return fmt.Errorf("galera: own %s: %w", dir, err)
	}
	for d := filepath.Dir(dir); d != filepath.Dir(d); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("galera: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("galera: %w", err)
			}
		}
	}
	return nil
}

// freePorts are n free loopback ports.
func freePorts(n int) ([]int, error) {
	out := make([]int, n)
	for i := range out {
		addr, err := proc.FreeAddr()
		if err != nil {
			return nil, err
		}
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("galera: %w", err)
		}
		if out[i], err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("galera: %w", err)
		}
	}
	return out, nil
}

// needBinaries fails, naming the Debian package, when a program the
// cluster needs is missing.
func needBinaries() error {
	var missing []string
	for _, b := range [][2]string{{"mariadbd", "mariadb-server"}, {"wsrep_sst_rsync", "mariadb-server"}, {"rsync", "rsync"}, {"haproxy", "haproxy"}} {
		if _, err := exec.LookPath(b[0]); err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian's %s)", b[0], b[1]))
		}
	}
	if _, err := os.Stat(Provider); err != nil {
		missing = append(missing, Provider+" (Debian's galera-4)")
	}
	if len(missing) > 0 {
		return errors.New("galera: missing " + strings.Join(missing, ", ") + "; scripts/test.sh installs them")
	}
	return nil
}
