package config_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/internal/config"
)

// referencePath is the page whose "## Configuration reference" section
// lists every field with its default, relative to this package.
const referencePath = "../../docs/operations.md"

// referenceExamples are the fields of the reference's YAML block whose
// value is an example, not the default: every other value there must be
// what hookline applies when the field is left out.
var referenceExamples = []string{
	"database_url", "admin_token",
	"sources[0].name", "sources[0].provider", "sources[0].secrets",
	"sources[0].tolerance", // the adapter's default applies at 0
	"sources[0].ordering.key", "sources[0].reconcile.api_key",
	"sources[0].destination.url", "sources[0].destination.circuit.failures", "sources[0].destination.circuit.cool_down",
	"sources[1].name", "sources[1].provider", "sources[1].secrets", "sources[1].event_id",
	"sources[1].destinations[0].name", "sources[1].destinations[0].url",
	"sources[1].destinations[0].types", "sources[1].destinations[0].where",
	"sources[1].destinations[1].name", "sources[1].destinations[1].url",
	"alerts[0].url",
}

// referenceEnv fills the block's ${VAR}s.
func referenceEnv(name string) (string, bool) {
	switch {
	case name == "DATABASE_URL":
		return "postgres://hookline@localhost/hookline", true
	case strings.HasSuffix(name, "_URL"):
		return "https://hooks.example.com/T000/B000/x", true
	}
	return "s3cret", true
}

// referenceBlock is the first YAML block of the Configuration reference.
func referenceBlock(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Configuration reference\n")
	if !ok {
		t.Fatalf(`%s has no "## Configuration reference" section`, referencePath)
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatalf("%s: the Configuration reference has no ```yaml block", referencePath)
	}
	block, _, _ = strings.Cut(block, "```")
	return []byte(block)
}

