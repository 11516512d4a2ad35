package hmacspec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// field is one key resolver of the notation of providers.ParseKeyResolver:
// header:NAME, json:path, form:FIELD or body:sha256.
type field struct {
	kind string // "header", "json", "form" or "body"
	arg  string
}

func parseField(spec string) (field, error) {
	kind, arg, ok := strings.Cut(spec, ":")
	if !ok || arg == "" {
		return field{}, fmt.Errorf("%q: want header:NAME, json:path, form:FIELD or body:sha256", spec)
	}
	switch kind {
	case "header", "json", "form":
	case "body":
		if arg != "sha256" {
			return field{}, fmt.Errorf("%q: the only body resolver is body:sha256", spec)
		}
	default:
		return field{}, fmt.Errorf("%q: unknown resolver %q", spec, kind)
	}
	return field{kind: kind, arg: arg}, nil
}

// part is a literal or a field of a composite id.
type part struct {
	literal string
	field   *field
}

// alternative is one way to make an id: its parts, concatenated; it fails
// when a field is empty.
type alternative []part

// parseID parses the id notation: alternatives separated by ", else ", each
// a resolver or fields in braces between literal text.
func parseID(spec string) ([]alternative, error) {
	var alts []alternative
	for alt := range strings.SplitSeq(spec, ", else ") {
		if !strings.Contains(alt, "{") {
			f, err := parseField(alt)
			if err != nil {
				return nil, err
			}
			alts = append(alts, alternative{{field: &f}})
			continue
		}
		var a alternative
		for alt != "" {
			open := strings.IndexByte(alt, '{')
			if open < 0 {
				a = append(a, part{literal: alt})
				break
			}
			closing := strings.IndexByte(alt[open:], '}')
			if closing < 0 {
				return nil, fmt.Errorf("%q: unclosed brace", spec)
			}
			if open > 0 {
				a = append(a, part{literal: alt[:open]})
			}
			f, err := parseField(alt[open+1 : open+closing])
			if err != nil {
				return nil, err
			}
			a = append(a, part{field: &f})
			alt = alt[open+closing+1:]
		}
		alts = append(alts, a)
	}
	return alts, nil
}

// resolver resolves a Spec's events. Every json: path it reads is read in
// one pass over the body (providers.JSONFields), the form parsed once.
type resolver struct {
	id        []alternative
	typ, time *field
	timeUnit  Unit
	paths     []string // every json: path, in order of first use
}

func newResolver(s *Spec) (*resolver, error) {
	alts, err := parseID(s.EventID)
	if err != nil {
		return nil, err
	}
	r := &resolver{id: alts, timeUnit: s.TimeUnit}
	for _, spec := range []struct {
		text string
		dst  **field
	}{{s.EventType, &r.typ}, {s.EventTime, &r.time}} {
		if spec.text == "" {
			continue
		}
		f, err := parseField(spec.text)
		if err != nil {
			return nil, err
		}
		*spec.dst = &f
	}
	r.each(func(f *field) {
		if f.kind == "json" && !containsString(r.paths, f.arg) {
			r.paths = append(r.paths, f.arg)
		}
	})
	return r, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// each calls fn for every field the resolver reads.
func (r *resolver) each(fn func(*field)) {
	for _, a := range r.id {
		for _, p := range a {
			if p.field != nil {
				fn(p.field)
			}
		}
	}
	for _, f := range []*field{r.typ, r.time} {
		if f != nil {
			fn(f)
		}
	}
}

// values are the inputs of one resolution: the request, its json: values
// and its form, read once.
type values struct {
	req  *providers.Request
	json []string
	form url.Values
	r    *resolver
}

func (v *values) get(f *field) (string, error) {
	switch f.kind {
	case "header":
		return strings.TrimSpace(v.req.Header.Get(f.arg)), nil
	case "json":
		for i, p := range v.r.paths {
			if p == f.arg {
				return v.json[i], nil
			}
		}
		return "", nil
	case "form":
		if v.form == nil {
			form, err := providers.ParseForm(v.req)
			if err != nil {
				return "", err
			}
			v.form = form
		}
		return v.form.Get(f.arg), nil
	}
	sum := sha256.Sum256(v.req.Body)
	return hex.EncodeToString(sum[:]), nil
}

// resolve returns the event of a verified request.
func (r *resolver) resolve(req *providers.Request) (providers.Event, error) {
	v := values{req: req, r: r}
	if len(r.paths) > 0 {
		var err error
		if v.json, err = providers.JSONFields(req.Body, r.paths...); err != nil {
			return providers.Event{}, err
		}
	}
	var ev providers.Event
	for _, a := range r.id {
		id, err := v.alternative(a)
		if err != nil {
			return ev, err
		}
		if strings.TrimSpace(id) != "" {
			ev.ID = id
			break
		}
	}
	if ev.ID == "" {
		return ev, fmt.Errorf("%w: the delivery has none of the fields its id is made of", providers.ErrNoEventID)
	}
	var err error
	if r.typ != nil {
		if ev.Type, err = v.get(r.typ); err != nil {
			return ev, err
		}
	}
	if r.time != nil {
		t, err := v.get(r.time)
		if err != nil {
			return ev, err
		}
		ev.Time = parseTime(t, r.timeUnit)
	}
	return ev, nil
}

// alternative returns the id a makes of v, "" when one of its fields is empty.
func (v *values) alternative(a alternative) (string, error) {
	var b strings.Builder
	for _, p := range a {
		if p.field == nil {
			b.WriteString(p.literal)
			continue
		}
		s, err := v.get(p.field)
		if err != nil || strings.TrimSpace(s) == "" {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// parseTime reads an event time written in unit; zero when it cannot.
func parseTime(s string, unit Unit) time.Time {
	switch unit {
	case Seconds, Millis:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}
		}
		if unit == Millis {
			return time.UnixMilli(n).UTC()
		}
		return time.Unix(n, 0).UTC()
	case RFC3339:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999Z0700"} {
			if t, err := time.Parse(layout, s); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// signedID reports whether every id a Spec can resolve is covered by its
// signature: json:, form: and body: fields read the signed body; a header:
// field is signed only when it is the IDHeader the template signs.
func signedID(s *Spec, alts []alternative) bool {
	if s.Mode != MAC {
		return false
	}
	for _, a := range alts {
		for _, p := range a {
			if p.field == nil {
				continue
			}
			if p.field.kind == "header" && (s.IDHeader == "" || !strings.EqualFold(p.field.arg, s.IDHeader)) {
				return false
			}
		}
	}
	return true
}
