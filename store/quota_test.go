package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSpreadQuotaNeverExceedsABucketOrTheQuota(t *testing.T) {
	for _, c := range []struct {
		quota  int64
		stocks []int64
		want   []int64
	}{
		{7, []int64{5, 4}, []int64{4, 3}},
		{300, []int64{6250, 6250, 6250, 6250}, []int64{75, 75, 75, 75}},
		{101, []int64{1, 1, 100}, []int64{1, 1, 99}},
		{10, []int64{3, 0, 2}, []int64{3, 0, 2}}, // more quota than stock: the stock
		{0, []int64{3, 3}, []int64{0, 0}},
		{-2, []int64{3, 3}, []int64{0, 0}},
		{5, []int64{1, 1, 1, 1, 1, 1, 1}, []int64{1, 1, 1, 1, 1, 0, 0}},
	} {
		got := spreadQuota(c.quota, c.stocks)
		assert.Equal(t, c.want, got, "quota %d over %v", c.quota, c.stocks)
		var sum int64
		for i := range got {
			assert.LessOrEqual(t, got[i], c.stocks[i])
			sum += got[i]
		}
		assert.LessOrEqual(t, sum, max(c.quota, 0))
	}
}
