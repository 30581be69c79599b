package ops

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// A database-path order is PENDING_PAYMENT, and shown so, from its
// transaction on, before its workflow has read it. A payment sent in that
// moment settles PAID instead of 409 not_payable (the chaos run, seed 1,
// found payments refused 5 s before pay_by and the orders expiring). Here
// the moment is held open: no worker runs until the payment is on its way,
// so the workflow meets the payment while it still says QUEUED.
func TestDatabasePathOrderIsPayableAtOnce(t *testing.T) {
	queue := newQueue("dbpay")
	env := testenv.ProcEnv(t, queue, map[string]string{
		"SECKILL_PER_ADDR_RPS": "100000", "SECKILL_PER_ADDR_BURST": "100000",
	})
	s := &stack{queue: queue}
	s.api = testenv.MustAPI(t, "api", env)
	sale := s.MustLiveSale(t, 3, 300, 30*time.Minute)

	st := testenv.MustStore(t)
	require.NoError(t, st.RecordRedisStock(testCtx(t, 10*time.Second), sale, 3, time.Now()))
	_, err := st.SwitchToDatabase(testCtx(t, 10*time.Second), sale, 0)
	require.NoError(t, err)

	// The API's sale cache learns the switch within a second or so.
	mode := fmt.Sprintf("seckill_sale_database_mode{sale=\"%d\"} 1", sale)
	require.Eventually(t, func() bool {
		resp, err := http.Get(s.api.URL + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return err == nil && strings.Contains(string(b), mode)
	}, 30*time.Second, 100*time.Millisecond, "the API never saw the sale in database mode")

	user := testenv.UniqueUser()
	var token string
	require.EventuallyWithT(t, func(c *assert.CollectT) { // 503 until the hold-off passes
		code, body := s.reserve(t, sale, user, fmt.Sprintf("dbpay-%d", user))
		if assert.Equal(c, http.StatusAccepted, code, "%v", body) {
			token = body["token"].(string)
		}
	}, 30*time.Second, 200*time.Millisecond)
	code, view := call(t, "GET", s.api.URL+"/api/v1/reservations/"+token, user, nil)
	require.Equal(t, http.StatusOK, code, "%v", view)
	require.Equal(t, "PENDING_PAYMENT", view["status"], "the database path placed the order in its transaction")

	type answer struct {
		code int
		body map[string]any
	}
	paid := make(chan answer, 1)
	go func() {
		code, body := call(t, "POST", s.api.URL+"/api/v1/reservations/"+token+"/payment", user, map[string]any{"payment_ref": "dbpay-ref"})
		paid <- answer{code, body}
	}()
	time.Sleep(time.Second) // the update waits for a worker
	s.worker = testenv.MustWorker(t, "worker", env)
	got := <-paid
	require.Equal(t, http.StatusOK, got.code, "%v", got.body)
	require.Equal(t, "PAID", got.body["status"], "%v", got.body)
	s.waitStatus(t, user, token, "PAID")
}
