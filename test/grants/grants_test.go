package grants_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/test/grants"
)

// The phases of a failover, as a test names them.
const (
	before = iota
	during
	after
)

// recorder keeps what the ledger logs and reports.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) Logf(format string, args ...any) { r.add(format, args...) }

func (r *recorder) Errorf(format string, args ...any) { r.add(format, args...) }

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

// TestLedgerKeepsTheCrowds202s: 202s counted by phase, each user's first
// hold kept, the returning holders found, two tokens for a user reported.
func TestLedgerKeepsTheCrowds202s(t *testing.T) {
	l := grants.New("before the cut", "during the cut", "after the take-over")
	l.Accepted(1, "crowd-1", "t1")
	l.Accepted(2, "crowd-2", "t2")
	l.SetPhase(during)
	l.Accepted(3, "crowd-3", "t3")
	l.Accepted(4, "crowd-4", "t4")
	l.SetPhase(after)
	time.Sleep(5 * time.Millisecond)
	l.Accepted(5, "crowd-5", "t5")
	// Returning holders' answers count in no phase; a second token is kept.
	l.Note(3, "crowd-3", "t3")
	l.Note(4, "again-4", "t4-bis")

	assert.Equal(t, []int{2, 2, 1}, []int{l.Given(before), l.Given(during), l.Given(after)})
	assert.Equal(t, []int64{3, 4}, l.UsersIn(during))
	assert.Equal(t, []int64{1, 2, 5}, l.UsersIn(before, after))
	assert.Equal(t, []int64{1, 2, 3, 4, 5}, l.Users())
	first, ok := l.First(4)
	require.True(t, ok)
	assert.Equal(t, grants.Hold{Request: "crowd-4", Token: "t4"}, first)
	_, ok = l.First(9)
	assert.False(t, ok)
	assert.Equal(t, map[int64]string{1: "t1", 2: "t2", 3: "t3", 4: "t4", 5: "t5"}, l.FirstTokens())
	assert.Equal(t, map[string]int64{"t1": 1, "t2": 2, "t3": 3, "t4": 4, "t4-bis": 4, "t5": 5}, l.Tokens())
	assert.True(t, l.Gave(4, "t4-bis"))
	assert.False(t, l.Gave(5, "t4"))

	// User 9 was lost but its first 202 is not known: left out.
	l.Lose([]int64{4, 9})
	l.Lose([]int64{1})
	assert.Equal(t, []int64{4, 9, 1}, l.Lost())
	assert.Equal(t, []int64{1, 3, 4}, l.Returning(during))

	assert.GreaterOrEqual(t, l.FirstAfter(after), 5*time.Millisecond)
	assert.LessOrEqual(t, l.FirstAfter(after), l.Since(after))
	assert.False(t, l.Began(after).Before(l.Began(during)))
	assert.Zero(t, grants.New("only").FirstAfter(0), "no 202 yet")

	var r recorder
	l.OneTokenEach(&r)
	assert.Equal(t, []string{"user 4 got 2 tokens in 202s: [t4 t4-bis]"}, r.lines)
}

// TestLedgerWaitGiven: WaitGiven sees 202s that come while it waits, and
// says what it waited in vain for.
func TestLedgerWaitGiven(t *testing.T) {
	l := grants.New("before the cut", "during the cut")
	var r recorder
	go func() {
		for u := range int64(3) {
			time.Sleep(10 * time.Millisecond)
			l.Accepted(u, fmt.Sprintf("crowd-%d", u), fmt.Sprintf("t%d", u))
		}
	}()
	assert.True(t, l.WaitGiven(&r, before, 3, 5*time.Second))
	assert.False(t, l.WaitGiven(&r, during, 1, 50*time.Millisecond))
	assert.Equal(t, []string{"0 202s during the cut within 50ms, not 1"}, r.lines)
}

// TestMarksLost: the users whose buyer marks one node has and the other
// lacks.
func TestMarksLost(t *testing.T) {
	master := grants.Marks{Buyers: map[string]struct{}{"7": {}, "3": {}, "5": {}}, Reserved: 3}
	replica := grants.Marks{Buyers: map[string]struct{}{"5": {}}, Reserved: 1}
	lost, err := master.Lost(replica)
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 7}, lost)
	lost, err = replica.Lost(master)
	require.NoError(t, err)
	assert.Empty(t, lost)
	_, err = grants.Marks{Buyers: map[string]struct{}{"x": {}}}.Lost(replica)
	assert.Error(t, err, "a buyer mark that is no user")
}
