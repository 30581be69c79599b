package salecache

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
)

// A refresh that read the sales before this instance changed one (an
// operator's resume right after a pause) must not put the old picture
// back: the runbook's "resume restores at once" once answered 403 paused.
func TestARefreshOlderThanALocalWriteKeepsTheWrite(t *testing.T) {
	c := New(nil, nil, time.Second, slog.New(slog.DiscardHandler))
	paused := &domain.Sale{ID: 7, Control: domain.ControlPaused}
	active := &domain.Sale{ID: 7, Control: domain.ControlActive}
	c.Put(paused)

	readAt := time.Now() // the refresh reads the paused sale...
	time.Sleep(time.Millisecond)
	c.Put(active) // ...the operator resumes...
	c.apply(map[int64]*domain.Sale{7: paused}, true, readAt, nil, nil, false)
	e, err := c.Get(t.Context(), 7)
	require.NoError(t, err)
	require.Equal(t, domain.ControlActive, e.Sale().Control, "the older read replaced the resume")

	// A read that began after the write is newer and wins.
	c.apply(map[int64]*domain.Sale{7: paused}, true, time.Now(), nil, nil, false)
	require.Equal(t, domain.ControlPaused, e.Sale().Control)
}

// A blacklist refresh whose read began before an operator's change on this
// instance must not undo it: a user blacklisted (or let back) here is
// answered so at once, not after the next refresh.
func TestABlacklistReadOlderThanALocalChangeKeepsTheChange(t *testing.T) {
	c := New(nil, nil, time.Second, slog.New(slog.DiscardHandler))
	began := time.Now() // the refresher's read begins...
	time.Sleep(time.Millisecond)
	c.SetBlacklisted(7, true) // ...an operator blacklists 7, and lets 8 back...
	c.SetBlacklisted(8, false)
	c.storeBlacklist([]int64{8}, began) // ...the read returns what it saw before
	require.True(t, c.Blacklisted(7), "the older read undid the blacklisting")
	require.False(t, c.Blacklisted(8), "the older read undid the removal")

	// A read that began after the changes is the database's word.
	c.storeBlacklist([]int64{8, 9}, time.Now())
	require.False(t, c.Blacklisted(7))
	require.True(t, c.Blacklisted(8))
	require.True(t, c.Blacklisted(9))
	require.Empty(t, c.local, "changes a newer read saw are dropped")
}

// A refresh that stores only the sales due (the directory's picture
// unchanged) keeps the other entries; one that stores every open sale
// drops the entries of sales no longer open.
func TestOnlyAWholeRefreshDropsEntries(t *testing.T) {
	c := New(nil, nil, time.Second, slog.New(slog.DiscardHandler))
	for id := int64(1); id <= 3; id++ {
		c.Put(&domain.Sale{ID: id})
	}
	time.Sleep(time.Millisecond)
	due := map[int64]*domain.Sale{2: {ID: 2, Control: domain.ControlPaused}}
	c.apply(due, false, time.Now(), nil, nil, false)
	require.Equal(t, 3, c.Len(), "the sales not due are kept")
	require.Equal(t, domain.ControlPaused, c.Cached(2).Sale().Control, "the sale due is stored")

	c.apply(due, true, time.Now(), nil, nil, false)
	require.Equal(t, 1, c.Len(), "the sales no longer open are dropped")
	require.NotNil(t, c.Cached(2))
}
