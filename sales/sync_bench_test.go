package sales_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/sales"
)

// BenchmarkSyncToken: the Redis step of a placed order (SyncToken repeated
// on pending orders: the same read, script and record check each time),
// against the same step made of the calls it is built from: the
// reservation and the sale read apart, then the advance script and the
// status script apart. cpu-ns/op is this process's CPU (the client's).
func BenchmarkSyncToken(b *testing.B) {
	const orders = 64
	f := mustFixture(b, orders)
	tokens := make([]string, orders)
	for i := range tokens {
		tokens[i] = f.redisHold(testenv.UniqueUser(), true)
		_, err := sales.SyncToken(f.ctx, f.st, f.client, tokens[i])
		require.NoError(b, err)
	}
	apart := func(tok string) error {
		res, err := f.st.GetReservation(f.ctx, tok)
		if err != nil {
			return err
		}
		if _, err := f.st.GetSale(f.ctx, res.SaleID); err != nil {
			return err
		}
		if _, err := f.client.Advance(f.ctx, res.SaleID, tok, domain.TokenOrdered, domain.TokenHeld); err != nil {
			return err
		}
		_, err = f.client.WriteStatus(f.ctx, res.SaleID, tok, sales.StatusRecordOf(res))
		return err
	}
	for _, bc := range []struct {
		name string
		sync func(tok string) error
	}{
		{"SyncToken", func(tok string) error { _, err := sales.SyncToken(f.ctx, f.st, f.client, tok); return err }},
		{"apart", apart},
	} {
		b.Run(bc.name, func(b *testing.B) {
			i := 0
			b.ReportAllocs()
			cpu0 := selfCPU(b)
			for b.Loop() {
				if err := bc.sync(tokens[i%orders]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(selfCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

func selfCPU(b *testing.B) time.Duration {
	cpu, err := proc.SelfCPU()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}
