package chaos

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/seckill/seckill/internal/testkit/galera"
)

// With Options.Galera the run's database is a three-node Galera cluster
// behind HAProxy (internal/testkit/galera), every process's MySQL link
// going through its own proxy to HAProxy's one address. The database
// failover classes act on the node HAProxy writes to at the fault: SIGKILL
// (FDBFailoverKill) or its network cut while it runs (FDBFailoverCut). The
// others form the primary component without it within galera.Tuning's
// timeouts, HAProxy's check moves every new connection to the next node,
// and at the heal the old writer rejoins (restarted, or its network
// restored), after which HAProxy moves the writes back to it: every fault
// is two changes of writer.

// galeraStart bounds the cluster's start: the first node installed and
// bootstrapped, the others joined by a full copy each.
const galeraStart = 5 * time.Minute

// galeraRejoin bounds a node's rejoin at a heal (an incremental transfer,
// or a full copy when the kill lost its position).
const galeraRejoin = 5 * time.Minute

// startGalera starts the cluster and creates the run's database on it.
func (d *Deployment) startGalera(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, galeraStart)
	defer cancel()
	c, err := galera.Start(sctx, galera.Options{Dir: filepath.Join(d.Dir, "galera")})
	if err != nil {
		return err
	}
	d.Galera = c
	if err := c.Exec(sctx, "CREATE DATABASE IF NOT EXISTS "+chaosDB); err != nil {
		return err
	}
	d.MySQLAddr = c.Addr()
	return d.openDB(c.Addr())
}

// healGalera rejoins every node a fault left out (its heal failed or
// never ran): a cut one has its network back, a dead one starts again;
// it returns once every node is Synced in one component.
func (d *Deployment) healGalera(ctx context.Context) error {
	c := d.Galera
	rctx, cancel := context.WithTimeout(ctx, galeraRejoin)
	defer cancel()
	var errs []error
	for i := range c.Nodes() {
		if err := c.Heal(rctx, i); err != nil {
			errs = append(errs, err)
			continue
		}
		sctx, scancel := context.WithTimeout(rctx, 5*time.Second)
		_, err := c.State(sctx, i)
		scancel()
		if err != nil {
			// Its own socket does not answer: the node is down.
			errs = append(errs, c.Restart(rctx, i))
		}
	}
	return errors.Join(append(errs, c.WaitSynced(rctx))...)
}

// dbFailover fails the writer: SIGKILL or a cut, as p's class says. A note
// records which node HAProxy moved the writes to and how soon; the heal
// rejoins the old writer.
func (n *Nemesis) dbFailover(ctx context.Context, p Planned) (func(context.Context) error, string, int64, error) {
	c := n.D.Galera
	if c == nil {
		return nil, "galera", 0, fmt.Errorf("%s needs the Galera cluster (-db galera)", p.Class)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	w, err := c.Writer(wctx)
	if err != nil {
		return nil, "galera writer", 0, err
	}
	name := c.Nodes()[w].Name + " (writer)"
	var rejoin func(context.Context) error
	switch p.Class {
	case FDBFailoverKill:
		if err := c.Kill(w); err != nil {
			return nil, name, 0, err
		}
		rejoin = func(ctx context.Context) error { return c.Restart(ctx, w) }
	case FDBFailoverCut:
		if err := c.Cut(wctx, w); err != nil {
			return nil, name, 0, err
		}
		rejoin = func(ctx context.Context) error {
			// The cut was real: the others went on without the node, and
			// it knows itself outside the primary component.
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			seen := c.WaitCut(wctx, w)
			cancel()
			return errors.Join(seen, c.Heal(ctx, w))
		}
	default:
		return nil, name, 0, fmt.Errorf("%s is no database failover", p.Class)
	}
	moved := n.noteNewWriter(ctx, p, w)
	return func(ctx context.Context) error {
		<-moved
		rctx, cancel := context.WithTimeout(ctx, galeraRejoin)
		defer cancel()
		if err := rejoin(rctx); err != nil {
			return err
		}
		return n.noteFailBack(rctx, p, w)
	}, name, 0, nil
}

// noteNewWriter waits (up to a minute) for HAProxy to route to a node
// other than old and notes it with the time it took; the channel closes
// when the note is written.
func (n *Nemesis) noteNewWriter(ctx context.Context, p Planned, old int) <-chan struct{} {
	c, at := n.D.Galera, time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		ev := Event{Kind: KindNote, Op: p.Class, FaultID: p.ID}
		w, err := c.WaitWriter(wctx, old)
		if err != nil {
			ev.Detail = fmt.Sprintf("no other writer: %v", err)
		} else {
			ev.Target = c.Nodes()[w].Name
			ev.Detail = fmt.Sprintf("HAProxy writes to %s %.1f s after the fault;", ev.Target, time.Since(at).Seconds())
		}
		n.H.Add(ev)
	}()
	return done
}

// noteFailBack waits for HAProxy to route to the rejoined node again, when
// it is the first in HAProxy's order (the others are its backups), and
// notes it.
func (n *Nemesis) noteFailBack(ctx context.Context, p Planned, old int) error {
	c := n.D.Galera
	if old != 0 {
		return nil
	}
	at := time.Now()
	if err := c.WaitWriterIs(ctx, old); err != nil {
		return err
	}
	n.H.Add(Event{Kind: KindNote, Op: p.Class, FaultID: p.ID, Target: c.Nodes()[old].Name,
		Detail: fmt.Sprintf("rejoined; HAProxy writes to it again %.1f s later", time.Since(at).Seconds())})
	return nil
}
