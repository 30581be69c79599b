// Package backend builds the API's services on the database, Redis and
// Temporal and wires them to each other (Build). The API receives them
// built and holds no database handle of its own, so every database call a
// request makes goes through a service method.
package backend

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/store"
)

// pingTimeout bounds the readiness check's database call.
const pingTimeout = time.Second

// Backend builds services on one database.
type Backend struct{ st *store.Store }

// New is the services' builder on st.
func New(st *store.Store) *Backend { return &Backend{st: st} }

// Ping checks the database answers within a second (readiness).
func (b *Backend) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := b.st.Ping(ctx); err != nil {
		return fmt.Errorf("ping the database: %w", err)
	}
	return nil
}
