package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill/seckill/domain"
)

type saleRow struct {
	bun.BaseModel `bun:"table:sales"`

	ID                   int64      `bun:"id,pk,autoincrement"`
	GoodsID              int64      `bun:"goods_id"`
	Title                string     `bun:"title"`
	PriceCents           int64      `bun:"price_cents"`
	StockTotal           int64      `bun:"stock_total"`
	Buckets              int        `bun:"buckets"`
	StartsAt             time.Time  `bun:"starts_at"`
	EndsAt               time.Time  `bun:"ends_at"`
	PaymentWindowSeconds int        `bun:"payment_window_seconds"`
	PerUserLimit         int        `bun:"per_user_limit"`
	Control              string     `bun:"control"`
	Mode                 string     `bun:"mode"`
	ModeEpoch            int64      `bun:"mode_epoch"`
	ModeChangedAt        *time.Time `bun:"mode_changed_at"`
	RedisStockSeen       *int64     `bun:"redis_stock_seen"`
	RedisStockSeenAt     *time.Time `bun:"redis_stock_seen_at"`
	WarmedAt             *time.Time `bun:"warmed_at"`
	FinishedAt           *time.Time `bun:"finished_at"`
	CreatedAt            time.Time  `bun:"created_at"`
	ChallengeDifficulty  int64      `bun:"challenge_difficulty"`
	Restricted           bool       `bun:"restricted"`
	AllowlistVersion     int64      `bun:"allowlist_version"`
	RedisWentBackAt      *time.Time `bun:"redis_went_back_at"`
}

func (r *saleRow) domain() *domain.Sale {
	return &domain.Sale{
		ID:                   r.ID,
		GoodsID:              r.GoodsID,
		Title:                r.Title,
		PriceCents:           r.PriceCents,
		StockTotal:           r.StockTotal,
		Buckets:              r.Buckets,
		StartsAt:             r.StartsAt.UTC(),
		EndsAt:               r.EndsAt.UTC(),
		PaymentWindowSeconds: r.PaymentWindowSeconds,
		PerUserLimit:         r.PerUserLimit,
		Control:              domain.SaleControl(r.Control),
		Mode:                 domain.SaleMode(r.Mode),
		ModeEpoch:            r.ModeEpoch,
		ModeChangedAt:        utcOrZero(r.ModeChangedAt),
		Warmed:               r.WarmedAt != nil,
		CreatedAt:            r.CreatedAt.UTC(),
		ChallengeDifficulty:  r.ChallengeDifficulty,
		Restricted:           r.Restricted,
		AllowlistVersion:     r.AllowlistVersion,
		RedisWentBack:        r.RedisWentBackAt != nil,
	}
}

// CreateSale inserts the sale and its stock buckets in one transaction,
// spreading the stock evenly (the first stock%buckets buckets get one more;
// buckets beyond the stock start empty). It sets s.ID.
func (s *Store) CreateSale(ctx context.Context, sale *domain.Sale) error {
	return s.CreateSaleOnce(ctx, sale, "")
}

// CreateSaleOnce is CreateSale under ref (an Idempotency-Key's): a ledger
// row 'create' commits with the sale, so a repeat under the same ref
// creates nothing and sets sale to the sale created first. "" for none.
func (s *Store) CreateSaleOnce(ctx context.Context, sale *domain.Sale, ref string) error {
	if sale.Buckets < 1 {
		return fmt.Errorf("create sale: buckets must be at least 1")
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	row := &saleRow{
		GoodsID:              sale.GoodsID,
		Title:                sale.Title,
		PriceCents:           sale.PriceCents,
		StockTotal:           sale.StockTotal,
		Buckets:              sale.Buckets,
		StartsAt:             sale.StartsAt.UTC(),
		EndsAt:               sale.EndsAt.UTC(),
		PaymentWindowSeconds: sale.PaymentWindowSeconds,
		PerUserLimit:         domain.PerUserLimit,
		Control:              string(domain.ControlActive),
		Mode:                 string(domain.ModeRedis),
		ModeEpoch:            1,
		CreatedAt:            now,
		ChallengeDifficulty:  sale.ChallengeDifficulty,
	}
	write := func(ctx context.Context) error {
		return s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return insertSale(ctx, tx, row, sale, ref, now) })
	}
	var err error
	if ref == "" {
		// Without a ref a retry could create a second sale: a lost answer
		// is the caller's to report (outcome unknown).
		err = write(ctx)
	} else {
		// Under a ref a retry after a lost answer meets the ledger row the
		// first attempt committed (errAlreadyApplied).
		err = againIdempotent(ctx, write)
	}
	if errors.Is(err, errAlreadyApplied) {
		return s.createdUnder(ctx, sale, ref)
	}
	if err != nil {
		return fmt.Errorf("create sale: %w", err)
	}
	*sale = *row.domain()
	return nil
}

