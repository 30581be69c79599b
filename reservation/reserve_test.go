package reservation

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/degraded"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// A unit the script took is promised once its hold is recorded: the 202's
// token is the request's derived token, the start is queued and the cache
// learns the stock the script saw.
func TestAHoldIsRecordedStartedAndPromised(t *testing.T) {
	r := newRig(t, answers(outcome(redisgateway.OutcomeOK)), nil, testSettings)
	cached := &fakeCached{onRedis: true}
	req := request(redisSale(), cached)

	ans, err := r.svc.Reserve(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, Answer{Token: r.token(req), Layer: LayerRedis, Reason: redisgateway.OutcomeOK}, ans)
	require.Len(t, r.ledger.holds, 1)
	require.Equal(t, domain.RedisHoldInput(ans.Token, req.SaleID, req.UserID, req.RequestID), r.ledger.holds[0])
	require.Equal(t, r.ledger.holds, r.starter.inputs())
	require.EqualValues(t, 7, cached.stockSeen)
	args := r.script.called()[0]
	require.Equal(t, req.Sale.ModeEpoch, args.Epoch)
	require.WithinDuration(t, time.Now().Add(testSettings.RedisTimeout+testSettings.ClockSkew), args.Deadline, 50*time.Millisecond,
		"the script takes nothing after the call's timeout and the clock skew")
}

// A hold the database did not record is not promised: 503, outcome
// unknown; the retry with the same request_id replays it.
func TestAHoldNotRecordedIsNotPromised(t *testing.T) {
	r := newRig(t, answers(outcome(redisgateway.OutcomeOK)), &fakeLedger{holdErr: errors.New("connection refused")}, testSettings)
	ans, err := r.svc.Reserve(t.Context(), request(redisSale(), &fakeCached{onRedis: true}))
	require.ErrorIs(t, err, domain.ErrOutcomeUnknown)
	require.Empty(t, ans.Token)
	require.Empty(t, r.ledger.holds)
}

// A unit Redis granted that the database refuses (Redis had lost writes:
// the user holds one already, or no unit is left) is answered as the
// database decides, never 202; the hold is started all the same, so its
// workflow releases it in Redis.
func TestTheDatabaseOverrulesAHoldRedisGranted(t *testing.T) {
	for _, want := range []*domain.Error{domain.ErrAlreadyHolds, domain.ErrSoldOut} {
		t.Run(want.Code, func(t *testing.T) {
			holder := &store.LiveHold{Token: "42-held-before", RequestID: "first-request"}
			ledger := &fakeLedger{decide: func(domain.OrderInput, int64) store.HoldRecord {
				rec := store.HoldRecord{Counted: true, Refused: want}
				if want == domain.ErrAlreadyHolds {
					rec.Holder = holder
				}
				return rec
			}}
			r := newRig(t, answers(outcome(redisgateway.OutcomeOK)), ledger, testSettings)
			ans, err := r.svc.Reserve(t.Context(), request(redisSale(), &fakeCached{onRedis: true}))
			require.ErrorIs(t, err, want)
			require.Equal(t, Answer{Layer: LayerRedis, Reason: "overruled"}, ans)
			require.Empty(t, r.ledger.holds, "nothing promised")
			require.Len(t, r.starter.inputs(), 1, "its workflow releases the Redis hold")
			if want == domain.ErrAlreadyHolds {
				require.Equal(t, "first-request", r.holds.requests[holder.Token],
					"the holder's replay key is put back: a repeat of their own request gets its token")
			}
		})
	}
}

