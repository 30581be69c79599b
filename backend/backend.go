// Package backend is the database the API's services are built on. The
// API builds each service through a Backend and holds no database handle
// of its own, so every database call a request makes goes through a
// service method.
package backend

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/degraded"
	"github.com/seckill/seckill/gate"
	"github.com/seckill/seckill/internal/idempotency"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/operators"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/reservation"
	"github.com/seckill/seckill/salecache"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/status"
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

// SaleCache is a sale cache of the database and rdb.
func (b *Backend) SaleCache(rdb *lua.Client, timeout time.Duration, logger *slog.Logger) *salecache.Cache {
	return salecache.New(b.st, rdb, timeout, logger)
}

// Gate is the admission gate's lists and appeals.
func (b *Backend) Gate(tokenKey, previous []byte) *gate.Service {
	return gate.New(b.st, tokenKey, previous)
}

// StartQueue is a workflow start queue of d, on the database.
func (b *Backend) StartQueue(d reservation.StartQueueDeps) *reservation.StartQueue {
	d.Store = b.st
	return reservation.NewStartQueue(d)
}

// Ledger is the reservation service's ledger.
func (b *Backend) Ledger() reservation.StoreLedger { return reservation.StoreLedger{Store: b.st} }

// Syncer is the reservation service's token syncer, through rdb.
func (b *Backend) Syncer(rdb *lua.Client) reservation.SalesSyncer {
	return reservation.SalesSyncer{Store: b.st, Redis: rdb}
}

// Operator is the operators' use cases on sales of d, on the database.
func (b *Backend) Operator(d sales.OperatorDeps) *sales.Operator {
	d.Store = b.st
	return sales.NewOperator(d)
}

// Operators is the admin audit and the refund records.
func (b *Backend) Operators(logger *slog.Logger) *operators.Service {
	return operators.New(b.st, logger)
}

// Waitlist is the sales' waitlists of d, on the database.
func (b *Backend) Waitlist(d reservation.WaitlistDeps) *reservation.Waitlist {
	d.Store = b.st
	return reservation.NewWaitlist(d)
}

// Orders is the order use cases of d, on the database.
func (b *Backend) Orders(d reservation.OrdersDeps) *reservation.Orders {
	d.Store = b.st
	return reservation.NewOrders(d)
}

// Observer is the fleet observer of a process (degraded.NewObserver).
func (b *Backend) Observer(name, role string, up func() bool, logger *slog.Logger) *degraded.Observer {
	return degraded.NewObserver(b.st, name, role, up, logger)
}

// Guard is an API instance's degraded mode of set and d, switching sales
// in the database (degraded.NewGuard).
func (b *Backend) Guard(set config.Degraded, d degraded.GuardDeps) *degraded.Guard {
	d.Store = b.st
	return degraded.NewGuard(set, d)
}

// Reader is the status reads of d, on the database.
func (b *Backend) Reader(d status.Deps) *status.Reader {
	d.Store = b.st
	return status.NewReader(d)
}

// Reconciler is r reading the database.
func (b *Backend) Reconciler(r *reconcile.Reconciler) *reconcile.Reconciler {
	r.Store = b.st
	return r
}

// Idempotency is the Idempotency-Key middleware, its keys in the database
// (idempotency.New).
func (b *Backend) Idempotency(caller func(*fiber.Ctx) int64, write time.Duration, logger *slog.Logger) *idempotency.Middleware {
	return idempotency.New(b.st, caller, write, logger)
}