// insertSale is CreateSaleOnce's transaction: the sale, its buckets and,
// under ref, its ledger row (errAlreadyApplied when ref has one).
func insertSale(ctx context.Context, tx bun.Tx, row *saleRow, sale *domain.Sale, ref string, now time.Time) error {
	res, err := tx.NewInsert().Model(row).
		ExcludeColumn("id", "redis_stock_seen", "redis_stock_seen_at", "mode_changed_at", "warmed_at", "finished_at", "restricted", "allowlist_version", "redis_went_back_at").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("insert sale: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("sale id: %w", err)
	}
	row.ID = id
	per, extra := sale.StockTotal/int64(sale.Buckets), sale.StockTotal%int64(sale.Buckets)
	const chunk = 256
	for start := 0; start < sale.Buckets; start += chunk {
		q := "INSERT INTO stock_buckets (sale_id, bucket_no, stock) VALUES "
		var args []any
		for b := start; b < sale.Buckets && b < start+chunk; b++ {
			if b > start {
				q += ","
			}
			q += "(?, ?, ?)"
			n := per
			if int64(b) < extra {
				n++
			}
			args = append(args, id, b, n)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("insert buckets: %w", err)
		}
	}
	if ref == "" {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO stock_ledger (token, operation, sale_id, bucket_no, delta, created_at) VALUES (?, 'create', ?, -1, 0, ?)",
		ref, id, now); err != nil {
		if IsDuplicate(err) {
			return errAlreadyApplied
		}
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}

// createdUnder sets sale to the sale created under ref.
func (s *Store) createdUnder(ctx context.Context, sale *domain.Sale, ref string) error {
	var id int64
	if err := s.DB.QueryRowContext(ctx, "SELECT sale_id FROM stock_ledger WHERE token = ? AND operation = 'create'", ref).Scan(&id); err != nil {
		return fmt.Errorf("sale created under %s: %w", ref, err)
	}
	got, err := s.GetSale(ctx, id)
	if err != nil {
		return fmt.Errorf("sale created under %s: %w", ref, err)
	}
	*sale = *got
	return nil
}

// GetSale reads one sale; ErrNotFound when there is none.
func (s *Store) GetSale(ctx context.Context, id int64) (*domain.Sale, error) {
	row := new(saleRow)
	err := s.DB.NewSelect().Model(row).Where("id = ?", id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get sale %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get sale %d: %w", id, err)
	}
	return row.domain(), nil
}

// ListOpenSales lists the sales whose Redis keys have not been torn down.
func (s *Store) ListOpenSales(ctx context.Context) ([]*domain.Sale, error) {
	var rows []saleRow
	if err := s.DB.NewSelect().Model(&rows).Where("finished_at IS NULL").Order("id").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list open sales: %w", err)
	}
	out := make([]*domain.Sale, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, nil
}

// SetSaleControl records an operator's pause, resume or stop.
// It is idempotent: sent again when refused or its answer was lost, and
// the sale read back.
func (s *Store) SetSaleControl(ctx context.Context, id int64, control domain.SaleControl) (*domain.Sale, error) {
	err := againIdempotent(ctx, func(ctx context.Context) error {
		_, err := s.DB.NewUpdate().Table("sales").Set("control = ?", string(control)).Where("id = ?", id).Exec(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("set sale %d control: %w", id, err)
	}
	return s.GetSale(ctx, id)
}

// MarkWarmed records that the sale was loaded into Redis.
func (s *Store) MarkWarmed(ctx context.Context, id int64) error {
	if _, err := s.DB.ExecContext(ctx, "UPDATE sales SET warmed_at = ? WHERE id = ?", time.Now().UTC(), id); err != nil {
		return fmt.Errorf("mark sale %d warmed: %w", id, err)
	}
	return nil
}

// MarkFinished records that the sale's Redis keys were removed.
func (s *Store) MarkFinished(ctx context.Context, id int64) error {
	if _, err := s.DB.ExecContext(ctx, "UPDATE sales SET finished_at = ? WHERE id = ?", time.Now().UTC(), id); err != nil {
		return fmt.Errorf("mark sale %d finished: %w", id, err)
	}
	return nil
}

// RecordRedisStock stores the Redis stock the worker read at readAt (taken
// before the read), for the database path's quota. changed_at stays: a
// sample changes nothing the directory of open sales holds, and the
// recorder's writes would otherwise have every process re-read the sale.
func (s *Store) RecordRedisStock(ctx context.Context, id, stock int64, readAt time.Time) error {
	if _, err := s.DB.ExecContext(ctx, "UPDATE sales SET redis_stock_seen = ?, redis_stock_seen_at = ?, changed_at = changed_at WHERE id = ?", stock, readAt.UTC(), id); err != nil {
		return fmt.Errorf("record redis stock of sale %d: %w", id, err)
	}
	return nil
}

// RecordRedisStocks is RecordRedisStock for several sales read at readAt,
// in one statement (a tick of the stock recorder costs the database one
// write, not one per sale). The rows are locked in id order.
func (s *Store) RecordRedisStocks(ctx context.Context, stocks map[int64]int64, readAt time.Time) error {
	if len(stocks) == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(stocks))
	var b strings.Builder
	args := make([]any, 0, 3*len(ids)+1)
	b.WriteString("UPDATE sales SET redis_stock_seen = CASE id")
	for _, id := range ids {
		b.WriteString(" WHEN ? THEN ?")
		args = append(args, id, stocks[id])
	}
	b.WriteString(" END, redis_stock_seen_at = ?, changed_at = changed_at WHERE id IN (")
	args = append(args, readAt.UTC())
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("?")
		args = append(args, id)
	}
	b.WriteString(")")
	if _, err := s.DB.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("record redis stock of %d sales: %w", len(ids), err)
	}
	return nil
}