// A request the script refuses for its user's buyer mark is a replay when
// the database has the request's reservation: Redis lost the hold's writes
// and a repair put the mark back without its replay key. It answers the
// first 202's token (its replay key put back); a request the database does
// not have is the user's new one, refused 409; a database that cannot tell
// leaves the outcome unknown.
func TestARefusedRequestTheDatabaseHasIsAReplay(t *testing.T) {
	for _, tc := range []struct {
		name   string
		row    func(token string) (*domain.Reservation, error)
		want   error
		reason string
	}{
		{name: "recorded", row: func(token string) (*domain.Reservation, error) {
			return &domain.Reservation{Token: token, SaleID: 42, UserID: 1001, Status: domain.StatusPendingPayment}, nil
		}, reason: redisgateway.OutcomeReplay},
		{name: "not recorded", want: domain.ErrAlreadyHolds, reason: redisgateway.OutcomeAlready},
		{name: "database down", row: func(string) (*domain.Reservation, error) { return nil, errors.New("connection refused") },
			want: domain.ErrOutcomeUnknown, reason: "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, answers(outcome(redisgateway.OutcomeAlready)), &fakeLedger{row: tc.row}, testSettings)
			req := request(redisSale(), &fakeCached{onRedis: true})
			ans, err := r.svc.Reserve(t.Context(), req)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, tc.reason, ans.Reason)
			require.Empty(t, r.starter.inputs(), "the script took nothing")
			if tc.want != nil {
				require.Empty(t, ans.Token)
				require.Empty(t, r.ledger.holds)
				require.Empty(t, r.holds.requests)
				return
			}
			require.Equal(t, r.token(req), ans.Token, "the first 202's token")
			require.Equal(t, []domain.OrderInput{domain.RedisHoldInput(ans.Token, req.SaleID, req.UserID, req.RequestID)}, r.ledger.holds,
				"answered as the database decided the hold")
			require.Equal(t, req.RequestID, r.holds.requests[ans.Token], "the replay key is put back")
		})
	}
}

// A hold whose number the database has seen (Redis went back in time) is
// decided by the database and marks the sale for a rebuild, once a second
// however many holds find it.
func TestAHoldFromARedisThatWentBackMarksTheSale(t *testing.T) {
	var seqs []int64
	ledger := &fakeLedger{decide: func(_ domain.OrderInput, seq int64) store.HoldRecord {
		seqs = append(seqs, seq)
		return store.HoldRecord{Counted: true, WentBack: true}
	}}
	script := answers(
		scriptAnswer{res: redisgateway.ReserveResult{Outcome: redisgateway.OutcomeOK, StockLeft: 7, Seq: 41}},
		scriptAnswer{res: redisgateway.ReserveResult{Outcome: redisgateway.OutcomeOK, StockLeft: 6, Seq: 42}})
	r := newRig(t, script, ledger, testSettings)
	for _, req := range []string{"went-back-01", "went-back-02"} {
		ans, err := r.svc.Reserve(t.Context(), newRequest(redisSale(), &fakeCached{onRedis: true}, req))
		require.NoError(t, err, "promised: the database decided")
		require.NotEmpty(t, ans.Token)
	}
	require.Equal(t, []int64{41, 42}, seqs, "the script's hold numbers reach the record")
	require.Equal(t, []int64{redisSale().ID}, ledger.wentBack, "marked once")
}

// Each script outcome has one answer, named in the metric by the outcome.
func TestScriptOutcomesAnswerTheirRefusals(t *testing.T) {
	for _, tc := range []struct {
		outcome string
		want    *domain.Error
	}{
		{redisgateway.OutcomeAlready, domain.ErrAlreadyHolds},
		{redisgateway.OutcomeSoldOut, domain.ErrSoldOut},
		{redisgateway.OutcomeNotStarted, domain.ErrSaleNotStarted},
		{redisgateway.OutcomeEnded, domain.ErrSaleEnded},
		{redisgateway.OutcomePaused, domain.ErrSalePaused},
		{redisgateway.OutcomeNotReady, domain.ErrSaleNotReady},
		{redisgateway.OutcomeLate, domain.ErrOutcomeUnknown},
		{"something new", domain.ErrOutcomeUnknown},
	} {
		t.Run(tc.outcome, func(t *testing.T) {
			r := newRig(t, answers(outcome(tc.outcome)), nil, testSettings)
			cached := &fakeCached{onRedis: true}
			ans, err := r.svc.Reserve(t.Context(), request(redisSale(), cached))
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, Answer{Layer: LayerRedis, Reason: tc.outcome}, ans)
			require.Equal(t, tc.outcome == redisgateway.OutcomeSoldOut, cached.soldOut, "only sold out loads the sold-out mark")
			require.Empty(t, r.ledger.holds)
			require.Empty(t, r.starter.inputs())
		})
	}
	require.Equal(t, 1, domain.ErrSaleNotReady.RetryAfter, "a 503 says when to retry")
}

