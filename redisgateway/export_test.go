package redisgateway

// NewSoldOutForTest builds a sold-out picture with the given replay map
// (RequestField -> token), for benchmarks.
func NewSoldOutForTest(requests map[string]string) *SoldOut {
	return &SoldOut{Buyers: map[int64]struct{}{}, requests: requests}
}