// DBStock is the sum of the sale's buckets: units no order has taken.
func (s *Store) DBStock(ctx context.Context, saleID int64) (int64, error) {
	var n sql.NullInt64
	if err := s.DB.QueryRowContext(ctx, "SELECT SUM(stock) FROM stock_buckets WHERE sale_id = ?", saleID).Scan(&n); err != nil {
		return 0, fmt.Errorf("db stock of sale %d: %w", saleID, err)
	}
	return n.Int64, nil
}

// LiveBuyers lists the users holding a live or paid order of the sale.
func (s *Store) LiveBuyers(ctx context.Context, saleID int64) ([]int64, error) {
	var ids []int64
	if err := s.DB.NewSelect().Table("orders").Column("user_id").
		Where("sale_id = ? AND live_user IS NOT NULL", saleID).Order("user_id").Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("live buyers of sale %d: %w", saleID, err)
	}
	return ids, nil
}

// AdjustStock adds delta units to the sale's buckets (spread over them) or
// withdraws -delta unsold units, never taking a bucket below zero, and moves
// stock_total with it, in one transaction with a ledger row under ref. A
// retry with the same ref finds its ledger row and changes nothing, so a
// transaction refused or whose answer was lost is run again here.
func (s *Store) AdjustStock(ctx context.Context, saleID, delta int64, ref string) error {
	err := againIdempotent(ctx, func(ctx context.Context) error { return s.adjustStockTx(ctx, saleID, delta, ref) })
	if errors.Is(err, errAlreadyApplied) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("adjust stock of sale %d by %d: %w", saleID, delta, err)
	}
	return nil
}