// A replay the script knows answers the first request's token, promised
// again (recorded where the database path counts it), and starts nothing.
func TestAReplayAnswersTheFirstToken(t *testing.T) {
	r := newRig(t, answers(scriptAnswer{res: redisgateway.ReserveResult{Outcome: redisgateway.OutcomeReplay, Token: "first-token"}}), nil, testSettings)
	ans, err := r.svc.Reserve(t.Context(), request(redisSale(), &fakeCached{onRedis: true}))
	require.NoError(t, err)
	require.Equal(t, "first-token", ans.Token)
	require.Len(t, r.ledger.holds, 1)
	require.Empty(t, r.starter.inputs())
}

// trip opens the rig's breaker with failing script calls, each answered
// 503 (outcome unknown) on the Redis layer.
func (r *rig) trip(t *testing.T, cached Cached) {
	t.Helper()
	for i := range degraded.BreakerTrip {
		ans, err := r.svc.Reserve(t.Context(), newRequest(redisSale(), cached, fmt.Sprintf("trip-%08d", i)))
		require.ErrorIs(t, err, domain.ErrOutcomeUnknown)
		require.Equal(t, "error", ans.Reason)
	}
	require.Equal(t, gobreaker.StateOpen, r.guard.BreakerState())
}

// With the breaker open and the fleet still reaching Redis, this instance
// alone is cut off: it answers 503 without a call and never moves the
// sale (one instance never moves a sale for the fleet).
func TestAnOpenBreakerOnOneInstanceNeverMovesTheSale(t *testing.T) {
	r := newRig(t, answers(scriptAnswer{err: errors.New("connection refused")}), &fakeLedger{}, testSettings)
	cached := &fakeCached{onRedis: true}
	r.trip(t, cached)
	calls := len(r.script.called())

	ans, err := r.svc.Reserve(t.Context(), request(redisSale(), cached))
	require.ErrorIs(t, err, errCutOff)
	require.Equal(t, Answer{Layer: LayerRedis, Reason: "cut_off"}, ans)
	require.Len(t, r.script.called(), calls, "no call while the breaker is open")
	require.Empty(t, r.ledger.holdOffs, "the sale was not switched")
	require.Nil(t, cached.moved)
}

// With the breaker open and the fleet agreeing that Redis is down, the
// sale moves to the database path (after the hold-off that outlasts any
// Redis call in flight) and the reservation is taken there, with the
// same token a Redis retry would have.
func TestAnOpenBreakerWithTheFleetDownTakesTheDatabasePath(t *testing.T) {
	moved := &domain.Sale{ID: 42, Mode: domain.ModeDatabase, ModeEpoch: 4}
	ledger := &fakeLedger{reserve: reservedInDB, switched: func(int64) (*domain.Sale, error) { return moved, nil }}
	r := newRig(t, answers(scriptAnswer{err: errors.New("connection refused")}), ledger, testSettings)
	cached := &fakeCached{onRedis: true}
	r.trip(t, cached)
	r.down = true

	req := request(redisSale(), cached)
	ans, err := r.svc.Reserve(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, Answer{Token: r.token(req), Layer: LayerDatabase, Reason: "ok"}, ans)
	require.Equal(t, []time.Duration{degraded.ModeLag + testSettings.RedisTimeout + 2*testSettings.ClockSkew}, ledger.holdOffs)
	require.Same(t, moved, cached.moved, "the cache learns the move at once")
	in := domain.DatabasePathInput(ans.Token, req.SaleID, req.UserID, req.RequestID)
	require.Equal(t, []domain.OrderInput{in}, ledger.reserved)
	require.Equal(t, []domain.OrderInput{in}, r.starter.inputs())
}

// A sale that came back to Redis less than the minimum dwell ago stays on
// it: 503, nothing reserved in the database.
func TestASaleBackOnRedisTooRecentlyStaysThere(t *testing.T) {
	ledger := &fakeLedger{reserve: reservedInDB, switched: func(int64) (*domain.Sale, error) { return redisSale(), nil }}
	r := newRig(t, answers(scriptAnswer{err: errors.New("connection refused")}), ledger, testSettings)
	cached := &fakeCached{onRedis: true}
	r.trip(t, cached)
	r.down = true
	ans, err := r.svc.Reserve(t.Context(), request(redisSale(), cached))
	require.ErrorIs(t, err, errDwell)
	require.Equal(t, "dwell", ans.Reason)
	require.Empty(t, ledger.reserved)
	require.Nil(t, cached.moved)
}

