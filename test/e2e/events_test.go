package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/test/testsale"
)

// sseEvent is one event of a reservation's event stream.
type sseEvent struct {
	ID   string
	Name string
	View map[string]any
}

// openEvents opens the reservation's event stream as user; events arrive
// on the channel, which closes when the server ends the stream.
func openEvents(t *testing.T, base, token string, user int64, lastEventID string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/reservations/"+token+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testenv.MustToken(t, user))
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	out := make(chan sseEvent, 16)
	if resp.StatusCode != http.StatusOK {
		close(out)
		return out, resp
	}
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Name != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.Name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.View)
			}
		}
	}()
	return out, resp
}

func nextEvent(t *testing.T, events <-chan sseEvent, within time.Duration) (sseEvent, bool) {
	t.Helper()
	select {
	case ev, ok := <-events:
		return ev, ok
	case <-time.After(within):
		t.Fatalf("no event or end of stream within %s", within)
		return sseEvent{}, false
	}
}

// apiDBUser is the MariaDB account of this test's API processes, so that
// their SELECTs are counted apart from everything else on the shared
// server (other packages' tests run at the same time).
const apiDBUser = "seckill_events_api"

// mustAPIAccount creates apiDBUser with the test database's privileges,
// turns MariaDB's per-user statistics on and returns the DSN to use.
func mustAPIAccount(t *testing.T, db *sql.DB) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	require.NoError(t, err)
	for _, q := range []string{
		"CREATE USER IF NOT EXISTS '" + apiDBUser + "'@'%'",
		"GRANT ALL PRIVILEGES ON `" + cfg.DBName + "`.* TO '" + apiDBUser + "'@'%'",
		"SET GLOBAL userstat = 1",
	} {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	cfg.User, cfg.Passwd = apiDBUser, ""
	return cfg.FormatDSN()
}

// apiSelects is the number of SELECT statements apiDBUser has run
// (MariaDB's Com_select of that account).
func apiSelects(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var n int64
	err := db.QueryRow("SELECT SELECT_COMMANDS FROM information_schema.USER_STATISTICS WHERE USER = ?", apiDBUser).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0
	}
	require.NoError(t, err)
	return n
}

// TestStatusReadsAndEventsAcrossInstances: two API instances on one Redis
// and one worker. Polls of pending reservations (status reads and the
// sale's me/reservations list) cost MariaDB no SELECT (counted for the
// APIs' own MariaDB account, against an idle window of the same length:
// the sale caches' refreshes); a read or list after a 200 from pay or
// cancel, on the other instance, shows the new status; an event stream held by one instance gets the
// change made through the other at once (pub/sub), ends after the terminal
// status, and resumes with Last-Event-ID.
func TestStatusReadsAndEventsAcrossInstances(t *testing.T) {
	f := startEventsFixture(t)
	t.Run("polls_skip_the_database", func(t *testing.T) { testPollsSkipTheDatabase(t, f) })
	t.Run("pushed_across_instances", func(t *testing.T) { testPushedAcrossInstances(t, f) })
	t.Run("cancel_read_on_other_instance", func(t *testing.T) { testCancelReadOnOtherInstance(t, f) })
	t.Run("errors_before_the_stream", func(t *testing.T) {
		_, resp := openEvents(t, f.a.URL, f.tokens[2], f.users[3], "")
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "another user's reservation")
		req, err := http.NewRequest("GET", f.a.URL+"/api/v1/reservations/"+f.tokens[2]+"/events", nil)
		require.NoError(t, err)
		resp, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	})
}

// eventsFixture is two APIs and a worker, and six users' PENDING_PAYMENT
// reservations of one sale.
type eventsFixture struct {
	db     *sql.DB
	a, b   *testenv.API
	saleID int64
	users  []int64
	tokens []string
}