// adjustStockTx is AdjustStock's transaction.
func (s *Store) adjustStockTx(ctx context.Context, saleID, delta int64, ref string) error {
	return s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var buckets []struct {
			BucketNo int   `bun:"bucket_no"`
			Stock    int64 `bun:"stock"`
		}
		// The sale row before the buckets, as on every path.
		if _, err := tx.ExecContext(ctx, "UPDATE sales SET stock_total = stock_total + ? WHERE id = ?", delta, saleID); err != nil {
			return fmt.Errorf("adjust stock_total: %w", err)
		}
		if err := tx.NewRaw("SELECT bucket_no, stock FROM stock_buckets WHERE sale_id = ? ORDER BY bucket_no FOR UPDATE", saleID).Scan(ctx, &buckets); err != nil {
			return fmt.Errorf("lock buckets: %w", err)
		}
		if len(buckets) == 0 {
			return ErrNotFound
		}
		remaining := delta
		for i := range buckets {
			if remaining == 0 {
				break
			}
			var change int64
			if delta > 0 {
				left := int64(len(buckets) - i)
				change = (remaining + left - 1) / left
			} else {
				change = -min(buckets[i].Stock, -remaining)
			}
			if change == 0 {
				continue
			}
			if _, err := tx.ExecContext(ctx, "UPDATE stock_buckets SET stock = stock + ? WHERE sale_id = ? AND bucket_no = ? AND stock + ? >= 0",
				change, saleID, buckets[i].BucketNo, change); err != nil {
				return fmt.Errorf("adjust bucket: %w", err)
			}
			remaining -= change
		}
		if remaining != 0 {
			return domain.ErrInsufficient
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO stock_ledger (token, operation, sale_id, bucket_no, delta, created_at) VALUES (?, 'adjust', ?, -1, ?, ?)",
			ref, saleID, delta, time.Now().UTC()); err != nil {
			if IsDuplicate(err) {
				return errAlreadyApplied
			}
			return fmt.Errorf("ledger: %w", err)
		}
		if delta > 0 {
			// Redis follows from this row until it has taken the ref.
			if _, err := tx.ExecContext(ctx, "INSERT INTO stock_redis_pending (ref, sale_id, delta, created_at) VALUES (?, ?, ?, ?)",
				ref, saleID, delta, time.Now().UTC()); err != nil {
				return fmt.Errorf("pending redis addition: %w", err)
			}
		}
		return nil
	})
}

var errAlreadyApplied = errors.New("already applied")

// SetBlacklisted adds or removes a user from the blacklist; either is
// idempotent, sent again when refused or its answer was lost.
func (s *Store) SetBlacklisted(ctx context.Context, userID int64, on bool) error {
	err := againIdempotent(ctx, func(ctx context.Context) error {
		var err error
		if on {
			_, err = s.DB.ExecContext(ctx, "INSERT IGNORE INTO blacklist (user_id, created_at) VALUES (?, ?)", userID, time.Now().UTC())
		} else {
			_, err = s.DB.ExecContext(ctx, "DELETE FROM blacklist WHERE user_id = ?", userID)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("blacklist user %d: %w", userID, err)
	}
	return nil
}

// Blacklist lists every blacklisted user.
func (s *Store) Blacklist(ctx context.Context) ([]int64, error) {
	var ids []int64
	if err := s.DB.NewSelect().Table("blacklist").Column("user_id").Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("read blacklist: %w", err)
	}
	return ids, nil
}

// utcOrZero is *t in UTC, or the zero time for NULL.
func utcOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