// A sale switching back to Redis answers 503 at once, before any call.
func TestAResyncingSaleAnswers503(t *testing.T) {
	r := newRig(t, answers(outcome(redisgateway.OutcomeOK)), nil, testSettings)
	sale := &domain.Sale{ID: 42, Mode: domain.ModeResync}
	ans, err := r.svc.Reserve(t.Context(), request(sale, &fakeCached{}))
	require.ErrorIs(t, err, domain.ErrSaleResyncing)
	require.Equal(t, "resync", ans.Reason)
	require.Empty(t, r.script.called())
}

// The database path's answers, by the transaction's result.
func TestDatabasePathAnswers(t *testing.T) {
	sale := &domain.Sale{ID: 42, Mode: domain.ModeDatabase, ModeEpoch: 4}
	for _, tc := range []struct {
		name    string
		err     error
		want    error
		reason  string
		replay  bool
		started int
	}{
		{name: "new", reason: "ok", started: 1},
		{name: "replay", replay: true, reason: "replay"},
		{name: "already", err: domain.ErrAlreadyHolds, want: domain.ErrAlreadyHolds, reason: "already"},
		{name: "no stock", err: domain.ErrSoldOut, want: domain.ErrSoldOut, reason: "sold_out"},
		{name: "quota", err: fmt.Errorf("reserve: %w", store.ErrQuotaExhausted), want: store.ErrQuotaExhausted, reason: "sold_out"},
		{name: "paused", err: domain.ErrSalePaused, want: domain.ErrSalePaused, reason: domain.ESalePaused},
		{name: "hold-off", err: domain.ErrSaleMoving, want: domain.ErrSaleMoving, reason: "not_ready"},
		{name: "resync", err: domain.ErrSaleResyncing, want: domain.ErrSaleResyncing, reason: "not_ready"},
		{name: "broken", err: errors.New("deadlock"), want: domain.ErrOutcomeUnknown, reason: "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ledger := &fakeLedger{reserve: func(in domain.OrderInput) (*domain.Reservation, bool, error) {
				if tc.err != nil {
					return nil, false, tc.err
				}
				return &domain.Reservation{Token: in.Token}, tc.replay, nil
			}}
			r := newRig(t, answers(outcome(redisgateway.OutcomeOK)), ledger, testSettings)
			req := request(sale, &fakeCached{})
			ans, err := r.svc.Reserve(t.Context(), req)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, tc.reason, ans.Reason)
			require.Equal(t, LayerDatabase, ans.Layer)
			require.Len(t, r.starter.inputs(), tc.started)
			require.Empty(t, r.script.called(), "a sale in database mode never calls the script")
			if tc.want == nil {
				require.Equal(t, r.token(req), ans.Token, "the same token as on Redis")
			}
		})
	}
}

// The database path admits at most FallbackInFlight transactions at once
// (here above what its rate keeps in flight): the next is refused at once
// with 429 and a Retry-After, and spends no transaction.
func TestTheDatabasePathRefusesBeyondItsSlots(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	ledger := &fakeLedger{reserve: func(in domain.OrderInput) (*domain.Reservation, bool, error) {
		entered <- struct{}{}
		<-release
		return reservedInDB(in)
	}}
	dset := testDegraded
	dset.FallbackRPS, dset.FallbackInFlight = 0.5, 1 // a Retry-After of 2 s
	r := newRigOf(t, answers(outcome(redisgateway.OutcomeOK)), ledger, testSettings, dset)
	sale := &domain.Sale{ID: 42, Mode: domain.ModeDatabase}
	first := make(chan error, 1)
	go func() {
		_, err := r.svc.Reserve(context.Background(), newRequest(sale, &fakeCached{}, "first-0001"))
		first <- err
	}()
	<-entered
	require.Equal(t, 1, r.guard.InFlight())

	ans, err := r.svc.Reserve(t.Context(), newRequest(sale, &fakeCached{}, "second-001"))
	var e *domain.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, domain.ERateLimited, e.Code)
	require.Equal(t, 2, e.RetryAfter)
	require.Equal(t, "saturated", ans.Reason)
	close(release)
	require.NoError(t, <-first)
	require.Len(t, ledger.reserved, 1, "the refused request ran no transaction")
	require.Zero(t, r.guard.InFlight())
}

