// Package reconcile proves that a sale's Redis state, its orders, its stock
// buckets and its ledger agree, down to the user, and repairs what is safe
// and idempotent to repair: always through the token's own workflow, or by
// rebuilding a drifted Redis stock from the database while no hold is in
// flight. Redis is read in one script and the database in one snapshot; a
// discrepancy is reported only when two passes both see it, so a report
// taken during a live sale is meaningful.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
)

// Reconciler reconciles sales.
type Reconciler struct {
	Store *store.Store
	Redis *redisgateway.Client
	// Temporal tells whether a token's workflow exists. Required.
	Temporal client.Client
	// Start starts (or finds) a token's OrderWorkflow; nil reports only.
	Start func(ctx context.Context, in domain.OrderInput) error
	// Restart starts a new run of a token whose workflow closed while its
	// reservation is live (temporalgateway.Restart); nil reports only.
	Restart func(ctx context.Context, in domain.OrderInput) error
	// Gap separates the two passes (default 1s).
	Gap time.Duration
	// StaleAfter is how long an inbox entry may stay unacknowledged before
	// it is reported (default 30s).
	StaleAfter time.Duration
	Logger     *slog.Logger
}

// primary names the primary in a report's ReadFrom.
var primary = store.FromPrimary.String()

// observation is one pass.
type observation struct {
	report  domain.ReconciliationReport
	redis   *redisgateway.Snapshot
	db      *store.Snapshot
	found   map[string]domain.Discrepancy
	holding map[int64]bool // users with a Redis token still held or ordered
}

func key(d domain.Discrepancy) string {
	return d.Kind + "|" + d.Token + "|" + strconv.FormatInt(d.UserID, 10)
}

func (o *observation) add(d domain.Discrepancy) { o.found[key(d)] = d }

// Run reconciles one sale. With repair, it repairs what is safe; repaired
// discrepancies stay in this report (marked) and are gone from the next.
func (r *Reconciler) Run(ctx context.Context, saleID int64, repair bool) (*domain.ReconciliationReport, error) {
	gap := r.Gap
	if gap <= 0 {
		gap = time.Second
	}
	first, err := r.observe(ctx, saleID)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("reconcile sale %d: %w", saleID, ctx.Err())
	case <-time.After(gap):
	}
	second, err := r.observe(ctx, saleID)
	if err != nil {
		return nil, err
	}
	rep := second.report
	var seen []domain.Discrepancy
	for k, d := range second.found {
		if _, ok := first.found[k]; ok {
			seen = append(seen, d)
		}
	}
	seen, err = r.confirmWithWorkflows(ctx, saleID, seen, repair, inInbox(first.redis, second.redis))
	if err != nil {
		return nil, err
	}
	closed, err := r.closedWorkflows(ctx, saleID, liveInBoth(first.db, second.db), repair, false)
	if err != nil {
		return nil, err
	}
	seen = append(seen, closed...)
	if repair {
		seen = r.restoreMarks(ctx, saleID, seen)
		seen = r.syncBehind(ctx, saleID, seen)
		seen = r.repairStock(ctx, saleID, second, seen)
	}
	sort.Slice(seen, func(i, j int) bool { return key(seen[i]) < key(seen[j]) })
	rep.Discrepancies = seen
	if rep.Discrepancies == nil {
		rep.Discrepancies = []domain.Discrepancy{}
	}
	rep.Consistent = len(seen) == 0 && identitiesHold(&rep)
	// The snapshots are compared with Redis as it is now, and a suspect
	// is judged as it is now: a replica's lag would show Redis ahead.
	rep.ReadFrom = map[string]string{domain.ReadsSnapshots: primary, domain.ReadsRereads: primary}
	return &rep, nil
}

// inInbox reports whether a token's hold may still be waiting for its
// workflow in the inbox. A hold's workflow is started from its inbox
// entry, acknowledged only once started: while either pass saw the hold's
// own entry still to hand on (undelivered or pending), the hold is on its
// way, not a leak; entries of other holds excuse nothing, so a leak in a
// busy sale is found. When a pass could not list the entries (a backlog
// over the script's bound), any entry still to hand on may be the hold's.
func inInbox(passes ...*redisgateway.Snapshot) func(token string) bool {
	busy := false
	for _, p := range passes {
		if p.Waiting == nil && p.Pending+max(p.Lag, 0) > 0 {
			busy = true
		}
	}
	return func(token string) bool {
		if busy {
			return true
		}
		for _, p := range passes {
			if p.Waiting[token] {
				return true
			}
		}
		return false
	}
}

// identitiesHold checks the contract's two identities on a report.
func identitiesHold(rep *domain.ReconciliationReport) bool {
	live := domain.LiveCount(rep.Orders)
	dbOK := rep.DBStock+live == rep.StockTotal
	if !rep.RedisLoaded {
		return dbOK
	}
	return dbOK && rep.RedisStock+rep.InFlight+live == rep.StockTotal
}

func (r *Reconciler) staleAfter() time.Duration {
	if r.StaleAfter > 0 {
		return r.StaleAfter
	}
	return 30 * time.Second
}

// observe takes one pass: Redis first, then the database. A hold made
// between the two reads can show up in the database but not in Redis; the
// second pass exists for such moments.
func (r *Reconciler) observe(ctx context.Context, saleID int64) (*observation, error) {
	rs, err := r.Redis.ReadSnapshot(ctx, saleID, r.staleAfter())
	if err != nil {
		return nil, fmt.Errorf("reconcile sale %d: %w", saleID, err)
	}
	ds, err := r.Store.ReadSnapshot(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("reconcile sale %d: %w", saleID, err)
	}
	o := newObservation(saleID, rs, ds)
	// The checks, in this order: the token checks count the reservations in
	// flight, which the identities use.
	for token, e := range rs.Tokens {
		o.checkToken(token, e)
	}
	o.checkStatusRecords()
	o.checkBuyers()
	o.checkIdentities()
	o.checkInbox(r.staleAfter())
	return o, nil
}

// newObservation starts the observation of the two snapshots with the
// report's figures.
func newObservation(saleID int64, rs *redisgateway.Snapshot, ds *store.Snapshot) *observation {
	o := &observation{redis: rs, db: ds, found: map[string]domain.Discrepancy{}, holding: map[int64]bool{}}
	rep := &o.report
	rep.SaleID = saleID
	rep.StockTotal = ds.StockTotal
	// Units no order has taken: in the buckets, or held by a hold that
	// took its unit when it was recorded.
	rep.DBStock = ds.DBStock + ds.HeldUnits
	rep.RedisLoaded = rs.Exists
	if rs.Exists {
		rep.RedisStock = rs.Stock
	}
	rep.Orders = map[string]int64{}
	for _, st := range []domain.ReservationStatus{domain.StatusPendingPayment, domain.StatusPaid, domain.StatusExpired, domain.StatusCancelled, domain.StatusFailed} {
		rep.Orders[string(st)] = ds.Statuses[st]
	}
	rep.InboxPending = rs.Pending
	rep.InboxLag = max(rs.Lag, 0)
	rep.DeadLetters = rs.Dead
	rep.Refunds = ds.Refunds
	rep.WaitlistHandOvers = ds.WaitlistHandOvers
	rep.CheckedAt = time.Now().UTC()
	return o
}

// checkToken compares a Redis token's state with its database reservation
// and counts the reservations in flight (a unit held in Redis that is
// neither on sale nor in a live order).
func (o *observation) checkToken(token string, e redisgateway.TokenEntry) {
	d, ok := o.db.Reservations[token]
	switch e.State {
	case domain.TokenHeld:
		o.holding[e.UserID] = true
		o.checkHeld(token, e, d, ok)
	case domain.TokenOrdered:
		o.holding[e.UserID] = true
		switch {
		case ok && d.Status == domain.StatusPaid:
			o.add(domain.Discrepancy{Kind: domain.KindRedisBehind, UserID: e.UserID, Token: token, Detail: "Redis says ordered, the database PAID"})
		case ok && d.Status.Live():
		case ok && d.Status.Terminal():
			o.report.InFlight++
			o.add(domain.Discrepancy{Kind: domain.KindReleaseNotFinished, UserID: e.UserID, Token: token, Detail: fmt.Sprintf("order is %s but Redis still holds it", d.Status)})
		default:
			o.add(domain.Discrepancy{Kind: domain.KindTokenStateMismatch, UserID: e.UserID, Token: token, Detail: "Redis says ordered, the database " + describe(d, ok)})
		}
	case domain.TokenPaid:
		if !ok || d.Status != domain.StatusPaid {
			o.add(domain.Discrepancy{Kind: domain.KindTokenStateMismatch, UserID: e.UserID, Token: token, Detail: "Redis says paid, the database " + describe(d, ok)})
		}
	case domain.TokenReleased:
		if ok && d.Status.HoldsUnit() {
			o.add(domain.Discrepancy{Kind: domain.KindTokenStateMismatch, UserID: e.UserID, Token: token, Detail: "Redis says released, the database " + describe(d, ok)})
		}
	}
}

// checkStatusRecords flags a status record that ranks below the
// database's status: status reads would serve it for ever.
func (o *observation) checkStatusRecords() {
	flagged := map[string]bool{}
	for _, d := range o.found {
		flagged[d.Token] = true
	}
	for token, rank := range o.redis.StatusRanks {
		d, ok := o.db.Reservations[token]
		// A token already flagged (a release not finished) is repaired
		// with its record: one discrepancy per token.
		if ok && !flagged[token] && rank < sales.StatusSeq(d.Status) {
			o.add(domain.Discrepancy{Kind: domain.KindRedisBehind, UserID: d.UserID, Token: token,
				Detail: fmt.Sprintf("Redis's status record ranks %d, the database says %s", rank, d.Status)})
		}
	}
}

// checkHeld checks a token Redis says is held.
func (o *observation) checkHeld(token string, e redisgateway.TokenEntry, d store.SnapshotReservation, ok bool) {
	switch {
	case !ok:
		o.report.InFlight++
		o.add(domain.Discrepancy{Kind: domain.KindHoldWithoutWorkflow, UserID: e.UserID, Token: token, Detail: "Redis holds a unit for this token but the database has no reservation"})
	case d.Status == domain.StatusQueued:
		o.report.InFlight++
	case d.Status.Live():
		// Placed, and still held in both passes: the step that marks it
		// ordered (or paid) was lost.
		o.add(domain.Discrepancy{Kind: domain.KindRedisBehind, UserID: e.UserID, Token: token, Detail: fmt.Sprintf("Redis says held, the database %s", d.Status)})
	default:
		o.report.InFlight++
		o.add(domain.Discrepancy{Kind: domain.KindReleaseNotFinished, UserID: e.UserID, Token: token, Detail: fmt.Sprintf("reservation is %s but Redis still holds it", d.Status)})
	}
}

// checkBuyers compares Redis's buyer set with the users of live orders and
// of Redis holds.
func (o *observation) checkBuyers() {
	rs, ds := o.redis, o.db
	if !rs.Exists {
		return
	}
	for user := range rs.Buyers {
		if _, live := ds.LiveUsers[user]; !live && !o.holding[user] {
			o.add(domain.Discrepancy{Kind: domain.KindRedisMarkWithoutOrder, UserID: user, Detail: "user is in the buyer set without a live order or a hold"})
		}
	}
	for user, token := range ds.LiveUsers {
		if ds.Reservations[token].Path == domain.PathRedis && !rs.Buyers[user] {
			o.add(domain.Discrepancy{Kind: domain.KindOrderWithoutRedisMark, UserID: user, Token: token, Detail: "live order whose user is missing from the buyer set"})
		}
	}
}

// checkIdentities checks the stock identities: Redis's and the database's
// stock against the live orders, the buckets against the ledger.
func (o *observation) checkIdentities() {
	rs, ds, inFlight := o.redis, o.db, o.report.InFlight
	live := domain.LiveCount(ds.Statuses)
	if rs.Exists && rs.Stock+inFlight+live != ds.StockTotal {
		o.add(domain.Discrepancy{Kind: domain.KindRedisStockDrift, Detail: fmt.Sprintf("redis_stock %d + in_flight %d + live orders %d != stock_total %d", rs.Stock, inFlight, live, ds.StockTotal)})
	}
	if ds.DBStock+ds.HeldUnits+live != ds.StockTotal {
		o.add(domain.Discrepancy{Kind: domain.KindDBStockDrift, Detail: fmt.Sprintf("db_stock %d (buckets %d + held by queued holds %d) + live orders %d != stock_total %d",
			ds.DBStock+ds.HeldUnits, ds.DBStock, ds.HeldUnits, live, ds.StockTotal)})
	}
	if want := ds.StockTotal - ds.Deducts + ds.Restores; ds.DBStock != want {
		o.add(domain.Discrepancy{Kind: domain.KindLedgerBucketMismatch, Detail: fmt.Sprintf("buckets hold %d, the ledger says %d", ds.DBStock, want)})
	}
	if ds.Deducts-ds.Restores != live+ds.HeldUnits {
		o.add(domain.Discrepancy{Kind: domain.KindLedgerBucketMismatch, Token: "orders", Detail: fmt.Sprintf("ledger deducts %d - restores %d != live orders %d + held by queued holds %d", ds.Deducts, ds.Restores, live, ds.HeldUnits)})
	}
}

// checkInbox reports dead letters and entries unacknowledged for longer
// than staleAfter.
func (o *observation) checkInbox(staleAfter time.Duration) {
	rs := o.redis
	if rs.Dead > 0 {
		o.add(domain.Discrepancy{Kind: domain.KindInboxDeadLetter, Detail: fmt.Sprintf("%d inbox entries were dead-lettered", rs.Dead)})
	}
	if rs.Stale > 0 {
		o.add(domain.Discrepancy{Kind: domain.KindInboxUnacked, Detail: fmt.Sprintf("%d inbox entries unacknowledged for over %s", rs.Stale, staleAfter)})
	}
}

func describe(d store.SnapshotReservation, ok bool) string {
	if !ok {
		return "has no reservation"
	}
	return "says " + string(d.Status)
}

// confirmWithWorkflows drops hold and release findings that a running
// workflow explains, and repairs the others by starting the token's own
// workflow (idempotent: same id, same workflow).
func (r *Reconciler) confirmWithWorkflows(ctx context.Context, saleID int64, seen []domain.Discrepancy, repair bool, inInbox func(token string) bool) ([]domain.Discrepancy, error) {
	out := seen[:0]
	for _, d := range seen {
		if d.Kind != domain.KindHoldWithoutWorkflow && d.Kind != domain.KindReleaseNotFinished {
			out = append(out, d)
			continue
		}
		if d.Kind == domain.KindHoldWithoutWorkflow && inInbox(d.Token) {
			continue // possibly still in the inbox; stale entries are reported as inbox_unacked
		}
		running, exists, err := r.workflowState(ctx, d.Token)
		if err != nil {
			return nil, err
		}
		if running || (d.Kind == domain.KindHoldWithoutWorkflow && exists) {
			continue // in flight, not a discrepancy
		}
		if d.Kind == domain.KindReleaseNotFinished {
			// The database ended the reservation and no workflow runs to
			// finish Redis: finish it from the token's state, as the
			// workflow's own Redis step does (a closed workflow's start
			// would return the old run and change nothing).
			if repair {
				changed, err := sales.SyncToken(ctx, r.Store, r.Redis, d.Token)
				if err != nil {
					r.log().Warn("reconcile: finishing a release failed", "sale_id", saleID, "token", d.Token, "err", err)
				} else if changed {
					d.Repaired = true
					r.log().Info("reconcile: finished a release in Redis", "sale_id", saleID, "token", d.Token)
				}
			}
			out = append(out, d)
			continue
		}
		if repair && r.Start != nil {
			in, err := r.orderInput(ctx, saleID, d)
			if err != nil {
				r.log().Warn("reconcile: cannot build repair", "sale_id", saleID, "token", d.Token, "err", err)
			} else if err := r.Start(ctx, in); err != nil {
				r.log().Warn("reconcile: repair start failed", "sale_id", saleID, "token", d.Token, "err", err)
			} else {
				d.Repaired = true
				r.log().Info("reconcile: repaired by starting the token's workflow", "sale_id", saleID, "token", d.Token, "kind", d.Kind)
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// workflowState describes order:<token>.
func (r *Reconciler) workflowState(ctx context.Context, token string) (running, exists bool, err error) {
	st, exists, err := temporalgateway.LatestRun(ctx, r.Temporal, token)
	return st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, exists, err
}

// orderInput rebuilds a token's workflow input: from the database row when
// there is one, else from Redis's replay map (the request id is the field
// "user:request_id" whose value is the token).
func (r *Reconciler) orderInput(ctx context.Context, saleID int64, d domain.Discrepancy) (domain.OrderInput, error) {
	if res, err := r.Store.GetReservation(ctx, d.Token); err == nil {
		return res.OrderInput(), nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return domain.OrderInput{}, err
	}
	requestID, ok, err := r.Redis.RequestID(ctx, saleID, d.UserID, d.Token)
	if err != nil {
		return domain.OrderInput{}, err
	}
	if !ok {
		return domain.OrderInput{}, fmt.Errorf("no request id found for token %s", d.Token)
	}
	return domain.RedisHoldInput(d.Token, saleID, d.UserID, requestID), nil
}

// restoreMarks puts back the token state and buyer mark of live orders
// that Redis lost (a restart without its AOF's last second), so their users
// cannot buy twice and their releases find the tokens.
func (r *Reconciler) restoreMarks(ctx context.Context, saleID int64, seen []domain.Discrepancy) []domain.Discrepancy {
	for i, d := range seen {
		if d.Kind != domain.KindOrderWithoutRedisMark {
			continue
		}
		changed, err := sales.RestoreLive(ctx, r.Store, r.Redis, d.Token)
		if err != nil {
			r.log().Warn("reconcile: restoring a lost buyer mark failed", "sale_id", saleID, "token", d.Token, "err", err)
			continue
		}
		if changed {
			seen[i].Repaired = true
			r.log().Info("reconcile: restored a live order's token and buyer mark in Redis", "sale_id", saleID, "token", d.Token, "user_id", d.UserID)
		}
	}
	return seen
}

// syncBehind brings Redis's token state and status record up to the
// database's status (sales.SyncToken) where reconciliation found them
// behind it.
func (r *Reconciler) syncBehind(ctx context.Context, saleID int64, seen []domain.Discrepancy) []domain.Discrepancy {
	for i, d := range seen {
		if d.Kind != domain.KindRedisBehind {
			continue
		}
		if _, err := sales.SyncToken(ctx, r.Store, r.Redis, d.Token); err != nil {
			r.log().Warn("reconcile: syncing a token Redis has behind the database failed", "sale_id", saleID, "token", d.Token, "err", err)
			continue
		}
		seen[i].Repaired = true
		r.log().Info("reconcile: synced a token Redis had behind the database", "sale_id", saleID, "token", d.Token, "user_id", d.UserID)
	}
	return seen
}

// repairStock repairs a Redis stock drift seen in both passes, from the
// second pass's database snapshot and Redis's token states at the moment
// of the repair (redisgateway.RepairStock): holds in flight are counted where Redis
// has them, so the repair needs no quiet moment: a selling sale never has
// a pass with nothing in flight, and waiting for one would leave an AOF
// loss's lost decrements keeping Redis's stock too high, its extra holds
// ending FAILED.
func (r *Reconciler) repairStock(ctx context.Context, saleID int64, second *observation, seen []domain.Discrepancy) []domain.Discrepancy {
	for i, d := range seen {
		if d.Kind != domain.KindRedisStockDrift {
			continue
		}
		db := second.db
		if db.DBStock+db.HeldUnits+domain.LiveCount(db.Statuses) != db.StockTotal {
			continue // the database disagrees with itself: report, do not copy
		}
		var live []string
		for tok, res := range db.Reservations {
			if res.Status.Live() {
				live = append(live, tok)
			}
		}
		rep, err := r.Redis.RepairStock(ctx, saleID, db.StockTotal, db.AddedRefs, live)
		if err != nil {
			r.log().Warn("reconcile: stock repair failed", "sale_id", saleID, "err", err)
			continue
		}
		switch rep.Outcome {
		case redisgateway.RepairSet:
			seen[i].Repaired = true
			r.log().Info("reconcile: rebuilt Redis stock from the database", "sale_id", saleID, "from", rep.From, "to", rep.To)
		case redisgateway.RepairRight:
			// The passes' skew, or healed meanwhile: nothing to repair.
		default:
			r.log().Warn("reconcile: stock repair refused", "sale_id", saleID, "stock", rep.From, "computed", rep.To)
		}
	}
	return seen
}

func (r *Reconciler) log() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// liveInBoth lists the reservations live (QUEUED or PENDING_PAYMENT) with
// the same status in both snapshots.
func liveInBoth(first, second *store.Snapshot) map[string]store.SnapshotReservation {
	out := map[string]store.SnapshotReservation{}
	for tok, d := range second.Reservations {
		if d.Status != domain.StatusQueued && d.Status != domain.StatusPendingPayment {
			continue
		}
		if p, ok := first.Reservations[tok]; ok && p.Status == d.Status {
			out[tok] = d
		}
	}
	return out
}

// RepairClosedWorkflows checks every live reservation of the sale (one
// database snapshot) for a closed workflow and repairs what it finds; it
// answers the findings. The sale workflow calls it while it waits to tear
// down, when no regular reconciliation runs any more.
//
// Its scan may come from the replica (store.ReadSnapshotMayLag): every
// suspect is read again from the primary before it is repaired, and a
// reservation younger than the replica's lag, missed now, is found by the
// next call (the caller counts the live reservations on the primary, so
// the sale waits for it).
func (r *Reconciler) RepairClosedWorkflows(ctx context.Context, saleID int64) ([]domain.Discrepancy, error) {
	ds, from, err := r.Store.ReadSnapshotMayLag(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("repair closed workflows of sale %d: %w", saleID, err)
	}
	r.log().Debug("reconcile: closed workflows scan", "sale_id", saleID, "scan_from", from.String(), "rereads_from", primary)
	return r.closedWorkflows(ctx, saleID, liveInBoth(ds, ds), true, true)
}

// RepairToken applies the closed-workflow policy to one reservation: when
// it is live and its workflow has closed, it is taken over by a new run
// (before pay_by) or released (after); when it is live and has no workflow
// yet, the workflow is started. It reports whether the caller should ask
// the token's workflow again: it repaired it, or found it running now. The
// API calls it when a payment or cancel finds the workflow closed, so the
// caller gets an answer now instead of waiting for the next reconciliation.
func (r *Reconciler) RepairToken(ctx context.Context, token string) (bool, error) {
	res, err := r.Store.GetReservation(ctx, token)
	if err != nil {
		return false, fmt.Errorf("repair %s: %w", token, err)
	}
	if res.Status != domain.StatusQueued && res.Status != domain.StatusPendingPayment {
		return false, nil
	}
	status, exists, err := temporalgateway.LatestRun(ctx, r.Temporal, token)
	if err != nil {
		return false, fmt.Errorf("repair %s: %w", token, err)
	}
	switch {
	case exists && status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		// Started meanwhile (the caller found none a moment ago, as a
		// payment racing its database-path order's start does): ask it.
		return true, nil
	case !exists:
		// Not started yet (its starter and relay are behind, or Temporal
		// was down when they tried): start it now, as they would.
		if r.Start == nil {
			return false, nil
		}
		if err := r.Start(ctx, res.OrderInput()); err != nil {
			return false, fmt.Errorf("repair %s: start its workflow: %w", token, err)
		}
		r.log().Info("reconcile: started the workflow of a live reservation that had none", "token", token)
		return true, nil
	}
	return r.repairClosed(ctx, res), nil
}

// closedWorkflows finds live reservations whose order workflow is not
// running. Each suspect is described and read again, so neither
// visibility's lag nor an order that just ended is taken for a closed
// workflow. The suspects: with full, every live token missing from the
// sale's running order workflows (one listing of them all); otherwise the
// live tokens among the sale's closed order workflows, and the QUEUED ones
// older than StaleAfter (a hold with no workflow at all). The regular
// passes take the second way: during a burst's drain every order is
// running and none closed, and listing them all each minute competed with
// the drain for the Temporal server. A close visibility shows late is
// found by the next pass; the teardown's repair (RepairClosedWorkflows)
// takes the full way. A token with no workflow at all is left to the
// inbox, the outbox relay and hold_without_workflow.
//
// Repair policy: before pay_by (or while QUEUED) a new run takes the
// reservation over (Restart: one running workflow per token still); after
// pay_by the reservation is released directly, as its workflow would have
// on expiry: the order EXPIRED and its unit back in its bucket, then the
// Redis hold released and the unit back on sale. The finding stays in this
// report marked repaired; the next pass confirms the repair by not finding
// it again.
func (r *Reconciler) closedWorkflows(ctx context.Context, saleID int64, live map[string]store.SnapshotReservation, repair, full bool) ([]domain.Discrepancy, error) {
	if len(live) == 0 {
		return nil, nil
	}
	suspects, err := r.closedSuspects(ctx, saleID, live, full)
	if err != nil {
		return nil, err
	}
	var out []domain.Discrepancy
	for tok, d := range suspects {
		status, exists, err := temporalgateway.LatestRun(ctx, r.Temporal, tok)
		if err != nil {
			return nil, err
		}
		if !exists {
			if f, ok := r.queuedWithoutWorkflow(ctx, tok, d, repair); ok {
				out = append(out, f)
			}
			continue
		}
		if status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			continue
		}
		res, err := r.Store.GetReservation(ctx, tok)
		if err != nil {
			return nil, fmt.Errorf("reconcile sale %d: read %s: %w", saleID, tok, err)
		}
		if res.Status != domain.StatusQueued && res.Status != domain.StatusPendingPayment {
			continue // ended meanwhile: the workflow closed after its work
		}
		found := domain.Discrepancy{Kind: domain.KindWorkflowClosed, UserID: d.UserID, Token: tok,
			Detail: fmt.Sprintf("reservation is %s but its workflow is %s", res.Status, strings.ToLower(strings.TrimPrefix(status.String(), "WORKFLOW_EXECUTION_STATUS_")))}
		if repair {
			found.Repaired = r.repairClosed(ctx, res)
		}
		out = append(out, found)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Token < out[j].Token })
	return out, nil
}

// closedSuspects picks the live reservations closedWorkflows describes.
func (r *Reconciler) closedSuspects(ctx context.Context, saleID int64, live map[string]store.SnapshotReservation, full bool) (map[string]store.SnapshotReservation, error) {
	out := map[string]store.SnapshotReservation{}
	if full {
		running, err := temporalgateway.Running(ctx, r.Temporal, saleID)
		if err != nil {
			return nil, err
		}
		for tok, d := range live {
			if !running[tok] {
				out[tok] = d
			}
		}
		return out, nil
	}
	closed, err := temporalgateway.Closed(ctx, r.Temporal, saleID)
	if err != nil {
		return nil, err
	}
	for tok, d := range live {
		if closed[tok] || (d.Status == domain.StatusQueued && time.Since(d.UpdatedAt) >= r.staleAfter()) {
			out[tok] = d
		}
	}
	return out, nil
}

// queuedWithoutWorkflow reports a QUEUED reservation that has had no
// workflow for longer than staleAfter, and with repair starts it. The API
// records a 202 QUEUED when Temporal did not take its start (so that the
// 202 outlives the API and a loss of Redis's writes); if that API then
// died, nothing else would start it. Younger ones are left to the starters
// and relays.
func (r *Reconciler) queuedWithoutWorkflow(ctx context.Context, tok string, d store.SnapshotReservation, repair bool) (domain.Discrepancy, bool) {
	if d.Status != domain.StatusQueued || time.Since(d.UpdatedAt) < r.staleAfter() {
		return domain.Discrepancy{}, false
	}
	found := domain.Discrepancy{Kind: domain.KindHoldWithoutWorkflow, UserID: d.UserID, Token: tok,
		Detail: "the reservation is QUEUED and no workflow of it exists"}
	if !repair || r.Start == nil {
		return found, true
	}
	res, err := r.Store.GetReservation(ctx, tok)
	if err != nil {
		r.log().Warn("reconcile: read a QUEUED reservation without workflow", "token", tok, "err", err)
		return found, true
	}
	if res.Status != domain.StatusQueued {
		return domain.Discrepancy{}, false // moved on meanwhile
	}
	if err := r.Start(ctx, res.OrderInput()); err != nil {
		r.log().Warn("reconcile: starting a QUEUED reservation's workflow failed", "sale_id", res.SaleID, "token", tok, "err", err)
		return found, true
	}
	found.Repaired = true
	r.log().Info("reconcile: repaired by starting the token's workflow", "sale_id", res.SaleID, "token", tok, "kind", found.Kind)
	return found, true
}

// repairClosed applies the repair policy to one reservation; it reports
// whether the repair was made.
func (r *Reconciler) repairClosed(ctx context.Context, res *domain.Reservation) bool {
	log := r.log().With("sale_id", res.SaleID, "token", res.Token, "status", string(res.Status))
	if res.Status == domain.StatusPendingPayment && res.PayBy != nil && !time.Now().Before(*res.PayBy) {
		if _, err := r.Store.ReleaseOrder(ctx, res.Token, domain.StatusExpired); err != nil {
			log.Warn("reconcile: release of a closed workflow's order failed", "err", err)
			return false
		}
		// Redis follows the token's state now, whatever path took the
		// unit (a database-path order is in Redis after a resync).
		if _, err := sales.SyncToken(ctx, r.Store, r.Redis, res.Token); err != nil {
			log.Warn("reconcile: Redis release of a closed workflow's order failed", "err", err)
			return false
		}
		log.Info("reconcile: released a live reservation whose workflow closed after pay_by")
		return true
	}
	if r.Restart == nil {
		return false
	}
	if err := r.Restart(ctx, res.OrderInput()); err != nil {
		log.Warn("reconcile: restart of a closed workflow failed", "err", err)
		return false
	}
	log.Info("reconcile: a new run took over a live reservation whose workflow closed")
	return true
}
