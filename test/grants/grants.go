// Package grants keeps the record of the 202s a crowd of buyers got across
// a Redis failover, which the failover tests (test/cluster's and
// test/faults') judge: each user's tokens and first hold, the 202s of each
// phase of the failover and the users given one in it, when each phase
// began and the first 202 after it, the users whose holds the failover
// lost (Ledger); and Redis's copy of them on the nodes the failover moves
// between (Marks).
package grants

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Ledger is the record of a crowd's 202s across a failover, in phases
// numbered from 0 (the phase at New) in the order they come. It is safe
// for concurrent use.
type Ledger struct {
	names []string // each phase's name, for the logs

	mu      sync.Mutex
	phase   int
	given   []int                     // the crowd's 202s in each phase
	users   [][]int64                 // the users given them, in the order they came
	began   []time.Time               // when each phase began
	firstIn []time.Duration           // from each phase's beginning to its first 202; 0 if none yet
	tokens  map[int64]map[string]bool // every token each user got in a 202
	first   map[int64]Hold            // each user's first 202
	lost    []int64                   // users whose holds the failover lost
}

// Hold is a 202: its request_id and token.
type Hold struct{ Request, Token string }

// New starts a ledger at phase 0, with the names of the phases in order
// ("before the cut", "during the cut", ...).
func New(phases ...string) *Ledger {
	n := len(phases)
	l := &Ledger{names: phases, given: make([]int, n), users: make([][]int64, n), began: make([]time.Time, n),
		firstIn: make([]time.Duration, n), tokens: map[int64]map[string]bool{}, first: map[int64]Hold{}}
	l.began[0] = time.Now()
	return l
}

// Accepted records one of the crowd's 202s, counted in the phase it came
// in.
func (l *Ledger) Accepted(user int64, request, token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.noteLocked(user, request, token)
	p := l.phase
	l.given[p]++
	l.users[p] = append(l.users[p], user)
	if l.firstIn[p] == 0 {
		l.firstIn[p] = time.Since(l.began[p])
	}
}

// Note records a token a user got in a 202 outside the crowd (a returning
// holder's request): it counts in no phase.
func (l *Ledger) Note(user int64, request, token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.noteLocked(user, request, token)
}

func (l *Ledger) noteLocked(user int64, request, token string) {
	if l.tokens[user] == nil {
		l.tokens[user] = map[string]bool{}
		l.first[user] = Hold{request, token}
	}
	l.tokens[user][token] = true
}

// SetPhase begins phase p now.
func (l *Ledger) SetPhase(p int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = p
	l.began[p] = time.Now()
}

// Given is the number of the crowd's 202s in phase p.
func (l *Ledger) Given(p int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.given[p]
}

// UsersIn are the users given the crowd's 202s in the phases ps, in the
// order the 202s came, phase by phase.
func (l *Ledger) UsersIn(ps ...int) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for _, p := range ps {
		out = append(out, l.users[p]...)
	}
	return out
}

// Since is the time since phase p began.
func (l *Ledger) Since(p int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Since(l.began[p])
}

// Began is when phase p began (zero if it has not).
func (l *Ledger) Began(p int) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.began[p]
}

// FirstAfter is the time from phase p's beginning to the crowd's first 202
// in it; 0 if there has been none.
func (l *Ledger) FirstAfter(p int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.firstIn[p]
}

// Logger is where WaitGiven says what it waited in vain for (a
// *testing.T).
type Logger interface {
	Logf(format string, args ...any)
}

// WaitGiven waits until the crowd got n 202s in phase p; it reports
// whether it did within, and logs to log if it did not.
func (l *Ledger) WaitGiven(log Logger, p, n int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		got := l.Given(p)
		if got >= n {
			return true
		}
		if time.Now().After(deadline) {
			log.Logf("%d 202s %s within %s, not %d", got, l.names[p], within, n)
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Users are the users given a 202 so far, in order.
func (l *Ledger) Users() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.tokens))
}

// First is a user's first 202, and whether there has been one.
func (l *Ledger) First(user int64) (Hold, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.first[user]
	return h, ok
}

// FirstTokens are the tokens of each user's first 202.
func (l *Ledger) FirstTokens() map[int64]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int64]string, len(l.first))
	for u, h := range l.first {
		out[u] = h.Token
	}
	return out
}

// Tokens are every token given in a 202, with the user it was given to.
func (l *Ledger) Tokens() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int64{}
	for u, toks := range l.tokens {
		for tok := range toks {
			out[tok] = u
		}
	}
	return out
}

// Gave tells whether user got token in a 202.
func (l *Ledger) Gave(user int64, token string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tokens[user][token]
}

// Lose records users whose holds the failover lost (whose buyer marks the
// new master lacks).
func (l *Ledger) Lose(users []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lost = append(l.lost, users...)
}

// Lost are the users recorded lost, in the order Lose heard of them.
func (l *Ledger) Lost() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lost)
}

// Returning are the returning holders: the users lost with the users
// given the crowd's 202s in the phases ps, those of them whose first 202
// is known (else their client is still asking), sorted, each once.
func (l *Ledger) Returning(ps ...int) []int64 {
	all := append(l.Lost(), l.UsersIn(ps...)...)
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for _, u := range all {
		if _, ok := l.first[u]; ok {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Reporter is where OneTokenEach reports a user given two tokens (a
// *testing.T).
type Reporter interface {
	Errorf(format string, args ...any)
}

// OneTokenEach: no user got two different tokens in 202s; it reports each
// that did to r, in the users' order.
func (l *Ledger) OneTokenEach(r Reporter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range slices.Sorted(maps.Keys(l.tokens)) {
		if toks := l.tokens[u]; len(toks) > 1 {
			r.Errorf("user %d got %d tokens in 202s: %v", u, len(toks), slices.Sorted(maps.Keys(toks)))
		}
	}
}
