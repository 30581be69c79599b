package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// A unit its holder cancels goes to the longest-waiting user through the
// whole pipeline: their reservation appears in me/reservations, its order
// workflow takes it to PENDING_PAYMENT and it is paid; the other waiter
// keeps waiting, an open reservation finds the sale sold out, and
// reconciliation is clean.
func TestWaitlistThroughRealProcesses(t *testing.T) {
	env := testenv.ProcEnv(t, "waitlist-"+strconv.FormatInt(time.Now().UnixNano(), 10), nil)
	proc := testenv.MustAPI(t, "api", env)
	testenv.MustWorker(t, "worker", env)

	saleID := mustLiveSale(t, proc.URL, "waitlist", 700, 1, 900)
	held, holder := reserveAndWait(t, proc.URL, saleID, "PENDING_PAYMENT")
	waitlist := fmt.Sprintf("%s/api/v1/sales/%d/waitlist", proc.URL, saleID)
	first, second := testenv.UniqueUser(), testenv.UniqueUser()
	for i, u := range []int64{first, second} {
		code, body := call(t, "POST", waitlist, u, nil)
		require.Equal(t, http.StatusOK, code, "%v", body)
		require.EqualValues(t, i+1, body["position"])
	}
	code, body := call(t, "POST", proc.URL+"/api/v1/reservations/"+held+"/cancel", holder, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)

	var token string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := call(t, "GET", fmt.Sprintf("%s/api/v1/me/reservations?sale_id=%d", proc.URL, saleID), first, nil)
		if !assert.Equal(c, http.StatusOK, code) {
			return
		}
		list, _ := body["reservations"].([]any)
		if assert.Len(c, list, 1, "%v", body) {
			r := list[0].(map[string]any)
			token, _ = r["token"].(string)
			assert.Equal(c, "PENDING_PAYMENT", r["status"])
		}
	}, time.Minute, 300*time.Millisecond)
	code, body = call(t, "POST", proc.URL+"/api/v1/reservations/"+token+"/payment", first, map[string]any{"payment_ref": "waitlist-pay-1"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "PAID", body["status"])

	code, body = call(t, "GET", waitlist, second, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.EqualValues(t, 1, body["position"], "next in line")
	code, body = call(t, "POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", proc.URL, saleID), testenv.UniqueUser(), map[string]any{"request_id": "waitlist-open-1"})
	require.Equal(t, http.StatusGone, code, "%v", body)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := call(t, "GET", fmt.Sprintf("%s/admin/v1/sales/%d/reconciliation", proc.URL, saleID), -1, nil)
		if assert.Equal(c, http.StatusOK, code, "%v", body) {
			assert.Equal(c, true, body["consistent"], "%v", body)
			assert.EqualValues(c, 1, body["waitlist_handovers"], "%v", body)
		}
	}, 30*time.Second, time.Second)
}
