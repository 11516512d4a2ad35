package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Variable references in scalar values:
//
//	${NAME}           the variable's value ("" when it is empty)
//	${NAME:-default}  the variable's value, or default when it is unset or
//	                  empty (as in the shell); default may itself hold
//	                  references and is expanded only when it is used
//	$${               a literal "${"
//
// NAME is [A-Za-z_][A-Za-z0-9_]*. Any other "${" is an error. A "$" not
// followed by "{" is kept as it is, and a value without "${" is never
// changed.
//
// Variables are read through a Lookup, which tells an unset variable from
// an empty one: ${NAME} of an unset NAME is "" in most fields but an error
// in sensitive ones, while an empty NAME is a deliberate "".

// sensitiveKey matches the YAML key names whose values hold a secret, token,
// key, password or URL (an endpoint, an audience, a host), or an address to
// listen on (empty would mean the default: admin_listen's is the public
// listener). In such a field a ${NAME} without a default whose variable is
// unset is an error rather than "".
var sensitiveKey = regexp.MustCompile(`secret|token|key|password|passwd|url|dsn|endpoint|audience|host|listen`)

func sensitive(key string) bool { return sensitiveKey.MatchString(strings.ToLower(key)) }

// expandString expands the references in s. unset is the first variable that
// was used without a default and is unset; err is a syntax error, which
// never quotes s (s may be a secret).
func expandString(s string, lookup Lookup) (out, unset string, err error) {
	if !strings.Contains(s, "${") {
		return s, "", nil
	}
	p := refParser{s: s, lookup: lookup}
	out, err = p.word(false, true)
	if err != nil {
		return "", "", err
	}
	return out, p.unset, nil
}

type refParser struct {
	s      string
	i      int // next byte of s
	lookup Lookup
	unset  string
}

// word expands s from p.i to its end or, when nested (a default), to the
// first "}" not closing a reference of its own, which it consumes. With use
// false (a default that is not taken) nothing is looked up or recorded, but
// the syntax is still checked.
func (p *refParser) word(nested, use bool) (string, error) {
	var b strings.Builder
	for p.i < len(p.s) {
		rest := p.s[p.i:]
		switch {
		case nested && rest[0] == '}':
			p.i++
			return b.String(), nil
		case strings.HasPrefix(rest, "$${"):
			b.WriteString("${")
			p.i += 3
		case strings.HasPrefix(rest, "${"):
			v, err := p.ref(use)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
		default:
			// Copy up to the next byte that may start or end something;
			// both are ASCII, so UTF-8 sequences are never split.
			n := strings.IndexAny(rest[1:], "$}")
			if n < 0 {
				n = len(rest) - 1
			}
			b.WriteString(rest[:n+1])
			p.i += n + 1
		}
	}
	if nested {
		return "", errUnclosedDefault
	}
	return b.String(), nil
}

// ref expands the reference starting at p.i ("${").
func (p *refParser) ref(use bool) (string, error) {
	start := p.i
	j := start + 2
	for j < len(p.s) && (p.s[j] == '_' || 'A' <= p.s[j] && p.s[j] <= 'Z' || 'a' <= p.s[j] && p.s[j] <= 'z' ||
		j > start+2 && '0' <= p.s[j] && p.s[j] <= '9') {
		j++
	}
	name := p.s[start+2 : j]
	if name == "" {
		return "", p.syntax(start, "want a variable name after ${")
	}
	p.i = j
	rest := p.s[p.i:]
	switch {
	case strings.HasPrefix(rest, "}"):
		p.i++
		if !use {
			return "", nil
		}
		v, ok := p.lookup(name)
		if !ok && p.unset == "" {
			p.unset = name
		}
		return v, nil
	case strings.HasPrefix(rest, ":-"):
		p.i += 2
		var v string
		if use {
			v, _ = p.lookup(name)
		}
		def, err := p.word(true, use && v == "")
		if err == errUnclosedDefault {
			return "", p.syntax(start, "the default of ${"+name+" is not closed with }")
		}
		if err != nil {
			return "", err
		}
		if v == "" {
			return def, nil
		}
		return v, nil
	case rest == "":
		return "", p.syntax(start, "${"+name+" is not closed with }")
	default:
		return "", p.syntax(start, "${"+name+" is followed by neither } nor :-")
	}
}

