package idem

import (
	"fmt"
	"strings"
)

// KeySeparator joins the parts of a composed key.
const KeySeparator = ":"

// ComposeKey joins parts with ":" into a claim key, for example
// ComposeKey("hookline", "stripe.charge", "evt_123") is
// "hookline:stripe.charge:evt_123". Parts are used verbatim (a segment may
// itself contain ":"). An empty or whitespace-only part, or no parts at all,
// is an error wrapping ErrEmptySegment that names the part's index.
func ComposeKey(parts ...string) (string, error) {
	if len(parts) == 0 {
		return "", fmt.Errorf("%w: no key parts given", ErrEmptySegment)
	}
	for i, p := range parts {
		if isBlank(p) {
			return "", fmt.Errorf("%w: part %d of %d (%s) is blank", ErrEmptySegment, i, len(parts), partName(i, len(parts)))
		}
	}
	return strings.Join(parts, KeySeparator), nil
}

// partName names a part of the three-part key built from Options, to make the
// error say which field to fix.
func partName(i, n int) string {
	if n == 3 {
		switch i {
		case 0:
			return "Namespace"
		case 1:
			return "Scope"
		case 2:
			return "Segment"
		}
	}
	return fmt.Sprintf("index %d", i)
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }
