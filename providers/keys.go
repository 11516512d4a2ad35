package providers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unsafe"

	"github.com/tidwall/gjson"
	"golang.org/x/net/http/httpguts"
)

// KeyResolver yields one value (an event id or type) from a delivery. It is
// the counterpart of CMDx key resolvers and sidekiq's lock_args_method.
type KeyResolver func(r *Request) (string, error)

// CheckHeaderName refuses a name that is not an HTTP header field name (an
// RFC 9110 token): a name with a space or a colon could never match a
// header.
func CheckHeaderName(name string) error {
	if !httpguts.ValidHeaderFieldName(name) {
		return fmt.Errorf("%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~, no spaces), so it could never match", name)
	}
	return nil
}

// ParseKeyResolver parses the resolver notation used in configuration:
//
//	header:NAME     the value of request header NAME
//	json:dot.path   the value at dot.path in the raw JSON body (gjson syntax;
//	                strings unquoted, other values as their raw JSON text)
//	form:FIELD      the form field FIELD of an application/x-www-form-urlencoded body
//	body:sha256     the hex SHA-256 of the raw body
//
// The stored body is never re-serialised: json: reads the raw bytes.
func ParseKeyResolver(spec string) (KeyResolver, error) {
	kind, arg, ok := strings.Cut(spec, ":")
	if !ok || arg == "" {
		return nil, fmt.Errorf("%q: want header:NAME, json:path, form:FIELD or body:sha256", spec)
	}
	switch kind {
	case "header":
		if err := CheckHeaderName(arg); err != nil {
			return nil, fmt.Errorf("%q: %w", spec, err)
		}
		return func(r *Request) (string, error) { return strings.TrimSpace(r.Header.Get(arg)), nil }, nil
	case "json":
		path := JSONPath(arg)
		return func(r *Request) (string, error) { return JSONString(r.Body, path) }, nil
	case "form":
		return func(r *Request) (string, error) { return FormValue(r, arg) }, nil
	case "body":
		if arg != "sha256" {
			return nil, fmt.Errorf("%q: the only body resolver is body:sha256", spec)
		}
		return func(r *Request) (string, error) {
			sum := sha256.Sum256(r.Body)
			return hex.EncodeToString(sum[:]), nil
		}, nil
	}
	return nil, fmt.Errorf("%q: unknown resolver %q (want header, json, form or body)", spec, kind)
}

// Blank reports whether s is empty or holds nothing visible: only Unicode
// white space (U+00A0, U+2003, U+3000 included), format characters such
// as U+200B ZERO WIDTH SPACE, U+2060 WORD JOINER or U+FEFF, the other
// default-ignorable characters (the Hangul fillers U+3164 and U+FFA0,
// U+034F COMBINING GRAPHEME JOINER, the variation selectors) and U+2800
// BRAILLE PATTERN BLANK. An event id, type or id part that is blank is no
// id.
func Blank(s string) bool {
	return strings.TrimFunc(s, invisible) == ""
}

func invisible(r rune) bool {
	return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		unicode.Is(unicode.Variation_Selector, r) || r == '\u2800'
}

// JSONPath turns a dot path as configuration writes it (object keys
// separated by '.', an array element by its index: "data.items.0.id") into
// the gjson path that reads it. Every other character stands for itself:
// '*', '?', '#', '|', '@' and '!' are parts of a key, never wildcards,
// counts or modifiers.
func JSONPath(dot string) string {
	parts := strings.Split(dot, ".")
	for i, p := range parts {
		parts[i] = gjson.Escape(p)
	}
	return strings.Join(parts, ".")
}

// JSONString returns the value at path (a gjson path; see JSONPath) in the raw JSON body: strings
// unquoted, numbers and other values as their raw JSON text, "" when absent
// or null. An invalid JSON body is ErrMalformed.
func JSONString(body []byte, path string) (string, error) {
	if !gjson.ValidBytes(body) {
		return "", fmt.Errorf("%w: body is not valid JSON", ErrMalformed)
	}
	return jsonValue(gjson.GetBytes(body, path)), nil
}

// jsonValue is v as JSONString returns it. A string holding an escaped
// lone UTF-16 surrogate ("\ud800" without its pair) names no Unicode text:
// decoded, every such string would read as U+FFFD, and different ids
// would be one. It is returned as invalidUTF8 and its escaped JSON text,
// which ingest refuses as an id or type (not valid UTF-8) and digests as
// an ordering key, and which differs wherever the JSON text differs.
func jsonValue(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		if len(v.Raw) >= 2 && hasLoneSurrogate(v.Raw) {
			return invalidUTF8 + v.Raw[1:len(v.Raw)-1]
		}
		return v.Str
	case gjson.Null:
		return ""
	}
	return v.Raw
}

// invalidUTF8 marks a JSON string that holds no Unicode text (jsonValue).
const invalidUTF8 = "\xff"

// hasLoneSurrogate reports whether raw JSON string text escapes a UTF-16
// surrogate that is not half of a high-low pair.
func hasLoneSurrogate(raw string) bool {
	for i := 0; ; {
		j := strings.IndexByte(raw[i:], '\\')
		if j < 0 {
			return false
		}
		i += j
		if i+1 >= len(raw) {
			return false
		}
		if raw[i+1] != 'u' { // another escape, an escaped backslash among them
			i += 2
			continue
		}
		r, ok := hex4(raw, i+2)
		switch {
		case !ok:
			return false // not valid JSON, which the parser checked
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+12 > len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
				return true
			}
			if lo, ok := hex4(raw, i+8); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 12
		default:
			i += 6
		}
	}
}

// hex4 reads the four hex digits of a \u escape at s[at:].
func hex4(s string, at int) (uint64, bool) {
	if at+4 > len(s) {
		return 0, false
	}
	v, err := strconv.ParseUint(s[at:at+4], 16, 16)
	return v, err == nil
}

// JSONFields reads several paths from a JSON body, as JSONString reads one.
// An invalid JSON body is ErrMalformed.
func JSONFields(body []byte, paths ...string) ([]string, error) {
	if !gjson.ValidBytes(body) {
		return nil, fmt.Errorf("%w: body is not valid JSON", ErrMalformed)
	}
	if out, ok := topLevelFields(body, paths); ok {
		return out, nil
	}
	res := gjson.GetManyBytes(body, paths...)
	out := make([]string, len(res))
	for i, v := range res {
		out[i] = jsonValue(v)
	}
	return out, nil
}

// ParseJSON parses body in place: unlike gjson.ParseBytes it does not copy
// the body (which can be megabytes) into a string first, so the results'
// Raw and Str alias body. body must not change while they are used; clone
// (strings.Clone) any string kept beyond the request.
func ParseJSON(body []byte) gjson.Result {
	return gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body)))
}

// topLevelFields answers JSONFields in one walk over the top-level object
// when every path is a plain key (the Stripe case: id, type, created), where
// gjson walks the body once per path; false means take the general road. The
// first occurrence of a key wins, as with gjson.Get.
func topLevelFields(body []byte, paths []string) ([]string, bool) {
	if len(paths) > 64 {
		return nil, false
	}
	for _, p := range paths {
		if !plainKey(p) {
			return nil, false
		}
	}
	root := ParseJSON(body) // the values kept are cloned out of it
	if !root.IsObject() {
		return nil, false
	}
	out := make([]string, len(paths))
	var found uint64
	all := uint64(1)<<len(paths) - 1
	root.ForEach(func(k, v gjson.Result) bool {
		for i, p := range paths {
			if found&(1<<i) == 0 && k.Str == p {
				out[i] = strings.Clone(jsonValue(v))
				found |= 1 << i
			}
		}
		return found != all
	})
	return out, true
}

// plainKey reports whether a gjson path is a bare key: letters, digits, _ and -.
func plainKey(p string) bool {
	if p == "" {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// FormValue returns field from a form-encoded body.
func FormValue(r *Request, field string) (string, error) {
	vals, err := ParseForm(r)
	if err != nil {
		return "", err
	}
	return vals.Get(field), nil
}

// ParseForm parses an application/x-www-form-urlencoded body.
func ParseForm(r *Request) (url.Values, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err == nil && mt != "application/x-www-form-urlencoded" {
			return nil, fmt.Errorf("%w: want a form body, got %s", ErrMalformed, mt)
		}
	}
	vals, err := url.ParseQuery(string(r.Body))
	if err != nil {
		return nil, fmt.Errorf("%w: form body: %v", ErrMalformed, err)
	}
	return vals, nil
}

// EventResolver resolves events from key resolvers; a nil Type or Time
// resolver leaves that field empty. Sources override a provider's defaults
// with it (`event_id: header:X-Delivery`).
type EventResolver struct {
	ID   KeyResolver
	Type KeyResolver
}

// Resolve implements Resolver.
func (e EventResolver) Resolve(r *Request) (Event, error) {
	var ev Event
	id, err := e.ID(r)
	if err != nil {
		return ev, err
	}
	if id == "" {
		return ev, ErrNoEventID
	}
	ev.ID = id
	if e.Type != nil {
		if ev.Type, err = e.Type(r); err != nil {
			return ev, err
		}
	}
	return ev, nil
}
