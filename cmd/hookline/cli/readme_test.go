package cli_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMEProviderTable: the README's provider table has one row per
// adapter `hookline providers` lists, with the same default event id and
// the same answer to whether the signature covers it.
func TestREADMEProviderTable(t *testing.T) {
	t.Parallel()
	code, out := run(t, "providers")
	require.Equal(t, 0, code, out)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := lines[0]
	idAt, signedAt, tolAt := strings.Index(header, "DEFAULT EVENT ID"), strings.Index(header, "ID SIGNED"), strings.Index(header, "TOLERANCE")
	require.True(t, idAt > 0 && signedAt > idAt && tolAt > signedAt, "header: %q", header)

	raw, err := os.ReadFile("../../../README.md")
	require.NoError(t, err)
	rows := map[string][]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			continue // another table
		}
		// Markdown splits cells at every | not escaped, code spans included.
		require.Equal(t, 4, strings.Count(line, "|")-strings.Count(line, `\|`), "README.md: an unescaped | in %q", line)
		for i := range cells {
			cells[i] = strings.TrimSpace(strings.ReplaceAll(cells[i], `\|`, "|"))
		}
		rows[strings.Trim(cells[0], "`")] = cells
	}
	for _, line := range lines[1:] {
		name := strings.Fields(line)[0]
		id, signed := strings.TrimSpace(line[idAt:signedAt]), strings.TrimSpace(line[signedAt:tolAt])
		cells, ok := rows[name]
		require.True(t, ok, "README.md: no row for %s in the provider table", name)
		require.Equal(t, "`"+id+"`", cells[1], "README.md: %s's event id", name)
		switch {
		case signed == "yes":
			require.True(t, strings.HasPrefix(cells[2], "yes"), "README.md: %s's id is signed, the table says %q", name, cells[2])
		case strings.HasPrefix(signed, "no (replays keyed"):
			require.Equal(t, "no, replays keyed ¹", cells[2], "README.md: %s", name)
		default:
			require.Equal(t, "no", cells[2], "README.md: %s", name)
		}
		delete(rows, name)
	}
	require.Empty(t, rows, "README.md: rows for adapters hookline providers does not list")
}
