package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/backend"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/gate"
	"github.com/seckill/seckill/internal/altcha"
	"github.com/seckill/seckill/internal/idempotency"
	"github.com/seckill/seckill/reservation"
	"github.com/seckill/seckill/salecache"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/status"
	"github.com/seckill/seckill/wire"
)

// The services as the API calls them: each interface is what the handlers
// ask of one service, which backend.Build builds and wires.

// application is the services as a whole: their background work, the
// readiness check, the Idempotency-Key middleware and the on-demand
// reconciliation (backend.Services).
type application interface {
	Start()
	Stop(ctx context.Context)
	Ping(ctx context.Context) error
	Idempotency(caller func(*fiber.Ctx) int64, write time.Duration) *idempotency.Middleware
	Reconcile(ctx context.Context, saleID int64, repair bool) (*domain.ReconciliationReport, error)
}

// saleCache is the sale cache (salecache.Cache).
type saleCache interface {
	DatabaseModeSales() []int64
	Get(ctx context.Context, id int64) (*salecache.Entry, error)
	Len() int
	SetBlacklisted(userID int64, on bool)
}

// filters is the reservation's filters past the API's own (reservation.Filters).
type filters interface {
	Admit(ctx context.Context, userID, saleID int64, requestID, pass string, now time.Time) (reservation.Filtered, error)
}

// reserver is the reservation past the filters (reservation.Service).
type reserver interface {
	AcceptHold(ctx context.Context, r reservation.Request, token string) (reservation.Answer, error)
	Reserve(ctx context.Context, r reservation.Request) (reservation.Answer, error)
}

// orderService is pay, cancel, the payment confirmation and the user's list (reservation.Orders).
type orderService interface {
	Cancel(ctx context.Context, userID int64, token string, saleID int64) (domain.ReservationView, error)
	Confirm(ctx context.Context, token string, saleID int64, ref string, amount int64, received time.Time) (reservation.Confirmation, error)
	List(ctx context.Context, userID, saleID int64, limit int) ([]domain.ReservationView, error)
	Pay(ctx context.Context, userID int64, token string, saleID int64, req domain.PayRequest) (domain.ReservationView, error)
}

// waitlist is the sales' waitlists (reservation.Waitlist).
type waitlist interface {
	Join(ctx context.Context, e *salecache.Entry, user int64, now time.Time) (int64, error)
	Leave(ctx context.Context, saleID, user int64) error
	Position(ctx context.Context, saleID, user int64) (int64, error)
}

// statusReads is the reservation status reads (status.Reader).
type statusReads interface {
	List(ctx context.Context, userID, saleID int64, limit int) ([]domain.ReservationView, bool)
	Read(ctx context.Context, userID int64, token string, saleID int64) (status.Owned, error)
	ReadSeq(ctx context.Context, userID int64, token string, saleID int64) (domain.ReservationView, int64, error)
	SalesTracked() int
}

// eventHub is the event streams' fan-in (status.Hub).
type eventHub interface {
	Drop(e *status.Stream)
	Open(userID int64, token string, saleID, last int64, expires time.Time, chunked bool) (*status.Stream, bool)
}

// gateService is the admission gate: challenges, allowlists, appeals (gate.Service).
type gateService interface {
	Allowlists() int
	Challenge(sale *domain.Sale, userID int64, now time.Time) (altcha.Challenge, error)
	FileAppeal(ctx context.Context, a *domain.Appeal) error
	ListAppeals(ctx context.Context, state, cursor string) (gate.AppealPage, error)
	Redeem(ctx context.Context, sale *domain.Sale, userID int64, payload string, now time.Time) (gate.Pass, error)
	ResolveAppeal(ctx context.Context, id int64, action string, admin int64, logger *slog.Logger, onUnblacklist func(int64)) (domain.Appeal, error)
	SetExempt(ctx context.Context, userID int64, on bool) error
	UpdateAllowlist(ctx context.Context, saleID int64, change gate.AllowlistChange) (gate.AllowlistResult, error)
}

// lottery is the opening lottery (reservation.Lottery).
type lottery interface {
	Sales() int
}

// operator is the operators' use cases on sales (sales.Operator).
type operator interface {
	AdjustStock(ctx context.Context, id, delta int64, ref string) (domain.SaleView, error)
	Blacklist(ctx context.Context, userID int64, on bool) error
	Create(ctx context.Context, sale *domain.Sale, ref string) (*domain.Sale, error)
	Detail(ctx context.Context, id int64) (sales.SaleDetail, error)
	Recache(ctx context.Context, id int64)
	SetControl(ctx context.Context, id int64, to domain.SaleControl) (domain.SaleView, error)
	Warmup(ctx context.Context, id int64) (int64, error)
}

// saleListing is the sales' listings, the storefront's and the
// operators' (sales.Listing).
type saleListing interface {
	Operators(ctx context.Context, cursor, limit string) (sales.OperatorPage, error)
	Storefront(ctx context.Context, q sales.PageQuery, now time.Time) (sales.StorefrontPage, error)
}

// records is the admin audit and the refunds (operators.Service).
type records interface {
	Audit(ctx context.Context, saleID int64, limit int) ([]wire.AdminWrite, error)
	Record(ctx context.Context, w wire.AdminWrite) error
	Refunds(ctx context.Context, saleID int64, limit int) ([]wire.Refund, error)
}

// fleetView is the fleet's view of Redis (fleet.Observer).
type fleetView interface {
	CutOff() bool
}

// services are the API's services, handed over built.
type services struct {
	application
	Cache    saleCache
	Filters  filters
	Reserve  reserver
	Orders   orderService
	Waitlist waitlist
	Reads    statusReads
	Hub      eventHub
	Gate     gateService
	Lottery  lottery
	Operator operator
	Listing  saleListing
	Records  records
	Fleet    fleetView
	// countFilter counts a filter layer's outcome in the services' series.
	countFilter func(layer, outcome string)
}

// servicesOf is b as the API calls it.
func servicesOf(b *backend.Services) services {
	return services{application: b, Cache: b.Cache, Filters: b.Filters, Reserve: b.Reserve, Orders: b.Orders, Waitlist: b.Waitlist, Reads: b.Reads, Hub: b.Hub, Gate: b.Gate, Lottery: b.Lottery, Operator: b.Operator, Listing: b.Listing, Records: b.Records, Fleet: b.Fleet, countFilter: b.Metrics.Filter}
}