func startEventsFixture(t *testing.T) *eventsFixture {
	db, err := sql.Open("mysql", testenv.MySQLDSN())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	env := testenv.ProcEnv(t, "e2e-events-"+fmt.Sprint(time.Now().UnixNano()), map[string]string{"SECKILL_READ_PER_USER_RPS": "0"})
	testenv.MustWorker(t, "worker", env)
	apiEnv := maps.Clone(env)
	apiEnv["MYSQL_DSN"] = mustAPIAccount(t, db)
	a := testenv.MustAPI(t, "api-a", apiEnv)
	b := testenv.MustAPI(t, "api-b", apiEnv)
	// A sale made and warmed directly, without its SaleWorkflow, whose
	// minute reconciliation would add a burst of SELECTs to the count.
	sale := testenv.MustSale(t, testenv.MustStore(t), 8)
	testsale.MustWarm(t, testenv.MustStore(t), testenv.MustRedis(t), sale)
	saleID := sale.ID

	const n = 6
	users, tokens := make([]int64, n), make([]string, n)
	for i := range users {
		users[i] = testenv.UniqueUser()
		code, body := call(t, "POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", a.URL, saleID), users[i], map[string]any{"request_id": "events-request-1"})
		require.Equal(t, http.StatusAccepted, code, "%v", body)
		tokens[i] = body["token"].(string)
	}
	for i := range users {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			code, body := call(t, "GET", b.URL+"/api/v1/reservations/"+tokens[i], users[i], nil)
			assert.Equal(c, http.StatusOK, code)
			assert.Equal(c, "PENDING_PAYMENT", body["status"])
		}, time.Minute, 100*time.Millisecond)
	}
	return &eventsFixture{db: db, a: a, b: b, saleID: saleID, users: users, tokens: tokens}
}

// poll polls the reservations and the sale's list through both APIs from
// 8 goroutines for d, requiring each answer be the PENDING_PAYMENT view,
// and returns how many polls it made.
func (f *eventsFixture) poll(t *testing.T, d time.Duration) int64 {
	var polls atomic.Int64
	var bad atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := g; time.Now().Before(stop); i++ {
				base := f.a.URL
				if i%2 == 1 {
					base = f.b.URL
				}
				k := i % len(f.users)
				if i%4 == 3 { // the list of the sale, served the same way
					code, body, err := testenv.Do("GET", fmt.Sprintf("%s/api/v1/me/reservations?sale_id=%d", base, f.saleID), f.users[k], nil)
					list, _ := body["reservations"].([]any)
					if err != nil || code != http.StatusOK || len(list) != 1 || list[0].(map[string]any)["status"] != "PENDING_PAYMENT" {
						bad.Add(1)
					}
					polls.Add(1)
					continue
				}
				code, body, err := testenv.Do("GET", base+"/api/v1/reservations/"+f.tokens[k], f.users[k], nil)
				if err != nil || code != http.StatusOK || body["status"] != "PENDING_PAYMENT" || body["order_no"] == nil || body["pay_by"] == nil {
					bad.Add(1)
				}
				polls.Add(1)
			}
		})
	}
	wg.Wait()
	require.Zero(t, bad.Load(), "polls not answered 200 PENDING_PAYMENT with order_no and pay_by")
	return polls.Load()

}

func testPollsSkipTheDatabase(t *testing.T, f *eventsFixture) {
	const window = 3 * time.Second
	// The APIs' own background SELECTs (their sale caches) over an
	// idle window of the same length, then the same window polled.
	idle0 := apiSelects(t, f.db)
	time.Sleep(window)
	idle := apiSelects(t, f.db) - idle0
	busy0 := apiSelects(t, f.db)
	polls := f.poll(t, window)
	busy := apiSelects(t, f.db) - busy0
	t.Logf("%d polls: %d SELECTs (idle window: %d)", polls, busy, idle)
	require.Greater(t, polls, int64(1000), "too few polls to judge")
	require.LessOrEqual(t, busy-idle, polls/1000, "SELECTs caused by polls")
	// Most status polls were answered from the instances' caches of
	// live views, which the reads after pay and cancel below then
	// must not be fooled by.
	const fromCache = `seckill_status_reads_total{source="live_cache"}`
	cached := int64(metric(t, f.a.URL, fromCache) + metric(t, f.b.URL, fromCache))
	t.Logf("%d status reads answered from the instances' caches", cached)
	require.Greater(t, cached, polls/10, "status reads answered from the cache")
}

