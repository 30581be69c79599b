package store_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

func TestCheckServerVersion(t *testing.T) {
	for v, d := range map[string]store.Dialect{
		"10.6.0-MariaDB": store.MariaDB, "10.11.6-MariaDB-0+deb12u1": store.MariaDB, "11.4.2-MariaDB-log": store.MariaDB,
		"5.5.5-10.6.16-MariaDB": store.MariaDB, "10.6.5-MariaDB-1:10.6.5+maria~focal": store.MariaDB,
		"8.0.23": store.MySQL8, "8.0.36-log": store.MySQL8, "8.0.35-27": store.MySQL8, "8.4.0-commercial": store.MySQL8,
	} {
		got, err := store.ParseServerVersion(v)
		require.NoError(t, err, v)
		assert.Equal(t, d, got, v)
	}
	for _, v := range []string{"8.0.22", "9.1.0", "10.5.23-MariaDB", "10.4.1-MariaDB-log", "5.7.44-log", "", "MariaDB", "x.y-MariaDB", "8.0"} {
		err := store.CheckServerVersion(v)
		require.ErrorIs(t, err, store.ErrUnsupportedServer, v)
		assert.Contains(t, err.Error(), store.MinServer, v)
		assert.Contains(t, err.Error(), `"`+v+`"`, v)
	}
}

// The real server answers a version Open accepts: the test database is the
// supported kind.
func TestServerVersionReadAndAccepted(t *testing.T) {
	st := testenv.MustStore(t)
	v, err := st.ServerVersion(ctx(t))
	require.NoError(t, err)
	d, err := store.ParseServerVersion(v)
	require.NoError(t, err)
	require.Equal(t, d, st.Dialect(), "the store's dialect is its server's")
}
