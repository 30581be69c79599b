package bench

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSummaryPercentiles(t *testing.T) {
	r := newRecorder()
	for i := 1; i <= 1000; i++ {
		r.record(time.Duration(i)*time.Millisecond, 202, nil)
	}
	r.record(time.Millisecond, 0, io.EOF)
	res := summarise("x", "closed", 1, 2*time.Second, []*recorder{r})
	require.EqualValues(t, 1001, res.Requests)
	require.EqualValues(t, 1, res.Errors)
	require.EqualValues(t, 1000, res.Count(202))
	require.InDelta(t, 500, res.P50MS, 2)
	require.InDelta(t, 990, res.P99MS, 2)
	require.InDelta(t, 999, res.P999MS, 2)
	require.InDelta(t, 500.5, res.RPS, 0.01)
}

func TestDSNVia(t *testing.T) {
	dsn, err := DSNVia("root@tcp(127.0.0.1:13306)/seckill_test?parseTime=true", "127.0.0.1:4000")
	require.NoError(t, err)
	addr, err := parseDSN(dsn)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:4000", addr)
}
