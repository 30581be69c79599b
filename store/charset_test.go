package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// A sale's title and an appeal's message keep any text, even in a database
// whose default character set is latin1 (MariaDB's own default, and many
// managed servers'), where the columns would otherwise refuse it.
func TestUserTextIsUTF8MB4OnALatin1Database(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, testenv.MustEmptyDatabase(t, "CHARACTER SET latin1 COLLATE latin1_swedish_ci"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	require.NoError(t, st.Migrate(ctx))

	var dbCharset string
	require.NoError(t, st.DB.QueryRowContext(ctx, "SELECT @@character_set_database").Scan(&dbCharset))
	require.Equal(t, "latin1", dbCharset, "the database's default is latin1")
	for table, column := range map[string]string{"sales": "title", "appeals": "message"} {
		var charset string
		require.NoError(t, st.DB.QueryRowContext(ctx, `SELECT CHARACTER_SET_NAME FROM information_schema.COLUMNS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?`, table, column).Scan(&charset))
		require.Equal(t, "utf8mb4", charset, "%s.%s", table, column)
	}

	title := "秒杀 · 限量 📱 iPhone"
	sale := testenv.MustSale(t, st, 3, func(s *domain.Sale) { s.Title = title })
	got, err := st.GetSale(ctx, sale.ID)
	require.NoError(t, err)
	require.Equal(t, title, got.Title)
}
