package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/config"
)

// A migration step needs the database settings only: LoadDatabase reads
// them whatever the rest of the file needs (unset source secrets, a source
// that would not validate), and still names a bad database field.
func TestLoadDatabase(t *testing.T) {
	t.Setenv("HL_TEST_DB", "postgres://migrator@db:5432/hookline")
	path := filepath.Join(t.TempDir(), "hookline.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(path, []byte(s), 0o600)) }

	write(`database_url: "${HL_TEST_DB}"
database: {max_conns: 3}
sources:
  - {name: s, provider: stripe, secrets: ["${HL_TEST_UNSET_SECRET}"], bogus: 1}
`)
	_, err := config.Load(path)
	require.Error(t, err, "the whole file does not load")
	c, err := config.LoadDatabase(path)
	require.NoError(t, err)
	require.Equal(t, "postgres://migrator@db:5432/hookline", c.DatabaseURL)
	require.Equal(t, 3, c.Database.MaxConns)

	write("database_url: x\nsources: []\n")
	c, err = config.LoadDatabase(path)
	require.NoError(t, err)
	require.Equal(t, config.DefaultPoolSize, c.Database.MaxConns)

	write("database_url: \"${HL_TEST_UNSET_DB}\"\n")
	_, err = config.LoadDatabase(path)
	require.ErrorIs(t, err, config.ErrInvalid)
	require.Contains(t, err.Error(), "database_url: ${HL_TEST_UNSET_DB} is not set")

	write("database_url: x\ndatabase: {max_conns: -1}\n")
	_, err = config.LoadDatabase(path)
	require.ErrorContains(t, err, "database.max_conns: must be positive")
}
