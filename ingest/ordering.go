package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookline/hookline/providers"
)

// Ordering puts a source's events that share a key in one line per
// destination: forwarded one at a time, in the order they were accepted.
type Ordering struct {
	// Key resolves the ordering key. An event whose key resolves to nothing
	// (absent, null, or blank: providers.Blank) is unordered.
	Key providers.KeyResolver
	// By resolves the provider's time or sequence (a number, or an RFC 3339
	// time); nil: events are never stale. An unreadable value is no value.
	By providers.KeyResolver
	// KeyName names the key resolver in 400 answers ("json:data.object.id").
	KeyName string
}

// Kinds of an ordering.by value.
const (
	ByNumber = "number"
	ByTime   = "time"
)

// MaxOrderKeyBytes caps an ordering key as stored, as MaxEventIDBytes caps
// an id: it is indexed. A longer key is stored as its digest (lineKey).
const MaxOrderKeyBytes = MaxEventIDBytes

// DigestKeyPrefix starts the stored form of an ordering key that Postgres
// cannot store or index as it is (lineKey).
const DigestKeyPrefix = "sha256:"

// lineKey is the ordering key as stored, and forwarded in
// Hookline-Order-Key: the key itself, or, for one Postgres cannot store or
// index as it is (longer than MaxOrderKeyBytes, invalid UTF-8, a NUL byte),
// DigestKeyPrefix and the hex SHA-256 of its bytes. Equal keys have equal
// digests, so such events are still ordered; an ordering key never makes
// an event be refused.
func lineKey(key string) string {
	if len(key) <= MaxOrderKeyBytes && utf8.ValidString(key) && strings.IndexByte(key, 0) < 0 {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return DigestKeyPrefix + hex.EncodeToString(sum[:])
}

// orderEvent fills ev's ordering key (lineKey) and by from the event's own
// request (a batch item's bytes with the delivery's headers). Only a body
// the resolver cannot read (malformed) is refused, naming the resolver.
func orderEvent(o *Ordering, pr *providers.Request, ev *DeliveryEvent) error {
	if o == nil {
		return nil
	}
	key, err := o.Key(pr)
	if err != nil && !errors.Is(err, providers.ErrNoEventID) {
		return fmt.Errorf("ordering key (resolver %s): %w", o.KeyName, err)
	}
	if providers.Blank(key) {
		return nil // unordered
	}
	ev.OrderKey = lineKey(key)
	if o.By != nil {
		if v, err := o.By(pr); err == nil {
			ev.OrderBy, ev.OrderByKind = ParseOrderBy(v)
		}
	}
	return nil
}

// decimalRE is a plain decimal number as JSON writes one.
var decimalRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// maxOrderByBytes caps a numeric ordering.by (a sequence number or a
// timestamp is far shorter); a longer one is no value.
const maxOrderByBytes = 64

// ParseOrderBy reads an ordering.by value: a decimal number (compared as a
// number), or an RFC 3339 time (compared as an instant, as epoch seconds
// with nanoseconds). It returns the value as a decimal Postgres numeric
// reads, and its kind; "" when v is neither, which makes the event never
// stale.
func ParseOrderBy(v string) (value, kind string) {
	v = strings.TrimSpace(v)
	if len(v) == 0 || len(v) > maxOrderByBytes {
		return "", ""
	}
	if decimalRE.MatchString(v) {
		if exp := strings.IndexAny(v, "eE"); exp >= 0 {
			// Keep exponents within numeric's range (±1000 digits is plenty).
			if e, err := strconv.Atoi(strings.TrimPrefix(v[exp+1:], "+")); err != nil || e > 1000 || e < -1000 {
				return "", ""
			}
		}
		return v, ByNumber
	}
	t, err := time.Parse(time.RFC3339Nano, strings.ToUpper(v)) // RFC 3339 allows "t" and "z" in lower case
	if err != nil {
		return "", ""
	}
	sec, nsec := t.Unix(), t.Nanosecond()
	if sec < 0 && nsec > 0 {
		return fmt.Sprintf("-%d.%09d", -sec-1, 1_000_000_000-nsec), ByTime
	}
	return fmt.Sprintf("%d.%09d", sec, nsec), ByTime
}
