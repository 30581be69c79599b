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
	c.apply(map[int64]*domain.Sale{7: paused}, readAt, nil, nil, false)
	e, err := c.Get(t.Context(), 7)
	require.NoError(t, err)
	require.Equal(t, domain.ControlActive, e.Sale().Control, "the older read replaced the resume")

	// A read that began after the write is newer and wins.
	c.apply(map[int64]*domain.Sale{7: paused}, time.Now(), nil, nil, false)
	require.Equal(t, domain.ControlPaused, e.Sale().Control)
}
