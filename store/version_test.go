package store_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

func TestCheckServerVersion(t *testing.T) {
	for _, v := range []string{"10.6.0-MariaDB", "10.11.6-MariaDB-0+deb12u1", "11.4.2-MariaDB-log", "5.5.5-10.6.16-MariaDB", "10.6.5-MariaDB-1:10.6.5+maria~focal"} {
		assert.NoError(t, store.CheckServerVersion(v), v)
	}
	for _, v := range []string{"8.0.35", "8.4.0-commercial", "10.5.23-MariaDB", "10.4.1-MariaDB-log", "5.7.44-log", "", "MariaDB", "x.y-MariaDB"} {
		err := store.CheckServerVersion(v)
		require.ErrorIs(t, err, store.ErrUnsupportedServer, v)
		assert.Contains(t, err.Error(), "MariaDB 10.6", v)
		assert.Contains(t, err.Error(), `"`+v+`"`, v)
	}
}

// The real server answers a version Open accepts: the test database is the
// supported kind.
func TestServerVersionReadAndAccepted(t *testing.T) {
	st := testenv.MustStore(t)
	v, err := st.ServerVersion(ctx(t))
	require.NoError(t, err)
	require.NoError(t, store.CheckServerVersion(v))
}
