package domain

import "time"

// Discrepancy kinds reconciliation reports. The set is documented in the
// OpenAPI document and the runbook.
const (
	// A user in Redis's buyer set with no live order and no hold.
	KindRedisMarkWithoutOrder = "redis_mark_without_order"
	// A live Redis-path order whose user is missing from the buyer set.
	KindOrderWithoutRedisMark = "order_without_redis_mark"
	// A hold whose workflow does not exist: in Redis, or a reservation
	// QUEUED in the database for over 30 s (repaired by starting it).
	KindHoldWithoutWorkflow = "hold_without_workflow"
	// An order that ended in the database but whose Redis hold was not
	// released, and whose workflow is no longer running (repaired by
	// running the token's workflow again).
	KindReleaseNotFinished = "release_not_finished"
	// Buckets disagree with the ledger: sum(buckets) != stock_total -
	// deducts + restores, or deducts - restores != live and paid orders.
	KindLedgerBucketMismatch = "ledger_bucket_mismatch"
	// redis_stock + in_flight + PENDING_PAYMENT + PAID != stock_total.
	KindRedisStockDrift = "redis_stock_drift"
	// db_stock + PENDING_PAYMENT + PAID != stock_total.
	KindDBStockDrift = "db_stock_drift"
	// A Redis token whose database reservation disagrees beyond what a
	// workflow in flight explains (e.g. paid in Redis, not in the database).
	KindTokenStateMismatch = "token_state_mismatch"
	// Redis's token state or status record ranks below the database's
	// status (a fault lost the write that advanced it, e.g. a PAID order
	// read as PENDING_PAYMENT): repaired by syncing the token from the
	// database.
	KindRedisBehind = "redis_behind_database"
	// A live reservation (QUEUED or PENDING_PAYMENT in the database) whose
	// order workflow has closed (terminated, failed, timed out, or
	// completed leaving it live). Repaired before pay_by by a new run that
	// adopts the reservation, after pay_by by releasing it directly.
	KindWorkflowClosed = "workflow_closed"
	// Inbox entries dead-lettered after too many failed deliveries.
	KindInboxDeadLetter = "inbox_dead_letter"
	// Inbox entries delivered but not acknowledged.
	KindInboxUnacked = "inbox_unacked"
)

// Discrepancy is one disagreement reconciliation saw in two passes.
type Discrepancy struct {
	UserID   int64  `json:"user_id,omitempty"`
	Token    string `json:"token,omitempty"`
	Kind     string `json:"kind"`
	Detail   string `json:"detail"`
	Repaired bool   `json:"repaired,omitempty"`
}

// ReconciliationReport is the contract's reconciliation answer, with a few
// documented extra fields.
type ReconciliationReport struct {
	SaleID        int64            `json:"sale_id"`
	StockTotal    int64            `json:"stock_total"`
	RedisStock    int64            `json:"redis_stock"`
	DBStock       int64            `json:"db_stock"`
	Orders        map[string]int64 `json:"orders"`
	InFlight      int64            `json:"in_flight"`
	Discrepancies []Discrepancy    `json:"discrepancies"`
	Consistent    bool             `json:"consistent"`

	InboxPending int64 `json:"inbox_pending"`
	InboxLag     int64 `json:"inbox_lag"`
	DeadLetters  int64 `json:"dead_letters"`
	Refunds      int64 `json:"refunds"`
	// WaitlistHandOvers counts the reservations handed to waitlisted users.
	WaitlistHandOvers int64     `json:"waitlist_handovers"`
	RedisLoaded       bool      `json:"redis_loaded"`
	CheckedAt         time.Time `json:"checked_at"`
	// ReadFrom says which database served each of the report's reads
	// (ReadsSnapshots, ReadsRereads): "primary" or "replica".
	ReadFrom map[string]string `json:"read_from,omitempty"`
}

// The reads of a reconciliation report's ReadFrom.
const (
	// ReadsSnapshots: the two passes' database snapshots, compared with
	// Redis's read at the same moment.
	ReadsSnapshots = "snapshots"
	// ReadsRereads: each suspect reservation, read again before it is
	// reported or repaired.
	ReadsRereads = "rereads"
)
