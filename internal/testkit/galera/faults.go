package galera

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/testkit/proc"
)

// Addr is HAProxy's address, the cluster's one endpoint.
func (c *Cluster) Addr() string { return c.addr }

// DSN is a DSN of database through HAProxy, as root.
func (c *Cluster) DSN(database string) string { return "root@tcp(" + c.addr + ")/" + database }

// Nodes are the cluster's nodes, in HAProxy's order of preference.
func (c *Cluster) Nodes() []Node { return append([]Node(nil), c.nodes...) }

// Exec runs stmt through HAProxy (on the writer).
func (c *Cluster) Exec(ctx context.Context, stmt string) error {
	db, err := sql.Open("mysql", c.DSN("")+"?timeout=2s&readTimeout=10s&writeTimeout=10s")
	if err != nil {
		return fmt.Errorf("galera: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("galera: %s: %w", stmt, err)
	}
	return nil
}

// Writer is the node a new connection through HAProxy reaches.
func (c *Cluster) Writer(ctx context.Context) (int, error) {
	db, err := sql.Open("mysql", c.DSN("")+"?timeout=1s&readTimeout=1s&writeTimeout=1s")
	if err != nil {
		return -1, fmt.Errorf("galera: %w", err)
	}
	defer db.Close()
	var port int
	if err := db.QueryRowContext(ctx, "SELECT @@port").Scan(&port); err != nil {
		return -1, fmt.Errorf("galera: writer through HAProxy: %w", err)
	}
	for i, n := range c.nodes {
		if n.Port == port {
			return i, nil
		}
	}
	return -1, fmt.Errorf("galera: HAProxy reached port %d, no node's", port)
}

// WaitWriter waits until HAProxy routes new connections to a node other
// than old, and returns it.
func (c *Cluster) WaitWriter(ctx context.Context, old int) (int, error) {
	w := -1
	err := proc.Poll(ctx, 0, "a writer other than "+c.nodes[old].Name, func(ctx context.Context) error {
		var err error
		if w, err = c.Writer(ctx); err == nil && w == old {
			err = errors.New("still " + c.nodes[old].Name)
		}
		return err
	})
	return w, err
}

// WaitWriterIs waits until HAProxy routes new connections to node i.
func (c *Cluster) WaitWriterIs(ctx context.Context, i int) error {
	return proc.Poll(ctx, 0, c.nodes[i].Name+" the writer", func(ctx context.Context) error {
		w, err := c.Writer(ctx)
		if err == nil && w != i {
			err = errors.New("the writer is " + c.nodes[w].Name)
		}
		return err
	})
}

// State reads node i's state over its Unix socket, which its cut does
// not reach.
func (c *Cluster) State(ctx context.Context, i int) (State, error) {
	db, err := sql.Open("mysql", "root@unix("+c.nodes[i].Socket()+")/?timeout=1s&readTimeout=2s")
	if err != nil {
		return State{}, fmt.Errorf("galera: %w", err)
	}
	defer db.Close()
	return ReadState(ctx, db)
}

// members are the nodes running and not cut.
func (c *Cluster) members() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, p := range c.procs {
		if _, cut := c.cut[i]; p.Running() && !cut {
			out = append(out, i)
		}
	}
	return out
}

// WaitSynced waits until every node running and not cut is Writable in
// one component of them all.
func (c *Cluster) WaitSynced(ctx context.Context) error {
	return proc.Poll(ctx, 0, "every member Synced", func(ctx context.Context) error {
		m := c.members()
		for _, i := range m {
			s, err := c.State(ctx, i)
			if err != nil {
				return fmt.Errorf("%s: %w", c.nodes[i].Name, err)
			}
			if !s.Writable() || s.ClusterSize != len(m) {
				return fmt.Errorf("%s: %s, not Synced among %d", c.nodes[i].Name, s, len(m))
			}
		}
		return nil
	})
}

// Kill sends node i SIGKILL and waits for its exit.
func (c *Cluster) Kill(i int) error { return c.procs[i].Kill() }

// Restart starts node i again and returns once it rejoined: Synced in
// one component of every member (by incremental transfer, or by a full
// copy when its position was lost with the kill).
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if err := c.procs[i].Start(ctx, 5*time.Minute); err != nil {
		return fmt.Errorf("galera: restart %s: %w", c.nodes[i].Name, err)
	}
	return c.WaitSynced(ctx)
}

// Cut cuts node i's network while it keeps running: from its return on,
// nothing node i sends arrives. WaitCut waits for the cluster to see it.
func (c *Cluster) Cut(ctx context.Context, i int) error {
	if c.noCut != nil {
		return fmt.Errorf("galera: no cut: %w", c.noCut)
	}
	table := fmt.Sprintf("seckill_galera_%d_%d", os.Getpid(), c.nodes[i].Port)
	if err := applyCut(ctx, table, c.cgroups[i]); err != nil {
		return fmt.Errorf("galera: cut %s: %w", c.nodes[i].Name, err)
	}
	c.mu.Lock()
	c.cut[i] = table
	c.mu.Unlock()
	return nil
}

// WaitCut returns once the others formed a component without the cut
// node i and it knows itself outside the primary component.
func (c *Cluster) WaitCut(ctx context.Context, i int) error {
	if err := c.WaitSynced(ctx); err != nil {
		return fmt.Errorf("galera: the others after %s's cut: %w", c.nodes[i].Name, err)
	}
	return proc.Poll(ctx, 0, c.nodes[i].Name+" outside the primary component", func(ctx context.Context) error {
		s, err := c.State(ctx, i)
		if err == nil && s.Primary {
			err = fmt.Errorf("%s: %s", c.nodes[i].Name, s)
		}
		return err
	})
}

// Heal restores node i's network and returns once it rejoined.
func (c *Cluster) Heal(ctx context.Context, i int) error {
	c.mu.Lock()
	table, ok := c.cut[i]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	if err := removeCut(ctx, table); err != nil {
		return fmt.Errorf("galera: heal %s: %w", c.nodes[i].Name, err)
	}
	c.mu.Lock()
	delete(c.cut, i)
	c.mu.Unlock()
	return c.WaitSynced(ctx)
}

// Stop heals every cut and stops HAProxy, the agents and the nodes.
func (c *Cluster) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.mu.Lock()
	for i, table := range c.cut {
		_ = removeCut(ctx, table)
		delete(c.cut, i)
	}
	c.mu.Unlock()
	if c.haproxy != nil {
		c.haproxy.Stop(5 * time.Second)
	}
	for _, a := range c.agents {
		_ = a.Close()
	}
	for _, p := range c.procs {
		p.Stop(20 * time.Second)
	}
	for _, db := range c.dbs {
		_ = db.Close()
	}
	for _, cg := range c.cgroups {
		if cg != "" {
			removeCgroup(cg)
		}
	}
}

// Logs are the tails of every process's log, for a failing test.
func (c *Cluster) Logs() string {
	var b strings.Builder
	all := append([]*proc.Proc(nil), c.procs...)
	if c.haproxy != nil {
		all = append(all, c.haproxy)
	}
	for _, p := range all {
		lines := strings.Split(strings.TrimSpace(p.Log()), "\n")
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.Name, p.LogPath, strings.Join(lines[max(0, len(lines)-30):], "\n"))
	}
	return b.String()
}
