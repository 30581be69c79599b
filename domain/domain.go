// Package domain holds the types every other package of seckill shares:
// sales, reservations, orders, their statuses, error codes and the names of
// workflows, updates and queries. Of the project it imports only
// internal/keyedmac (the pooled HMACs of its tokens).
package domain

import (
	"strconv"
	"time"
)

// ReservationStatus is a reservation's place in its life, exactly the
// contract's names; it moves as the lifecycle table says.
type ReservationStatus string

const (
	StatusQueued         ReservationStatus = "QUEUED"
	StatusPendingPayment ReservationStatus = "PENDING_PAYMENT"
	StatusPaid           ReservationStatus = "PAID"
	StatusExpired        ReservationStatus = "EXPIRED"
	StatusCancelled      ReservationStatus = "CANCELLED"
	StatusFailed         ReservationStatus = "FAILED"
)

// AllStatuses lists every status in the order reports print them.
var AllStatuses = []ReservationStatus{StatusQueued, StatusPendingPayment, StatusPaid, StatusExpired, StatusCancelled, StatusFailed}

// stage is a status's place in the lifecycle: the statuses it may move to
// and the state of its token in Redis (redisgateway/ encodes the states).
type stage struct {
	next  []ReservationStatus
	token string
}

// lifecycle is the reservation's life in one table; the methods below and
// every status-to-Redis mapping read it.
var lifecycle = map[ReservationStatus]stage{
	StatusQueued:         {next: []ReservationStatus{StatusPendingPayment, StatusFailed, StatusCancelled}, token: TokenHeld},
	StatusPendingPayment: {next: []ReservationStatus{StatusPaid, StatusExpired, StatusCancelled}, token: TokenOrdered},
	StatusPaid:           {token: TokenPaid},
	StatusExpired:        {token: TokenReleased},
	StatusCancelled:      {token: TokenReleased},
	StatusFailed:         {token: TokenReleased},
}

// Next lists the statuses s may move to.
func (s ReservationStatus) Next() []ReservationStatus { return lifecycle[s].next }

// TokenState is the state of the reservation's token in Redis while the
// reservation is in status s ("" for an unknown status).
func (s ReservationStatus) TokenState() string { return lifecycle[s].token }

// Terminal reports whether no further transition is possible.
func (s ReservationStatus) Terminal() bool {
	st, ok := lifecycle[s]
	return ok && len(st.next) == 0
}

// HoldsUnit reports whether a reservation in this status keeps the user from
// buying again: it holds a unit or has paid for one.
func (s ReservationStatus) HoldsUnit() bool {
	t := s.TokenState()
	return t != "" && t != TokenReleased
}

// Live reports whether a reservation in this status is a live order: it
// took a unit from the database (PENDING_PAYMENT or PAID).
func (s ReservationStatus) Live() bool {
	t := s.TokenState()
	return t == TokenOrdered || t == TokenPaid
}

// Valid reports whether s is one of the contract's statuses.
func (s ReservationStatus) Valid() bool {
	_, ok := lifecycle[s]
	return ok
}

// LiveCount sums the live statuses (Live) of counts by status, keyed by
// the status or by its name: the stock balances count these
// (db_stock + live = stock_total).
func LiveCount[K ~string](counts map[K]int64) int64 {
	var n int64
	for s, c := range counts {
		if ReservationStatus(s).Live() {
			n += c
		}
	}
	return n
}

// SaleControl is what an operator decided about a sale.
type SaleControl string

const (
	ControlActive  SaleControl = "active"
	ControlPaused  SaleControl = "paused"
	ControlStopped SaleControl = "stopped"
)

// SaleMode says which store takes a sale's reservations. A sale is in one
// mode at a time; the epoch grows at every switch so that Redis can tell that
// its copy of the sale is stale.
type SaleMode string

const (
	ModeRedis    SaleMode = "redis"
	ModeDatabase SaleMode = "database"
	// ModeResync is the short step back from database to Redis mode:
	// neither path sells while Redis is rebuilt from the database.
	ModeResync SaleMode = "resync"
)

// RedisFleetView counts the processes (API instances and workers) seen
// lately by their own view of Redis; degraded.FleetDown is its majority
// rule.
type RedisFleetView struct {
	Up, Down int
	// OldWorkers counts the workers seen whose release predates
	// HoldRecordVersion: they cannot place the order of a hold that took
	// its unit when it was recorded.
	OldWorkers int
}

