package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
)

// Replica is an asynchronous replica of the primary (MYSQL_READ_DSN) that
// answers the reads that may lag, while it is at most MaxLag behind.
//
// Its lag is measured by a heartbeat: every second the process writes its
// own row of replica_heartbeats on the primary, stamped with its own clock,
// and reads the row back from the replica a moment later. The replica
// applies the primary's commits in their order, so once it holds a stamp
// it holds every commit made before that stamp was written: the stamp is
// the replica's watermark, and its age is the lag. A heartbeat row needs
// nothing but the rights the product has (no REPLICA MONITOR for SHOW
// SLAVE STATUS), works behind a proxy that hides which server answers, and
// grows while the replica's SQL thread is stopped, where
// Seconds_Behind_Master shows NULL or, with the I/O thread behind, 0.
type Replica struct {
	db      *bun.DB
	maxLag  time.Duration
	process string
	logger  *slog.Logger
	// watermark is the newest of this process's stamps (unix ns) found on
	// the replica; 0 until one is.
	watermark atomic.Int64
	// fresh and failing remember the last verdict and whether the replica
	// answered the heartbeat's read, so only their changes are logged.
	fresh, failing atomic.Bool
	reads          [readSources]atomic.Int64
	stop           context.CancelFunc
	done           chan struct{}
}

// ReadSource names where a read was answered.
type ReadSource int

// The read sources: the replica, the primary because the replica did not
// have the row yet (a fallback), the primary because there is no replica
// or it is too far behind or failed.
const (
	FromReplica ReadSource = iota
	FromPrimaryAfterReplica
	FromPrimary
	readSources
)

func (s ReadSource) String() string {
	switch s {
	case FromReplica:
		return "replica"
	case FromPrimaryAfterReplica:
		return "primary_after_replica"
	}
	return "primary"
}

// Heartbeat timing: a beat each second, read back from the replica
// beatReadAfter later (a replica that keeps up has it by then, so its lag
// reads near zero, not near a second); each call bounded by beatTimeout.
const (
	beatEvery     = time.Second
	beatReadAfter = 100 * time.Millisecond
	beatTimeout   = time.Second
	// heartbeatsKept: rows of processes not seen for this long are swept.
	heartbeatsKept = time.Hour
)

// recentSlack is how much older than the replica's watermark a row the
// replica lacks may look: its created_at is stamped by its writer's clock
// before its transaction commits (the connections' write timeout, 30 s,
// bounds the wait), and the writer's clock may be ahead of this one
// (SECKILL_CLOCK_SKEW is far below the 5 s allowed here).
const recentSlack = 35 * time.Second

// OpenReplica is the pool of the replica at dsn (as Open's: UTC, bounded
// calls). It does not connect: a replica that is down when the process
// starts is stepped around (the heartbeat finds nothing on it) until it
// answers, so it never keeps the process from serving. Nothing is read
// from it until UseReplica has started its heartbeat and found it caught
// up.
func OpenReplica(dsn string, maxLag time.Duration, logger *slog.Logger) (*Replica, error) {
	cfg, err := poolConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open replica (MYSQL_READ_DSN): %w", err)
	}
	sqldb, err := openPool(cfg, openOptions{})
	if err != nil {
		return nil, fmt.Errorf("open replica (MYSQL_READ_DSN): %w", err)
	}
	host, _ := os.Hostname()
	return &Replica{db: bun.NewDB(sqldb, mysqldialect.New()), maxLag: maxLag, logger: logger,
		process: host + "/" + strconv.Itoa(os.Getpid()) + "/" + strconv.FormatInt(time.Now().UnixNano(), 36)}, nil
}

// UseReplica sends the store's reads that may lag to r from now on, and
// starts r's heartbeat; Close stops it and closes r.
func (s *Store) UseReplica(r *Replica) {
	ctx, cancel := context.WithCancel(context.Background())
	r.stop, r.done = cancel, make(chan struct{})
	s.replica = r
	go r.run(ctx, s.DB)
}