func testPushedAcrossInstances(t *testing.T, f *eventsFixture) {
	events, resp := openEvents(t, f.b.URL, f.tokens[0], f.users[0], "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	ev, ok := nextEvent(t, events, 5*time.Second)
	require.True(t, ok)
	require.Equal(t, "2", ev.ID)
	require.Equal(t, "status", ev.Name)
	require.Equal(t, "PENDING_PAYMENT", ev.View["status"])

	code, body := call(t, "POST", f.a.URL+"/api/v1/reservations/"+f.tokens[0]+"/payment", f.users[0], map[string]any{"payment_ref": "ev-pay-0"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	paidAt := time.Now()
	code, body = call(t, "GET", f.b.URL+"/api/v1/reservations/"+f.tokens[0], f.users[0], nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "PAID", body["status"], "a read after the 200 of pay, on the other instance")
	require.Equal(t, "PAID", onlyListed(t, f.b.URL, f.saleID, f.users[0])["status"], "the list after the 200 of pay, on the other instance")

	// Within 4 s, under the stream's periodic re-read (30 s): the
	// wake-up came through Redis pub/sub.
	ev, ok = nextEvent(t, events, 4*time.Second)
	require.True(t, ok)
	require.Less(t, time.Since(paidAt), 4*time.Second)
	require.Equal(t, "3", ev.ID)
	require.Equal(t, "PAID", ev.View["status"])
	require.Equal(t, body["order_no"], ev.View["order_no"])
	_, ok = nextEvent(t, events, 5*time.Second)
	require.False(t, ok, "the stream ends after a terminal status")

	// Resume: the client saw id 2, so it gets the current view; having
	// seen the terminal one, the stream just ends.
	events, _ = openEvents(t, f.a.URL, f.tokens[0], f.users[0], "2")
	ev, ok = nextEvent(t, events, 5*time.Second)
	require.True(t, ok)
	require.Equal(t, "3", ev.ID)
	_, ok = nextEvent(t, events, 5*time.Second)
	require.False(t, ok)
	events, _ = openEvents(t, f.a.URL, f.tokens[0], f.users[0], "3")
	_, ok = nextEvent(t, events, 5*time.Second)
	require.False(t, ok, "nothing changed since id 3")
}

func testCancelReadOnOtherInstance(t *testing.T, f *eventsFixture) {
	events, _ := openEvents(t, f.a.URL, f.tokens[1], f.users[1], "2")
	code, body := call(t, "POST", f.b.URL+"/api/v1/reservations/"+f.tokens[1]+"/cancel", f.users[1], nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	code, body = call(t, "GET", f.a.URL+"/api/v1/reservations/"+f.tokens[1], f.users[1], nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "CANCELLED", body["status"], "a read after the 200 of cancel, on the other instance")
	require.Equal(t, "CANCELLED", onlyListed(t, f.a.URL, f.saleID, f.users[1])["status"], "the list after the 200 of cancel, on the other instance")
	ev, ok := nextEvent(t, events, 4*time.Second)
	require.True(t, ok)
	require.Equal(t, "3", ev.ID)
	require.Equal(t, "CANCELLED", ev.View["status"])
}

// onlyListed is the one reservation GET me/reservations?sale_id= lists.
func onlyListed(t *testing.T, base string, saleID, user int64) map[string]any {
	t.Helper()
	code, body := call(t, "GET", fmt.Sprintf("%s/api/v1/me/reservations?sale_id=%d", base, saleID), user, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	list, _ := body["reservations"].([]any)
	require.Len(t, list, 1, "%v", body)
	return list[0].(map[string]any)
}
