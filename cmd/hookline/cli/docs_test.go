package cli

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// operationsPage documents the command line, relative to this package.
const operationsPage = "../../../docs/operations.md"

// helpFlag is a flag as `hookline COMMAND --help` lists it.
var helpFlag = regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)

// docFlag is a flag as the docs write it.
var docFlag = regexp.MustCompile("--([a-z][a-z-]*)")

// helpFlags lists the flags `hookline args... --help` prints.
func helpFlags(t *testing.T, args ...string) []string {
	t.Helper()
	r := runMain(append(args, "--help")...)
	if r.code != 0 {
		t.Fatalf("%v --help: exit %d: %s", args, r.code, r.stderr)
	}
	var out []string
	for _, m := range helpFlag.FindAllStringSubmatch(r.stdout, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestDocsNameEveryFlag: each command's row of docs/operations.md's
// "Command line" table names every flag its --help lists, and no flag it
// does not take; the dead and destinations subcommands' flags are on the
// page too.
func TestDocsNameEveryFlag(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(operationsPage)
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	_, section, ok := strings.Cut(page, "\n## Command line\n")
	if !ok {
		t.Fatalf(`%s has no "## Command line" section`, operationsPage)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if rest, ok := strings.CutPrefix(line, "| `hookline "); ok {
			name, _, _ := strings.Cut(rest, " ")
			name = strings.TrimSuffix(name, "`")
			cells := strings.SplitN(line, " | ", 2)
			rows[name] = cells[0]
		}
	}
	for _, cmd := range []string{"serve", "migrate", "dev", "send", "check", "providers", "reconcile"} {
		row, ok := rows[cmd]
		if !ok {
			t.Errorf("%s: the Command line table has no row for hookline %s", operationsPage, cmd)
			continue
		}
		flags := helpFlags(t, cmd)
		if len(flags) == 0 && cmd != "providers" {
			t.Errorf("hookline %s --help lists no flags (\"  -name\" lines): print them as every command does", cmd)
		}
		for _, f := range flags {
			if !strings.Contains(row, "--"+f+" ") && !strings.Contains(row, "--"+f+"]") && !strings.Contains(row, "--"+f+"`") {
				t.Errorf("%s: the Command line table's row for hookline %s does not name --%s, which its --help lists", operationsPage, cmd, f)
			}
		}
		for _, m := range docFlag.FindAllStringSubmatch(row, -1) {
			if !slices.Contains(flags, m[1]) {
				t.Errorf("%s: the Command line table's row for hookline %s names --%s, which it does not take", operationsPage, cmd, m[1])
			}
		}
	}
	for _, sub := range [][]string{
		{"dead", "list"}, {"dead", "show"}, {"dead", "retry"}, {"dead", "delete"},
		{"destinations", "list"}, {"destinations", "pause"}, {"destinations", "resume"},
	} {
		for _, f := range helpFlags(t, sub...) {
			if !strings.Contains(page, "--"+f) {
				t.Errorf("%s does not name --%s, which hookline %s --help lists", operationsPage, f, strings.Join(sub, " "))
			}
		}
	}
}