// errUnclosedDefault is word's error for a default without its "}"; ref
// reports it at the reference.
var errUnclosedDefault = errors.New("unclosed default")

func (p *refParser) syntax(at int, msg string) error {
	return fmt.Errorf("bad variable reference at character %d: %s (write ${NAME} or ${NAME:-default}; $${ is a literal ${)",
		utf8.RuneCountInString(p.s[:at])+1, msg)
}

func unsetError(path, name string) error {
	return field(path, "${%s} is not set (write ${%s:-default} for a default)", name, name)
}

// walker visits every node of a yaml.Node tree but documents and aliases,
// parents first, with its YAML path ("sources[0].secrets[1]": mapping keys
// give names, sequence items [i]) and the nearest mapping key above it
// ("secrets"). Mapping keys are visited with key "". A merge key ("<<") adds no path element. With
// aliases, an alias's target is visited again at the alias's path (viaAlias
// true), at most once per target and sensitivity, which bounds the walk on
// nested aliases.
type walker struct {
	aliases bool
	visit   func(n *yaml.Node, path, key string, viaAlias bool) error
	seen    map[aliasVisit]bool
}

type aliasVisit struct {
	n         *yaml.Node
	sensitive bool
}

func (w *walker) walk(n *yaml.Node, path, key string, viaAlias bool) error {
	if n.Kind != yaml.DocumentNode && n.Kind != yaml.AliasNode {
		if err := w.visit(n, path, key, viaAlias); err != nil {
			return err
		}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := w.walk(c, path, key, viaAlias); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := w.walk(c, fmt.Sprintf("%s[%d]", path, i), key, viaAlias); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if err := w.walk(k, join(path, k.Value), "", viaAlias); err != nil {
				return err
			}
			p, name := join(path, k.Value), k.Value
			if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Tag == "!!merge" {
				p, name = path, key
			}
			if err := w.walk(v, p, name, viaAlias); err != nil {
				return err
			}
		}
	case yaml.AliasNode:
		if !w.aliases || n.Alias == nil {
			return nil
		}
		v := aliasVisit{n.Alias, sensitive(key)}
		if w.seen[v] {
			return nil
		}
		if w.seen == nil {
			w.seen = map[aliasVisit]bool{}
		}
		w.seen[v] = true
		return w.walk(n.Alias, path, key, true)
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// expand expands the references in every scalar of the tree, in place. It
// fails on a syntax error, and on an unset variable used without a default
// in a sensitive field (see sensitiveKey), naming the field by its path; a
// scalar reached through an alias is checked at the alias's path too.
// unsetAt maps the path of each other scalar that used an unset variable
// without a default to that variable, so that a value the field cannot
// take ("" for a number) is reported as the variable being unset.
func expand(root *yaml.Node, lookup Lookup) (unsetAt map[string]string, err error) {
	unset := map[*yaml.Node]string{} // scalar -> first unset variable it used
	unsetAt = map[string]string{}
	w := walker{aliases: true, visit: func(n *yaml.Node, path, key string, viaAlias bool) error {
		if n.Kind != yaml.ScalarNode {
			return nil
		}
		if path == "" {
			path = "(top level)"
		}
		if !viaAlias && strings.Contains(n.Value, "${") {
			out, u, err := expandString(n.Value, lookup)
			if err != nil {
				return field(path, "%v", err)
			}
			n.Value = out
			retype(n)
			if u != "" {
				unset[n] = u
			}
		}
		if u := unset[n]; u != "" {
			if sensitive(key) {
				return unsetError(path, u)
			}
			unsetAt[path] = u
		}
		return nil
	}}
	if err := w.walk(root, "", "", false); err != nil {
		return nil, err
	}
	return unsetAt, nil
}

// retype gives an expanded scalar n the type its value has, as if it had
// been written in the file: a number or true/false fills a numeric or
// boolean field (workers: ${WORKERS}, or "${WORKERS}" quoted), and a string
// field still gets the value's text. Anything else stays a string, an
// empty value too (admin_token: ${TOKEN} with TOKEN empty is "", not
// null). An explicit tag (!!str ${X}) is kept.
func retype(n *yaml.Node) {
	if n.Style&yaml.TaggedStyle != 0 {
		return
	}
	probe := yaml.Node{Kind: yaml.ScalarNode, Value: n.Value}
	switch probe.ShortTag() {
	case "!!int", "!!float", "!!bool":
		n.Tag, n.Style = "", n.Style&^(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle)
	default:
		n.Tag = "!!str"
	}
}

// pathAt returns the YAML path of the node at line:column of root ("" when
// there is none).
func pathAt(root *yaml.Node, line, column int) string {
	found := ""
	w := walker{visit: func(n *yaml.Node, path, _ string, _ bool) error {
		if n.Line == line && n.Column == column && found == "" {
			found = path
		}
		return nil
	}}
	_ = w.walk(root, "", "", false)
	return found
}

// yaml.v3's type errors: a value of the wrong kind, an unknown field.
var (
	wrongKindRE    = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
	unknownFieldRE = regexp.MustCompile(`^line (\d+): field (.+) not found in type .+$`)
)

// nameTypeError is te's first error naming the field by its path in root
// (the document decoded) and saying what it wants, without quoting the
// value (it may be a secret); nil when the field cannot be found.
func nameTypeError(root *yaml.Node, te *yaml.TypeError) error {
	if len(te.Errors) == 0 {
		return nil
	}
	msg, more := te.Errors[0], ""
	if n := len(te.Errors) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more such errors)", n)
	}
	if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if p := pathOn(root, line, func(n *yaml.Node) bool { return n.Value == m[2] }); p != "" {
			return field(p, "unknown field (misspelt, or indented under the wrong key?)%s", more)
		}
		return nil
	}
	m := wrongKindRE.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	line, _ := strconv.Atoi(m[1])
	tag, value := m[2], m[3]
	p := pathOn(root, line, func(n *yaml.Node) bool {
		if n.ShortTag() != tag {
			return false
		}
		if v, cut := strings.CutSuffix(value, "..."); cut {
			return strings.HasPrefix(n.Value, v)
		}
		return n.Kind != yaml.ScalarNode || n.Value == value
	})
	if p == "" {
		return nil
	}
	return field(p, "want %s, not %s%s", goKind(m[4]), yamlKind(tag), more)
}

// pathOn is the path of the first node on line (in document order) that
// match accepts; "" when none does.
func pathOn(root *yaml.Node, line int, match func(*yaml.Node) bool) string {
	found := ""
	w := walker{visit: func(n *yaml.Node, path, _ string, _ bool) error {
		if found == "" && n.Line == line && match(n) {
			found = path
			if found == "" {
				found = "(top level)"
			}
		}
		return nil
	}}
	_ = w.walk(root, "", "", false)
	return found
}

// goKind says in words what a field of Go type t holds.
func goKind(t string) string {
	t = strings.TrimPrefix(t, "*")
	switch {
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.Contains(t, "."):
		return "a mapping (key: value lines)"
	}
	return t
}

// yamlKind says in words what a YAML value of tag holds.
func yamlKind(tag string) string {
	switch tag {
	case "!!str":
		return "text"
	case "!!int":
		return "a whole number"
	case "!!float":
		return "a number"
	case "!!bool":
		return "true/false"
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	case "!!null":
		return "an empty value"
	}
	return tag
}