// The reference's YAML block is a configuration hookline accepts (so it
// names no field hookline does not take), and it names every field of
// every part of the configuration (provider blocks aside: providers.md
// has those).
func TestConfigReferenceNamesEveryField(t *testing.T) {
	t.Parallel()
	block := referenceBlock(t)
	if _, err := config.ParseLookup(block, referenceEnv); err != nil {
		t.Fatalf("%s: the Configuration reference's YAML block is refused: %v", referencePath, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(block, &doc); err != nil {
		t.Fatal(err)
	}
	seen := map[reflect.Type]map[string]bool{}
	documentedKeys(doc.Content[0], reflect.TypeFor[config.Config](), seen)
	for typ, fields := range yamlFields(reflect.TypeFor[config.Config]()) {
		for _, f := range fields {
			if !seen[typ][f] {
				t.Errorf("%s: the Configuration reference does not name %s's field %q: add it, with its default", referencePath, typ.Name(), f)
			}
		}
	}
}

// Every value the reference's block gives, except the examples listed in
// referenceExamples, is the default: leaving the field out configures the
// same.
func TestConfigReferenceDefaults(t *testing.T) {
	t.Parallel()
	block := referenceBlock(t)
	var doc yaml.Node
	if err := yaml.Unmarshal(block, &doc); err != nil {
		t.Fatal(err)
	}
	want := configured(t, &doc)
	checked := 0
	for _, path := range leaves(doc.Content[0], "") {
		if slices.Contains(referenceExamples, path) {
			continue
		}
		checked++
		without := clone(&doc)
		remove(without.Content[0], path)
		raw, err := yaml.Marshal(without)
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.ParseLookup(raw, referenceEnv)
		if err != nil {
			t.Errorf("%s: without %s the reference's block is refused (%v): give the default, or list it in referenceExamples", referencePath, path, err)
			continue
		}
		if got := canonical(t, c); got != want {
			t.Errorf("%s: the Configuration reference gives %s a value that is not its default (leaving it out configures something else): fix the value, or list it in referenceExamples", referencePath, path)
		}
	}
	if checked == 0 {
		t.Fatal("no default checked")
	}
	for _, ex := range referenceExamples {
		if !slices.Contains(leaves(doc.Content[0], ""), ex) {
			t.Errorf("referenceExamples lists %s, which the reference's block does not give: remove it", ex)
		}
	}
}

// configured is the configuration doc gives, canonical.
func configured(t *testing.T, doc *yaml.Node) string {
	t.Helper()
	raw, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.ParseLookup(raw, referenceEnv)
	if err != nil {
		t.Fatalf("%s: the Configuration reference's YAML block is refused: %v", referencePath, err)
	}
	return canonical(t, c)
}

// canonical renders what c configures: the defaults applied outside
// Validate filled in (booleans that default to true, the log's, the
// alerts'), provider blocks (compared by YAML position) left out.
func canonical(t *testing.T, c *config.Config) string {
	t.Helper()
	on := func(b bool) *bool { return &b }
	c.Ingest.Batch, c.Ingest.Pace, c.Processing.Batch = on(c.BatchEnabled()), on(c.PaceEnabled()), on(c.ProcessingBatchEnabled())
	c.Log.Format, c.Log.Level = cmp.Or(c.Log.Format, "json"), cmp.Or(c.Log.Level, "info")
	for _, a := range c.Alerts {
		r := a.Rule()
		a.On, a.LagThreshold, a.MinInterval = r.On, config.Duration(r.LagThreshold), config.Duration(r.MinInterval)
	}
	for _, s := range c.Sources {
		s.Settings = nil
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// yamlFields lists, for typ and every struct type reachable from it, its
// YAML field names (inline provider blocks aside).
func yamlFields(typ reflect.Type) map[reflect.Type][]string {
	out := map[reflect.Type][]string{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[config.Duration]() {
			return
		}
		if _, done := out[typ]; done {
			return
		}
		out[typ] = []string{}
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			out[typ] = append(out[typ], name)
			walk(f.Type)
		}
	}
	walk(typ)
	return out
}

// documentedKeys records, per struct type, the fields node (a value of typ)
// gives.
func documentedKeys(node *yaml.Node, typ reflect.Type, seen map[reflect.Type]map[string]bool) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case node.Kind == yaml.SequenceNode && typ.Kind() == reflect.Slice:
		for _, item := range node.Content {
			documentedKeys(item, typ.Elem(), seen)
		}
	case node.Kind == yaml.MappingNode && typ.Kind() == reflect.Struct:
		if seen[typ] == nil {
			seen[typ] = map[string]bool{}
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			key := node.Content[i].Value
			for f := range typ.Fields() {
				if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key {
					seen[typ][key] = true
					documentedKeys(node.Content[i+1], f.Type, seen)
				}
			}
		}
	}
}

// leaves lists the paths of node's fields whose values are scalars or
// lists of scalars ("sources[0].destination.backoff.min"), provider blocks
// and where's values aside.
func leaves(node *yaml.Node, prefix string) []string {
	var out []string
	switch node.Kind {
	case yaml.SequenceNode:
		for i, item := range node.Content {
			if item.Kind == yaml.MappingNode {
				out = append(out, leaves(item, fmt.Sprintf("%s[%d]", prefix, i))...)
			}
		}
	case yaml.MappingNode:
		provider := ""
		for i := 0; i+1 < len(node.Content); i += 2 {
			if node.Content[i].Value == "provider" {
				provider = node.Content[i+1].Value
			}
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			key, value := node.Content[i].Value, node.Content[i+1]
			path := strings.TrimPrefix(prefix+"."+key, ".")
			switch {
			case key == provider:
			case key == "where" || value.Kind == yaml.ScalarNode ||
				(value.Kind == yaml.SequenceNode && (len(value.Content) == 0 || value.Content[0].Kind == yaml.ScalarNode)):
				out = append(out, path)
			default:
				out = append(out, leaves(value, path)...)
			}
		}
	}
	return out
}

// remove deletes the field at path (as leaves names it) from node.
func remove(node *yaml.Node, path string) {
	parts := strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == '[' || r == ']' })
	for n, part := range parts {
		if node.Kind == yaml.SequenceNode {
			var i int
			fmt.Sscan(part, &i)
			node = node.Content[i]
			continue
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			if node.Content[i].Value != part {
				continue
			}
			if n == len(parts)-1 {
				node.Content = slices.Delete(node.Content, i, i+2)
				return
			}
			node = node.Content[i+1]
			break
		}
	}
}

// clone is a deep copy of node.
func clone(node *yaml.Node) *yaml.Node {
	c := *node
	c.Content = make([]*yaml.Node, len(node.Content))
	for i, child := range node.Content {
		c.Content[i] = clone(child)
	}
	return &c
}