// HoldRecordVersion is the form of a Redis hold's record this release
// writes and reads: 1, the hold takes its unit from a bucket when it is
// recorded (store.RecordRedisHold), so its order takes none. Each process
// publishes it with its view of Redis; an API records holds so only while
// no worker of an older release runs (a rolling deploy), and records them
// without their unit, as before, until then.
const HoldRecordVersion = 1

// SaleState is the public state of a sale in the sale view.
type SaleState string

const (
	StateUpcoming SaleState = "upcoming"
	StateLive     SaleState = "live"
	StateSoldOut  SaleState = "sold_out"
	StateEnded    SaleState = "ended"
)

// ReservationPath says which path took a reservation.
type ReservationPath string

const (
	PathRedis    ReservationPath = "redis"
	PathDatabase ReservationPath = "database"
)

// Sale is a flash sale of one goods item.
type Sale struct {
	ID                   int64
	GoodsID              int64
	Title                string
	PriceCents           int64
	StockTotal           int64
	Buckets              int
	StartsAt             time.Time
	EndsAt               time.Time
	PaymentWindowSeconds int
	PerUserLimit         int
	Control              SaleControl
	Mode                 SaleMode
	ModeEpoch            int64
	// ModeChangedAt is when the sale last changed mode (zero: never).
	ModeChangedAt time.Time
	// Warmed: the sale was loaded into Redis once, so Redis missing its
	// keys is a fault (lost keys), not "not warmed yet".
	Warmed    bool
	CreatedAt time.Time
	// ChallengeDifficulty is the ALTCHA maxnumber a reservation's pass
	// was solved at; 0: no challenge.
	ChallengeDifficulty int64
	// Restricted: only users on the sale's allowlist may reserve.
	Restricted bool
	// AllowlistVersion moves with every allowlist change (0: never had one).
	AllowlistVersion int64
	// RedisWentBack: a hold found Redis behind the database (it lost
	// acknowledged writes); the worker rebuilds the sale from the database.
	RedisWentBack bool
}

// PaymentWindow is how long a placed order waits for payment.
func (s *Sale) PaymentWindow() time.Duration {
	return time.Duration(s.PaymentWindowSeconds) * time.Second
}

// StateAt is the public state of the sale at now given the units left.
func (s *Sale) StateAt(now time.Time, stockLeft int64) SaleState {
	switch {
	case s.Control == ControlStopped || !now.Before(s.EndsAt):
		return StateEnded
	case now.Before(s.StartsAt):
		return StateUpcoming
	case stockLeft <= 0:
		return StateSoldOut
	}
	return StateLive
}

// SaleView is the contract's public view of a sale.
type SaleView struct {
	SaleID               int64     `json:"sale_id"`
	GoodsID              int64     `json:"goods_id"`
	Title                string    `json:"title"`
	PriceCents           int64     `json:"price_cents"`
	StockTotal           int64     `json:"stock_total"`
	StockLeft            int64     `json:"stock_left"`
	StartsAt             time.Time `json:"starts_at"`
	EndsAt               time.Time `json:"ends_at"`
	PaymentWindowSeconds int       `json:"payment_window_seconds"`
	PerUserLimit         int       `json:"per_user_limit"`
	State                SaleState `json:"state"`
	ChallengeDifficulty  int64     `json:"challenge_difficulty"`
	WaitlistLength       int64     `json:"waitlist_length"`
	Restricted           bool      `json:"restricted"`
}

// View renders the sale for clients, with its stock left and how many
// users wait for a returned unit.
func (s *Sale) View(now time.Time, stockLeft, waiting int64) SaleView {
	if stockLeft < 0 {
		stockLeft = 0
	}
	return SaleView{
		SaleID:               s.ID,
		GoodsID:              s.GoodsID,
		Title:                s.Title,
		PriceCents:           s.PriceCents,
		StockTotal:           s.StockTotal,
		StockLeft:            stockLeft,
		StartsAt:             s.StartsAt.UTC(),
		EndsAt:               s.EndsAt.UTC(),
		PaymentWindowSeconds: s.PaymentWindowSeconds,
		PerUserLimit:         s.PerUserLimit,
		State:                s.StateAt(now, stockLeft),
		ChallengeDifficulty:  s.ChallengeDifficulty,
		WaitlistLength:       waiting,
		Restricted:           s.Restricted,
	}
}

