package config

import (
	"regexp"
	"strings"
	"testing"
)

var varNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// FuzzExpand checks that expandString never panics, leaves a value without
// "${" unchanged, accepts or refuses a value whatever the environment, and
// reports an unset variable only when one is.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{
		"", "plain", "$", "$$", "${", "${}", "${A}", "${A:-}", "${A:-d}", "$${A}",
		"${A:-${B:-${C}}}", "x${A}y${B:-z}", "${A:-{}}", "${A-x}", "${A:?x}", "é${Ü}",
		"${A:-$${B}}", "pa$$word", "${_a1:-x}", "}${A}{", "${A:-${B}",
	} {
		f.Add(s)
	}
	set := func(name string) (string, bool) { return "v" + name, true }
	unset := func(string) (string, bool) { return "", false }
	f.Fuzz(func(t *testing.T, s string) {
		out1, u1, err1 := expandString(s, set)
		out2, u2, err2 := expandString(s, unset)
		if !strings.Contains(s, "${") {
			if out1 != s || out2 != s || u1 != "" || u2 != "" || err1 != nil || err2 != nil {
				t.Fatalf("%q without ${ changed: %q %q %q %q %v %v", s, out1, out2, u1, u2, err1, err2)
			}
			return
		}
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("%q: syntax depends on the environment: %v / %v", s, err1, err2)
		}
		if err1 != nil {
			if out1 != "" || out2 != "" || u1 != "" || u2 != "" {
				t.Fatalf("%q: output with an error", s)
			}
			return
		}
		if u1 != "" {
			t.Fatalf("%q: %q reported unset with every variable set", s, u1)
		}
		if u2 != "" && !varNameRE.MatchString(u2) {
			t.Fatalf("%q: unset %q is not a variable name", s, u2)
		}
		if u2 != "" && !strings.Contains(s, "${"+u2+"}") {
			t.Fatalf("%q: unset %q was never referenced without a default", s, u2)
		}
	})
}
