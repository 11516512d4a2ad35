package hmacspec

import "strings"

// segKind is what a template segment stands for.
type segKind uint8

const (
	segLiteral segKind = iota
	segBody
	segStamp
	segID
	segMethod
	segURL
)

// segment is one part of a template: a literal, or a placeholder.
type segment struct {
	kind    segKind
	literal []byte
}

var placeholders = []struct {
	text string
	kind segKind
}{{PBody, segBody}, {PTimestamp, segStamp}, {PID, segID}, {PMethod, segMethod}, {PURL, segURL}}

// parseTemplate splits tmpl into literals and placeholders; a brace that
// opens no placeholder is literal text.
func parseTemplate(tmpl string) []segment {
	var segs []segment
	lit := func(s string) {
		if s == "" {
			return
		}
		if n := len(segs); n > 0 && segs[n-1].kind == segLiteral {
			segs[n-1].literal = append(segs[n-1].literal, s...)
			return
		}
		segs = append(segs, segment{kind: segLiteral, literal: []byte(s)})
	}
	for tmpl != "" {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			lit(tmpl)
			break
		}
		lit(tmpl[:i])
		rest := tmpl[i:]
		n := 1
		kind := segLiteral
		for _, p := range placeholders {
			if strings.HasPrefix(rest, p.text) {
				kind, n = p.kind, len(p.text)
				break
			}
		}
		if kind == segLiteral {
			lit("{")
		} else {
			segs = append(segs, segment{kind: kind})
		}
		tmpl = tmpl[i+n:]
	}
	return segs
}

// maxSegments bounds a template's segments, so that the signed parts of a
// delivery fit in a fixed array (see message).
const maxSegments = 12
