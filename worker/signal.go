package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// Change signaller timing.
const (
	// signalEvery is the signaller's tick: a change is signalled within
	// it, or a period after the sale's last signal.
	signalEvery = 5 * time.Second
	// signalFullEvery spreads a full pass of signals over its ticks.
	signalFullEvery = 10 * time.Minute
	// signalTimeout bounds one signal.
	signalTimeout = 5 * time.Second
	// signalParallel bounds the signals in flight.
	signalParallel = 8
)

// SaleSignaller wakes the SaleWorkflow of each live sale the change feed
// names (temporalgateway.SignalSaleChanged), as a quiet sale's workflow sleeps
// until the sale's end. A sale gets at most one signal a Period from a
// signaller: a change noted within a Period of the sale's last signal is
// owed and signalled once the Period is over, so a busy sale costs its
// workflow one signal a period whatever the feed's rate (one per worker:
// each worker runs a signaller, and the workflow reconciles at most once a
// period whatever it is sent).
//
// A note it never reads costs that change's reconciliation until the
// sale's next change or its end. So that only a note lost with its writer
// (which dies within the note's delay) costs that:
//   - a signaller starts by reading the feed as far back as it keeps notes
//     (redisgateway.ChangesKeep), and the other workers' signallers ran meanwhile;
//   - when the fleet's signallers last read the feed longer ago than that,
//     or Redis lost the mark (redisgateway.SignalledKey), or Redis restarted or
//     failed over since the last tick (redisgateway.Client.Identity: its last
//     notes may be lost), it signals every live sale once, spread over
//     FullEvery: every sale open at that tick, as a sale opened after it
//     notes its changes where this signaller reads them (a marketplace
//     creating thousands of sales just after is not reconciled whole).
//
// A sale not on Redis writes no notes: it is signalled when first seen so,
// and its workflow then reconciles every period until it is back.
type SaleSignaller struct {
	Redis     *redisgateway.Client
	OpenSales func(ctx context.Context) ([]*domain.Sale, error)
	// Signal signals the sale's workflow; a closed or missing one is no
	// error.
	Signal    func(ctx context.Context, saleID int64) error
	Every     time.Duration // signalEvery when zero
	Period    time.Duration // domain.DefaultReconcileEvery when zero
	FullEvery time.Duration // signalFullEvery when zero
	Logger    *slog.Logger

	lastFeed time.Time              // the feed is read through it
	identity string                 // Redis's lineage at the last tick
	sales    map[int64]*saleSignals // the live sales
	fullLeft int64                  // ticks left of the full pass
	passOpen map[int64]bool         // the sales open when the full pass began
}

// saleSignals is what a signaller knows of a live sale. A change is owed
// a signal while its note is newer than the one the last signal covered:
// a note is read on two ticks (the feed's margin), and a signal sent
// after a note was read covers its change.
type saleSignals struct {
	noted    time.Time // the newest note read
	covered  time.Time // the newest note read before the last signal
	forced   bool      // owed a signal, notes or not (a full pass)
	off      bool      // off Redis at this tick
	offRedis bool      // signalled while off Redis
	at       time.Time // the last signal
}

// Run signals until ctx ends.
func (s *SaleSignaller) Run(ctx context.Context) {
	outage := outageLog{logger: s.Logger, what: "sale signaller"}
	everyTick(ctx, orDefault(s.Every, signalEvery), true, func() {
		outage.note(ctx, s.Once(ctx, time.Now()))
	})
}

// Once reads the feed and signals the live sales due at now.
func (s *SaleSignaller) Once(ctx context.Context, now time.Time) error {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	open, err := s.OpenSales(lctx)
	cancel()
	if err != nil {
		return fmt.Errorf("sale signaller: %w", err)
	}
	notes, err := s.readFeed(ctx, now, open)
	if err != nil {
		return err
	}
	due := s.due(open, notes, now)
	if err := s.signal(ctx, due, now); err != nil {
		return err
	}
	mctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	return s.Redis.WriteSignalMark(mctx, now)
}

// readFeed answers the notes since the last read, and starts a full pass
// over the open sales when notes may have been lost unread.
func (s *SaleSignaller) readFeed(ctx context.Context, now time.Time, open []*domain.Sale) (map[int64]time.Time, error) {
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	id, err := s.Redis.Identity(rctx)
	if err != nil {
		return nil, fmt.Errorf("sale signaller: %w", err)
	}
	if s.identity != "" && id != s.identity {
		s.Logger.Warn("sale signaller: Redis restarted or failed over; signalling every live sale")
		s.startFullPass(open)
	}
	since := s.lastFeed.Add(-feedMargin)
	if s.lastFeed.IsZero() {
		mark, ok, err := s.Redis.ReadSignalMark(rctx)
		if err != nil {
			return nil, fmt.Errorf("sale signaller: %w", err)
		}
		since = now.Add(-redisgateway.ChangesKeep)
		if !ok || mark.Before(since.Add(feedMargin)) {
			s.Logger.Info("sale signaller: the feed may have dropped notes unread; signalling every live sale", "mark_found", ok, "mark", mark)
			s.startFullPass(open)
		}
	}
	notes, err := s.Redis.NotesSince(rctx, since)
	if err != nil {
		return nil, fmt.Errorf("sale signaller: %w", err)
	}
	s.identity, s.lastFeed = id, now
	return notes, nil
}

// startFullPass owes every sale of open a signal, spread over the pass's
// ticks.
func (s *SaleSignaller) startFullPass(open []*domain.Sale) {
	s.fullLeft = s.fullShares()
	s.passOpen = make(map[int64]bool, len(open))
	for _, sale := range open {
		s.passOpen[sale.ID] = true
	}
}

func (s *SaleSignaller) fullShares() int64 {
	return max(int64(orDefault(s.FullEvery, signalFullEvery)/orDefault(s.Every, signalEvery)), 1)
}

// due answers the live sales to signal now: those owed (a note newer than
// the last signal covered, or this tick's share of a full pass over the
// sales open when it began) whose last
// signal is a Period old, and those first seen off Redis. It forgets the
// sales no longer live.
func (s *SaleSignaller) due(open []*domain.Sale, notes map[int64]time.Time, now time.Time) []int64 {
	period := orDefault(s.Period, domain.DefaultReconcileEvery)
	var share int64 = -1
	if s.fullLeft > 0 {
		share = s.fullShares() - s.fullLeft
		s.fullLeft--
	} else {
		s.passOpen = nil
	}
	live := make(map[int64]*saleSignals, len(open))
	var due []int64
	for _, sale := range open {
		if !sale.Warmed || now.Before(sale.StartsAt) || !now.Before(sale.EndsAt) {
			continue // its workflow is not in the live phase
		}
		st := s.sales[sale.ID]
		if st == nil {
			st = &saleSignals{}
		}
		live[sale.ID] = st
		if at := notes[sale.ID]; at.After(st.noted) {
			st.noted = at
		}
		if st.off = sale.Mode != domain.ModeRedis; st.off {
			if !st.offRedis {
				due = append(due, sale.ID)
			}
			continue
		}
		st.offRedis = false
		st.forced = st.forced || (s.passOpen[sale.ID] && domain.PassShare(sale.ID, s.fullShares()) == share)
		if (st.forced || st.noted.After(st.covered)) && now.Sub(st.at) >= period {
			due = append(due, sale.ID)
		}
	}
	s.sales = live
	return due
}

// signal signals the sales, signalParallel at a time; the first failure
// stops the rest, which stay owed for the next tick.
func (s *SaleSignaller) signal(ctx context.Context, ids []int64, now time.Time) error {
	done, err := eachParallel(ctx, len(ids), signalParallel, signalTimeout, func(sctx context.Context, i int) error {
		return s.Signal(sctx, ids[i])
	})
	for i, id := range ids {
		st := s.sales[id]
		switch {
		case !done[i]:
		case st.off:
			st.offRedis, st.at = true, now
		default:
			st.covered, st.forced, st.at = st.noted, false, now
		}
	}
	if err != nil {
		return fmt.Errorf("sale signaller: %w", err)
	}
	return nil
}