// Replica is the store's replica; nil when it has none.
func (s *Store) Replica() *Replica { return s.replica }

// close stops the heartbeat, deletes the process's row and closes the
// replica's pool.
func (r *Replica) close(primary *bun.DB) error {
	r.stop()
	<-r.done
	ctx, cancel := context.WithTimeout(context.Background(), beatTimeout)
	defer cancel()
	_, delErr := primary.ExecContext(ctx, "DELETE FROM replica_heartbeats WHERE process = ?", r.process)
	if err := errors.Join(delErr, r.db.Close()); err != nil {
		return fmt.Errorf("close replica: %w", err)
	}
	return nil
}

func (r *Replica) run(ctx context.Context, primary *bun.DB) {
	defer close(r.done)
	r.sweep(ctx, primary)
	t := time.NewTicker(beatEvery)
	defer t.Stop()
	for {
		r.beat(ctx, primary)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep deletes the rows of processes gone.
func (r *Replica) sweep(ctx context.Context, primary *bun.DB) {
	ctx, cancel := context.WithTimeout(ctx, beatTimeout)
	defer cancel()
	if _, err := primary.ExecContext(ctx, "DELETE FROM replica_heartbeats WHERE beat_ns < ?",
		time.Now().Add(-heartbeatsKept).UnixNano()); err != nil {
		r.logger.Warn("replica heartbeat: sweep", "err", err)
	}
}

// beat writes a stamp on the primary, then reads back the newest the
// replica holds.
func (r *Replica) beat(ctx context.Context, primary *bun.DB) {
	wctx, cancel := context.WithTimeout(ctx, beatTimeout)
	_, err := primary.ExecContext(wctx, `INSERT INTO replica_heartbeats (process, beat_ns) VALUES (?, ?)
		ON DUPLICATE KEY UPDATE beat_ns = VALUES(beat_ns)`, r.process, time.Now().UnixNano())
	cancel()
	if err != nil && ctx.Err() == nil {
		// The primary failing is reported by every other write; the
		// replica's lag grows meanwhile, which sends reads to the primary.
		r.logger.Debug("replica heartbeat: write on the primary", "err", err)
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(beatReadAfter):
	}
	rctx, cancel := context.WithTimeout(ctx, beatTimeout)
	defer cancel()
	var ns int64
	err = r.db.QueryRowContext(rctx, "SELECT beat_ns FROM replica_heartbeats WHERE process = ?", r.process).Scan(&ns)
	if err == nil && ns > r.watermark.Load() {
		r.watermark.Store(ns)
	}
	if ctx.Err() != nil {
		return
	}
	fresh, failing := r.Fresh(), err != nil
	if r.fresh.Swap(fresh) != fresh || r.failing.Swap(failing) != failing {
		r.logger.Info("replica", "fresh", fresh, "lag", r.Lag(), "max_lag", r.maxLag, "read_err", err)
	}
}

// Lag is how old the newest commit the replica is known to lack may be:
// the age of its watermark (math.MaxInt64 before one was seen).
func (r *Replica) Lag() time.Duration {
	w := r.watermark.Load()
	if w == 0 {
		return math.MaxInt64
	}
	return max(time.Since(time.Unix(0, w)), 0)
}

// Fresh reports whether the replica is at most MaxLag behind.
func (r *Replica) Fresh() bool { return r.Lag() <= r.maxLag }

// Reads counts the reads that may lag by where they were answered.
func (r *Replica) Reads(from ReadSource) int64 { return r.reads[from].Load() }

// mayLag is the handle of a read that may lag: the replica while it is
// fresh, else the primary.
func (s *Store) mayLag() (bun.IDB, ReadSource) {
	if r := s.replica; r != nil && r.Fresh() {
		return r.db, FromReplica
	}
	return s.DB, FromPrimary
}

func (s *Store) counted(from ReadSource) {
	if s.replica != nil {
		s.replica.reads[from].Add(1)
	}
}
