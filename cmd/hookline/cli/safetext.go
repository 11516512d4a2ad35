package cli

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text from the server (event ids and types, a destination's error body,
// payloads and headers, the server's error messages) is chosen by providers
// and destinations. The human-readable outputs print it through safe,
// safeLines or oneLine, so that none of it acts on the operator's terminal
// (escape sequences: colours, window titles, hidden text) or forges a line of
// the command's output. --json prints the server's JSON as it is.

// safe returns s with every character that could act on a terminal shown
// as an escape instead: \n, \r and \t; other C0 controls and DEL as \xHH;
// C1 controls, the line and paragraph separators and the bidirectional-text
// controls as \uHHHH; a byte that is not UTF-8 as \xHH. Anything else is
// left as it is.
func safe(s string) string {
	return escapeControls(s, false)
}

// safeLines is safe for text whose lines are its own (a payload, an answer's
// body): its line feeds stay line feeds and its tabs stay tabs, every line is
// prefixed with indent, and everything else safe escapes is escaped (a
// carriage return shows as \r).
func safeLines(s, indent string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = indent + escapeControls(l, true)
	}
	return strings.Join(lines, "\n")
}

// oneLine makes s fit a table cell: runs of white space (line breaks and
// tabs included) become one space, the rest is escaped as safe does, and the
// cell is cut to n characters, never inside an escape.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if e := safe(s); utf8.RuneCountInString(e) <= n {
		return e
	}
	var b strings.Builder
	width := 0
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		piece := safe(s[i : i+size])
		w := utf8.RuneCountInString(piece)
		if width+w > n-1 {
			break
		}
		b.WriteString(piece)
		width += w
		i += size
	}
	return b.String() + "…"
}

// escapeControls is safe; keepTabs leaves tabs as they are.
func escapeControls(s string, keepTabs bool) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t' && keepTabs:
			b.WriteByte('\t')
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// unsafeRune reports whether r is a C0 or C1 control or DEL (ESC starts the
// terminal's escape sequences, BEL ends OSC ones, CSI is also U+009B), a line
// or paragraph separator, or a bidirectional-text control (which reorders how
// the rest of the line is shown).
func unsafeRune(r rune) bool {
	switch {
	case unicode.IsControl(r):
		return true
	case r == '\u2028', r == '\u2029':
		return true
	case r == '\u061c', r == '\u200e', r == '\u200f', r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}
