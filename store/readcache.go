package store

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

// SaleIDs lists the id of every sale, finished or not: the API's cache
// answers an unknown sale id from it without a query per id.
func (s *Store) SaleIDs(ctx context.Context) ([]int64, error) {
	var ids []int64
	if err := s.DB.NewSelect().Table("sales").Column("id").Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("list sale ids: %w", err)
	}
	return ids, nil
}

// DBStocks is DBStock of several sales in one query; a sale without
// buckets is absent from the answer.
func (s *Store) DBStocks(ctx context.Context, saleIDs []int64) (map[int64]int64, error) {
	out := make(map[int64]int64, len(saleIDs))
	if len(saleIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		SaleID int64 `bun:"sale_id"`
		Stock  int64 `bun:"stock"`
	}
	if err := s.DB.NewSelect().Table("stock_buckets").Column("sale_id").ColumnExpr("SUM(stock) AS stock").
		Where("sale_id IN (?)", bun.List(saleIDs)).Group("sale_id").Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("db stock of %d sales: %w", len(saleIDs), err)
	}
	for _, r := range rows {
		out[r.SaleID] = r.Stock
	}
	return out, nil
}
