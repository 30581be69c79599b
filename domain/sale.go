package domain

import "time"

// The sale workflow's public contract.
const (
	// QueryReport answers the sale's latest reconciliation report, or a
	// NoReportYet before the first one.
	QueryReport = "report"
	// QuerySalePhase answers where the sale workflow stands.
	QuerySalePhase = "phase"
	// SignalSaleChanged tells a live sale's workflow that the change feed
	// noted its sale: it reconciles within a period (no payload).
	SignalSaleChanged = "sale-changed"

	// DefaultWarmLead is how long before starts_at the sale is warmed up:
	// never at the moment it opens.
	DefaultWarmLead = 30 * time.Second
	// DefaultReconcileEvery is the live reconciliation period.
	DefaultReconcileEvery = time.Minute
	// DefaultRetireMargin is how long a settled sale keeps its Redis keys
	// before it retires: status reads and replays of its last reservations
	// are answered from Redis that long (redisgateway.RetireAfter), later ones by
	// the database.
	DefaultRetireMargin = time.Minute
)

// Sale workflow phases.
const (
	PhaseWaiting     = "waiting"      // before warm-up
	PhaseLive        = "live"         // warmed, reconciling when it changes
	PhaseDraining    = "draining"     // ended, waiting for order workflows
	PhaseFinished    = "finished"     // final report stored, Redis torn down
	PhaseSaleMissing = "sale_missing" // the sale row is gone
)

// SaleInput starts (or continues) a SaleWorkflow.
type SaleInput struct {
	SaleID int64 `json:"sale_id"`
	// Zero means the default; tests shorten them.
	WarmLead       time.Duration `json:"warm_lead,omitempty"`
	ReconcileEvery time.Duration `json:"reconcile_every,omitempty"`
	RetireMargin   time.Duration `json:"retire_margin,omitempty"`
	// HistoryLimit is the history length after which the workflow
	// continues as new (zero: 2000).
	HistoryLimit int `json:"history_limit,omitempty"`
	// Carried across continue-as-new.
	Warmed     bool                  `json:"warmed,omitempty"`
	LastReport *ReconciliationReport `json:"last_report,omitempty"`
	// ReconciledAt is when the last live reconciliation began, and
	// Changed whether a change was signalled since: the next run keeps
	// the period between reconciliations and owes the one signalled.
	ReconciledAt time.Time `json:"reconciled_at,omitzero"`
	Changed      bool      `json:"changed,omitempty"`
}

// SaleResult is what a finished SaleWorkflow returns.
type SaleResult struct {
	SaleID      int64                 `json:"sale_id"`
	FinalReport *ReconciliationReport `json:"final_report"`
}

// NoReportYet is the report query's answer before the sale's first
// reconciliation (the sale workflow reconciles once the sale is live).
type NoReportYet struct {
	SaleID int64     `json:"sale_id"`
	Phase  string    `json:"phase"`
	Report *struct{} `json:"report"`
	Note   string    `json:"note"`
}

// PassShare is which of shares ticks of a reader's full pass reads the
// sale: a hash of its id, so any run of ids (consecutive, or spaced by an
// auto-increment step) spreads evenly over the pass.
func PassShare(saleID, shares int64) int64 {
	if shares <= 1 {
		return 0
	}
	return int64((uint64(saleID) * 0x9E3779B97F4A7C15 >> 32) % uint64(shares))
}
