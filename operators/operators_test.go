package operators_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/operators"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/wire"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// A recorded write is listed back, newest first and of its sale only, as
// the store keeps it; its JSON is the store row's, field for field.
func TestRecordAndAudit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := testenv.MustStore(t)
	ops := operators.New(st, quiet)
	sale := testenv.MustSale(t, st, 1)
	done, stop := context.WithCancel(ctx)
	stop() // the write answered: the record is kept on its own deadline
	for _, action := range []string{"pause", "resume"} {
		require.NoError(t, ops.Record(done, wire.AdminWrite{Operator: "alice", Action: action, SaleID: &sale.ID,
			Summary: "POST /admin/v1/sales/x/" + action, Status: 200, RequestID: "req-" + action}))
	}
	got, err := ops.Audit(ctx, sale.ID, 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, []string{"resume", "pause"}, []string{got[0].Action, got[1].Action})
	require.Equal(t, "alice", got[0].Operator)
	require.Equal(t, sale.ID, *got[0].SaleID)
	require.Equal(t, "req-resume", got[0].RequestID)
	require.WithinDuration(t, time.Now(), got[0].At, time.Minute)

	rows, err := st.AdminAudit(ctx, sale.ID, 10)
	require.NoError(t, err)
	requireSameJSON(t, rows, got)

	one, err := ops.Audit(ctx, sale.ID, 1)
	require.NoError(t, err)
	require.Len(t, one, 1)
	require.Equal(t, got[0].ID, one[0].ID)
}

// Refunds lists a sale's refunds as the store keeps them, in the same
// JSON; none is an empty list, not null.
func TestRefunds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := testenv.MustStore(t)
	ops := operators.New(st, quiet)
	sale := testenv.MustSale(t, st, 1)

	none, err := ops.Refunds(ctx, sale.ID, 10)
	require.NoError(t, err)
	body, err := json.Marshal(wire.RefundList{Refunds: none})
	require.NoError(t, err)
	require.JSONEq(t, `{"refunds":[]}`, string(body))

	token := domain.DeriveToken([]byte("operators-test-key"), sale.ID, testenv.UniqueUser(), "r-1")
	_, err = st.RecordRefund(ctx, store.Refund{Token: token, SaleID: sale.ID, UserID: 7, PaymentRef: "pay-1", AmountCents: 1999,
		Reason: "late payment"})
	require.NoError(t, err)
	got, err := ops.Refunds(ctx, sale.ID, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, token, got[0].Token)
	require.Equal(t, int64(1999), got[0].AmountCents)
	rows, err := st.ListRefunds(ctx, sale.ID, 10)
	require.NoError(t, err)
	requireSameJSON(t, rows, got)
}

// With the database gone the reads are 503 unavailable and a record
// fails with its cause.
func TestDatabaseDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testenv.MustStore(t) // the package's database exists
	st, err := store.Open(ctx, testenv.MySQLDSN())
	require.NoError(t, err)
	require.NoError(t, st.Close())
	ops := operators.New(st, quiet)

	_, err = ops.Audit(ctx, 0, 10)
	require.Equal(t, domain.EUnavailable, domain.ErrorCode(err), "%v", err)
	_, err = ops.Refunds(ctx, 0, 10)
	require.Equal(t, domain.EUnavailable, domain.ErrorCode(err), "%v", err)
	err = ops.Record(ctx, wire.AdminWrite{Operator: "alice", Action: "pause", Status: 200})
	require.ErrorContains(t, err, "record admin write")
}

func requireSameJSON(t *testing.T, want, got any) {
	t.Helper()
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g))
}
