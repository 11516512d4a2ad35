package config

import (
	"math"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// YAML decoding truncates a number with a fraction into a whole-number
// field (workers: 1.5 becomes 1, max_body_bytes: 1.5 becomes 1 and refuses
// every webhook). wholeNumbers refuses it instead, naming the field, by
// walking the document alongside the Go type it decodes into.

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// wholeNumbers checks the value nodes of n (decoded into t, at path) that
// land in integer fields: a number with a fraction is an error.
func wholeNumbers(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		return wholeNumbers(n.Content[0], t, path)
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || t == reflect.TypeFor[yaml.Node]() {
		return nil // decodes itself (durations, resolvers) or is kept as a node
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" {
			if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err == nil && f != math.Trunc(f) {
				return field(path, "want a whole number, not a number with a fraction")
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind == yaml.SequenceNode {
			for i, item := range n.Content {
				if err := wholeNumbers(item, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if err := wholeNumbers(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
					return err
				}
			}
		}
	case reflect.Struct:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if f, ok := yamlField(t, n.Content[i].Value); ok {
					if err := wholeNumbers(n.Content[i+1], f.Type, join(path, n.Content[i].Value)); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// yamlField is t's field that YAML key name decodes into.
func yamlField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == name || (tag == "" && strings.EqualFold(f.Name, name)) {
			return f, f.IsExported()
		}
	}
	return reflect.StructField{}, false
}
