package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/store"
)

// DSNVia rewrites a MySQL DSN to connect through addr (the latency proxy).
func DSNVia(dsn, addr string) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("parse dsn: %w", err)
	}
	c.Net, c.Addr = "tcp", addr
	return c.FormatDSN(), nil
}

// NewSale creates a live sale for the bench with the given stock and
// buckets in the store, not warmed up: the deduction benchmark's, which
// runs without an API.
func NewSale(ctx context.Context, st *store.Store, title string, stock int64, buckets int) (*domain.Sale, error) {
	now := time.Now().UTC()
	s := &domain.Sale{
		GoodsID: 1, Title: title, PriceCents: 999, StockTotal: stock, Buckets: buckets,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		PaymentWindowSeconds: 900, PerUserLimit: 1,
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := st.CreateSale(ctx, s); err != nil {
		return nil, fmt.Errorf("create sale %q: %w", title, err)
	}
	return s, nil
}

// RecordReservations records n QUEUED reservations of distinct users (the
// workflow's first step), with `workers` concurrent writers, and returns
// their tokens: the input of the deduction benchmark.
func RecordReservations(ctx context.Context, st *store.Store, tokenKey []byte, saleID, firstUser int64, n, workers int) ([]string, error) {
	tokens := make([]string, n)
	err := forEach(ctx, n, workers, func(ctx context.Context, i int64) error {
		user := firstUser + i
		req := fmt.Sprintf("bench-%d", user)
		tok := domain.DeriveToken(tokenKey, saleID, user, req)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := st.RecordReservation(cctx, domain.RedisHoldInput(tok, saleID, user, req)); err != nil {
			return fmt.Errorf("record reservation %d: %w", i, err)
		}
		tokens[i] = tok
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tokens, nil
}

// forEach runs fn for each index below n on at most `workers` goroutines
// and returns the first error; after one, no new index starts.
func forEach(ctx context.Context, n, workers int, fn func(ctx context.Context, i int64) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range int64(n) {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(gctx, i) })
	}
	return g.Wait()
}

// Deduct runs store.PlaceOrder (bucket update + order insert + ledger row in
// one transaction) over tokens with `workers` concurrent deducters, for at
// most maxDur, and returns the run's figures (Requests = orders placed).
func Deduct(ctx context.Context, st *store.Store, name string, tokens []string, workers int, maxDur time.Duration) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, maxDur)
	defer cancel()
	var next atomic.Int64
	recs := make([]*recorder, workers)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for w := range workers {
		recs[w] = newRecorder()
		wg.Add(1)
		go func(r *recorder) {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(tokens)) {
					return
				}
				t0 := time.Now()
				_, err := st.PlaceOrder(ctx, tokens[i])
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					firstErr.CompareAndSwap(nil, fmt.Errorf("place order: %w", err))
					return
				}
				r.record(time.Since(t0), 200, nil)
			}
		}(recs[w])
	}
	wg.Wait()
	res := summarise(name, "closed", workers, time.Since(start), recs)
	if err, _ := firstErr.Load().(error); err != nil {
		return res, err
	}
	return res, nil
}

func parseDSN(dsn string) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("parse dsn: %w", err)
	}
	return c.Addr, nil
}

// benchSaleBase is where the bench database's sale ids start: Redis keys
// are named by sale id only, so they must not meet the ids of the dev
// database's sales on the same Redis.
const benchSaleBase = 8_000_000_000_000

// BenchDSN returns dsn's server with a database of the bench's own (its
// name + "_bench"), created if missing, with sale ids from benchSaleBase. A
// worker of another database (a dev worker on the same MariaDB) never
// touches the bench's sales: it would, for one, return the fallback
// scenario's sale to Redis mode while Redis is healthy for it.
func BenchDSN(ctx context.Context, dsn string) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("parse dsn: %w", err)
	}
	name := c.DBName + "_bench"
	if c.DBName == "" || strings.HasSuffix(c.DBName, "_bench") {
		name = c.DBName
	}
	if err := onServer(ctx, c, "CREATE DATABASE IF NOT EXISTS `"+name+"`"); err != nil {
		return "", fmt.Errorf("create bench database %s: %w", name, err)
	}
	c.DBName = name
	return c.FormatDSN(), nil
}

// onServer runs stmts in turn on the server of c, outside any database.
func onServer(ctx context.Context, c *mysql.Config, stmts ...string) error {
	server := c.Clone()
	server.DBName = ""
	db, err := sql.Open("mysql", server.FormatDSN())
	if err != nil {
		return fmt.Errorf("open mysql server: %w", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// openBenchStore opens the store of a bench database, migrated, its next
// sale id at least floor.
func openBenchStore(ctx context.Context, dsn string, floor int64) (*store.Store, error) {
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	err = st.Migrate(ctx)
	if err != nil {
		err = fmt.Errorf("migrate: %w", err)
	} else {
		err = raiseSaleIDs(ctx, st, floor)
	}
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	return st, nil
}

// raiseSaleIDs moves the sales table's next id to floor if below.
func raiseSaleIDs(ctx context.Context, st *store.Store, floor int64) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var maxID sql.NullInt64
	if err := st.DB.QueryRowContext(ctx, "SELECT MAX(id) FROM sales").Scan(&maxID); err != nil {
		return fmt.Errorf("bench sale ids: %w", err)
	}
	if maxID.Int64 >= floor {
		return nil
	}
	if _, err := st.DB.ExecContext(ctx, fmt.Sprintf("ALTER TABLE sales AUTO_INCREMENT = %d", floor)); err != nil {
		return fmt.Errorf("bench sale ids: %w", err)
	}
	return nil
}
