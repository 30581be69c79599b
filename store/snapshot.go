package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill/seckill/domain"
)

// Snapshot is a sale's database state read in one consistent snapshot, for
// reconciliation.
type Snapshot struct {
	StockTotal int64
	DBStock    int64 // sum of the buckets
	// HeldUnits counts the QUEUED holds that took their unit from a bucket
	// when they were recorded (RecordRedisHold): units out of the buckets
	// that no order has yet.
	HeldUnits int64
	Deducts   int64 // ledger 'deduct' rows
	Restores  int64 // ledger 'restore' rows
	Adjusted  int64 // sum of ledger 'adjust' deltas
	// AddedRefs are the refs of the stock additions the buckets include:
	// a stock set from this snapshot marks them applied in Redis, so an
	// addition's late Redis step is not applied twice.
	AddedRefs    []string
	Statuses     map[domain.ReservationStatus]int64
	Reservations map[string]SnapshotReservation
	LiveUsers    map[int64]string // user -> token of the live or paid order
	Refunds      int64
	// WaitlistHandOvers counts the reservations a waitlist was handed.
	WaitlistHandOvers int64
}

// SnapshotReservation is one reservation as reconciliation sees it.
type SnapshotReservation struct {
	UserID    int64
	Status    domain.ReservationStatus
	Path      domain.ReservationPath
	UpdatedAt time.Time
}

// ReadSnapshot reads the sale's database state in one REPEATABLE READ,
// read-only transaction: every query sees the same instant.
func (s *Store) ReadSnapshot(ctx context.Context, saleID int64) (*Snapshot, error) {
	return readSnapshot(ctx, s.DB, saleID)
}

func readSnapshot(ctx context.Context, db bun.IDB, saleID int64) (*Snapshot, error) {
	snap := &Snapshot{
		Statuses:     map[domain.ReservationStatus]int64{},
		Reservations: map[string]SnapshotReservation{},
		LiveUsers:    map[int64]string{},
	}
	err := db.RunInTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, func(ctx context.Context, tx bun.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT stock_total FROM sales WHERE id = ?", saleID).Scan(&snap.StockTotal); err != nil {
			if err == sql.ErrNoRows {
				return ErrNotFound
			}
			return fmt.Errorf("sale: %w", err)
		}
		var bucketSum sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT SUM(stock) FROM stock_buckets WHERE sale_id = ?", saleID).Scan(&bucketSum); err != nil {
			return fmt.Errorf("buckets: %w", err)
		}
		snap.DBStock = bucketSum.Int64
		var ledger []struct {
			Operation string `bun:"operation"`
			N         int64  `bun:"n"`
			Sum       int64  `bun:"s"`
		}
		if err := tx.NewRaw("SELECT operation, COUNT(*) AS n, COALESCE(SUM(delta), 0) AS s FROM stock_ledger WHERE sale_id = ? GROUP BY operation", saleID).Scan(ctx, &ledger); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		for _, l := range ledger {
			switch l.Operation {
			case "deduct":
				snap.Deducts = l.N
			case "restore":
				snap.Restores = l.N
			case "adjust":
				snap.Adjusted = l.Sum
			}
		}
		refs, err := addedRefs(ctx, tx, saleID)
		if err != nil {
			return err
		}
		snap.AddedRefs = refs
		if err := snap.readReservations(ctx, tx, saleID); err != nil {
			return err
		}
		var live []struct {
			UserID int64  `bun:"user_id"`
			Token  string `bun:"token"`
		}
		if err := tx.NewRaw("SELECT user_id, token FROM orders WHERE sale_id = ? AND live_user IS NOT NULL", saleID).Scan(ctx, &live); err != nil {
			return fmt.Errorf("live orders: %w", err)
		}
		for _, l := range live {
			snap.LiveUsers[l.UserID] = l.Token
		}
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM refunds WHERE sale_id = ?", saleID).Scan(&snap.Refunds); err != nil {
			return fmt.Errorf("refunds: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read snapshot of sale %d: %w", saleID, err)
	}
	return snap, nil
}

// addedRefs lists the refs of a sale's stock additions (ledger 'adjust'
// rows with a positive delta).
func addedRefs(ctx context.Context, tx bun.Tx, saleID int64) ([]string, error) {
	var refs []string
	if err := tx.NewRaw("SELECT token FROM stock_ledger WHERE sale_id = ? AND operation = 'adjust' AND delta > 0", saleID).Scan(ctx, &refs); err != nil {
		return nil, fmt.Errorf("stock additions: %w", err)
	}
	return refs, nil
}

// SaveReport stores a reconciliation report (JSON) of a sale.
func (s *Store) SaveReport(ctx context.Context, saleID int64, consistent, final bool, report []byte) error {
	if _, err := s.DB.ExecContext(ctx, "INSERT INTO reconciliation_reports (sale_id, consistent, final, report, created_at) VALUES (?, ?, ?, ?, ?)",
		saleID, consistent, final, string(report), time.Now().UTC().Truncate(time.Millisecond)); err != nil {
		return fmt.Errorf("save report of sale %d: %w", saleID, err)
	}
	return nil
}

// LatestReport returns the latest stored report of a sale; ErrNotFound when
// there is none.
func (s *Store) LatestReport(ctx context.Context, saleID int64) ([]byte, error) {
	var report string
	err := s.DB.QueryRowContext(ctx, "SELECT report FROM reconciliation_reports WHERE sale_id = ? ORDER BY id DESC LIMIT 1", saleID).Scan(&report)
	if err == sql.ErrNoRows {
		return nil, fmt.Errorf("latest report of sale %d: %w", saleID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("latest report of sale %d: %w", saleID, err)
	}
	return []byte(report), nil
}

// readReservations reads the sale's reservations into the snapshot: each
// one, the counts by status, the waitlist's hand-overs and the units
// queued holds took.
func (snap *Snapshot) readReservations(ctx context.Context, tx bun.Tx, saleID int64) error {
	var rows []struct {
		Token     string    `bun:"token"`
		UserID    int64     `bun:"user_id"`
		RequestID string    `bun:"request_id"`
		Status    string    `bun:"status"`
		Path      string    `bun:"path"`
		UpdatedAt time.Time `bun:"updated_at"`
		HasUnit   bool      `bun:"has_unit"`
	}
	if err := tx.NewRaw("SELECT token, user_id, request_id, status, path, updated_at, unit_bucket IS NOT NULL AS has_unit FROM reservations WHERE sale_id = ?", saleID).Scan(ctx, &rows); err != nil {
		return fmt.Errorf("reservations: %w", err)
	}
	for _, r := range rows {
		st := domain.ReservationStatus(r.Status)
		snap.Statuses[st]++
		if st == domain.StatusQueued && r.HasUnit {
			snap.HeldUnits++
		}
		if domain.IsWaitlistRequestID(r.RequestID) {
			snap.WaitlistHandOvers++
		}
		snap.Reservations[r.Token] = SnapshotReservation{UserID: r.UserID, Status: st, Path: domain.ReservationPath(r.Path), UpdatedAt: r.UpdatedAt.UTC()}
	}
	return nil
}