// A call that timed out while Redis kept answering the heartbeat was this
// process's stall: it is asked once more in the request (the script's
// replay key answers the first call's outcome), and the breaker does not
// count it.
func TestAClientStallIsAskedAgain(t *testing.T) {
	stall := scriptAnswer{err: fmt.Errorf("reserve: %w", context.DeadlineExceeded)}
	r := newRig(t, answers(stall, outcome(redisgateway.OutcomeOK)), nil, testSettings)
	r.watch(t)
	ans, err := r.svc.Reserve(t.Context(), request(redisSale(), &fakeCached{onRedis: true}))
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeOK, ans.Reason)
	calls := r.script.called()
	require.Len(t, calls, 2)
	require.Equal(t, calls[0].Token, calls[1].Token, "the same request: the replay key answers the first call")
	require.Equal(t, gobreaker.StateClosed, r.guard.BreakerState())
}

// After a stall, a sale this instance no longer sees on Redis at the same
// epoch is not asked again: 503, outcome unknown, counted as the client's
// stall (never as Redis's failure).
func TestAStallOnAMovedSaleIsNotAskedAgain(t *testing.T) {
	stall := scriptAnswer{err: fmt.Errorf("reserve: %w", context.DeadlineExceeded)}
	r := newRig(t, answers(stall), nil, testSettings)
	r.watch(t)
	for range 2 * degraded.BreakerTrip {
		ans, err := r.svc.Reserve(t.Context(), request(redisSale(), &fakeCached{onRedis: false}))
		require.ErrorIs(t, err, domain.ErrOutcomeUnknown)
		require.Equal(t, "client_stall", ans.Reason)
	}
	require.Len(t, r.script.called(), 2*degraded.BreakerTrip, "one call each")
	require.Equal(t, gobreaker.StateClosed, r.guard.BreakerState(), "a process's own stalls never open the breaker")
}

// A user with retired records (redisgateway.OutcomeAsk): a row in the database is
// this request's, so it is a replay, answered as the first time (a hold
// the database refused is refused again, never 202); without one the
// script runs again, told that the database has none.
func TestTheScriptsQuestionIsAnsweredFromTheDatabase(t *testing.T) {
	for reason, want := range map[string]*domain.Error{
		domain.FailReasonRefusedHolder: domain.ErrAlreadyHolds, domain.FailReasonRefusedSoldOut: domain.ErrSoldOut,
	} {
		t.Run(reason, func(t *testing.T) {
			ledger := &fakeLedger{row: func(token string) (*domain.Reservation, error) {
				return &domain.Reservation{Token: token, Status: domain.StatusFailed, FailReason: reason}, nil
			}}
			r := newRig(t, answers(outcome(redisgateway.OutcomeAsk)), ledger, testSettings)
			ans, err := r.svc.Reserve(t.Context(), request(redisSale(), &fakeCached{onRedis: true}))
			require.ErrorIs(t, err, want)
			require.Empty(t, ans.Token)
			require.Len(t, r.script.called(), 1)
		})
	}
	t.Run("row", func(t *testing.T) {
		ledger := &fakeLedger{row: func(token string) (*domain.Reservation, error) { return &domain.Reservation{Token: token}, nil }}
		r := newRig(t, answers(outcome(redisgateway.OutcomeAsk)), ledger, testSettings)
		req := request(redisSale(), &fakeCached{onRedis: true})
		ans, err := r.svc.Reserve(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, Answer{Token: r.token(req), Layer: LayerRedis, Reason: redisgateway.OutcomeReplay}, ans)
		require.Len(t, r.script.called(), 1)
	})
	t.Run("no row", func(t *testing.T) {
		r := newRig(t, answers(outcome(redisgateway.OutcomeAsk), outcome(redisgateway.OutcomeOK)), nil, testSettings)
		ans, err := r.svc.Reserve(t.Context(), request(redisSale(), &fakeCached{onRedis: true}))
		require.NoError(t, err)
		require.Equal(t, redisgateway.OutcomeOK, ans.Reason)
		calls := r.script.called()
		require.Len(t, calls, 2)
		assert.False(t, calls[0].NotInDatabase)
		assert.True(t, calls[1].NotInDatabase)
	})
	t.Run("asked twice", func(t *testing.T) {
		r := newRig(t, answers(outcome(redisgateway.OutcomeAsk)), nil, testSettings)
		_, err := r.svc.Reserve(t.Context(), request(redisSale(), &fakeCached{onRedis: true}))
		require.ErrorIs(t, err, domain.ErrOutcomeUnknown)
	})
}