// Reservation is one user's claim on one unit of a sale, named by its token:
// the one shape of a reservation. The store reads it from its row; the
// order workflow carries it as its OrderState (State), clients see its
// View. It starts one of two ways: a Redis hold (RedisHoldInput, and
// HeldReservation for how it looks before its workflow recorded it) or the
// database path (DatabasePathReservation, DatabasePathInput); OrderInput
// starts its workflow again.
type Reservation struct {
	Token       string
	SaleID      int64
	UserID      int64
	RequestID   string
	Path        ReservationPath
	Status      ReservationStatus
	OrderNo     string
	AmountCents int64
	PayBy       *time.Time
	PaymentRef  string
	FailReason  string // why a FAILED reservation failed (FailReason*)
	TokenState  string // the token's Redis state (Token*) where read from Redis; "" from the database alone
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// OrderInput is the input that starts (or restarts) this reservation's
// order workflow: a database-path reservation took its unit in the
// database path's own transaction.
func (r *Reservation) OrderInput() OrderInput {
	return OrderInput{Token: r.Token, SaleID: r.SaleID, UserID: r.UserID, RequestID: r.RequestID, Path: r.Path,
		Deducted: r.Path == PathDatabase}
}

// ReservationView is the contract's view of a reservation.
type ReservationView struct {
	Token       string            `json:"token"`
	SaleID      int64             `json:"sale_id"`
	Status      ReservationStatus `json:"status"`
	OrderNo     string            `json:"order_no,omitempty"`
	AmountCents int64             `json:"amount_cents"`
	PayBy       *time.Time        `json:"pay_by,omitempty"`
}

// Accepted is a reservation's 202: its token, QUEUED.
type Accepted struct {
	Token     string            `json:"token"`
	Status    ReservationStatus `json:"status"`
	SaleID    int64             `json:"sale_id"`
	RequestID string            `json:"request_id"`
}

// View renders the reservation for its owner.
func (r *Reservation) View() ReservationView {
	return r.State().View()
}

// State is the reservation as the order workflow carries it.
func (r *Reservation) State() OrderState {
	st := OrderState{
		Token:       r.Token,
		SaleID:      r.SaleID,
		UserID:      r.UserID,
		Status:      r.Status,
		OrderNo:     r.OrderNo,
		AmountCents: r.AmountCents,
		PaymentRef:  r.PaymentRef,
		FailReason:  r.FailReason,
	}
	if r.PayBy != nil {
		t := r.PayBy.UTC()
		st.PayBy = &t
	}
	return st
}

// View renders the workflow's state of a reservation for its owner: the
// one conversion to the contract's view.
func (st OrderState) View() ReservationView {
	v := ReservationView{
		Token:       st.Token,
		SaleID:      st.SaleID,
		Status:      st.Status,
		OrderNo:     st.OrderNo,
		AmountCents: st.AmountCents,
	}
	if st.PayBy != nil {
		t := st.PayBy.UTC()
		v.PayBy = &t
	}
	return v
}

// HeldReservation is a Redis hold as it stands before its workflow has
// recorded it: QUEUED, with no order yet (its amount, the sale's price, is
// the caller's to fill in where it shows one).
func HeldReservation(token string, saleID, userID int64) *Reservation {
	return &Reservation{Token: token, SaleID: saleID, UserID: userID, Path: PathRedis,
		Status: StatusQueued, TokenState: TokenHeld}
}

// DatabasePathReservation is a reservation the database path took: its
// unit deducted and its order placed in the reserving transaction at now,
// so it starts PENDING_PAYMENT with no Redis hold.
func DatabasePathReservation(in OrderInput, orderNo string, amountCents int64, payBy, now time.Time) *Reservation {
	return &Reservation{Token: in.Token, SaleID: in.SaleID, UserID: in.UserID, RequestID: in.RequestID,
		Path: PathDatabase, Status: StatusPendingPayment, OrderNo: orderNo,
		AmountCents: amountCents, PayBy: &payBy, CreatedAt: now, UpdatedAt: now}
}

// Appeal reasons: the refusals a user may appeal (contract 1.2).
const (
	AppealBlacklisted = "blacklisted"
	AppealChallenge   = "challenge"
	AppealRateLimited = "rate_limited"
)

// Appeal states and the actions that close an appeal.
const (
	AppealOpen     = "open"
	AppealResolved = "resolved"
	AppealRejected = "rejected"

	ActionUnblacklist = "unblacklist"
	ActionExempt      = "exempt"
	ActionReject      = "reject"
)

// Appeal is a user's request to lift a refusal, as operators list it.
type Appeal struct {
	ID        int64     `json:"appeal_id"`
	UserID    int64     `json:"user_id"`
	SaleID    int64     `json:"sale_id"`
	Reason    string    `json:"reason"`
	Message   string    `json:"message"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at"`
}

// ParseID reads an id: it accepts only [1-9][0-9]* that fits an int64.
func ParseID(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 19 || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
