package config

import (
	"bytes"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ordersync/ordersync/internal/bytesize"
)

// mask replaces a secret in the effective configuration.
const mask = "***"

// Effective returns the configuration as YAML, in struct order, with every key
// (defaults included), durations as Go durations (30s), sizes with a unit (1MiB;
// see internal/bytesize), lists in flow style ([order.created, order.cancelled]), the entries
// of a map section by name, a map of strings by name ({} when empty), the entries
// of a list of sections in order ([] when none), and secrets masked: a secret that
// is set prints as '***' (each item of a list of secrets), a URL prints with its
// password replaced (postgres://ordersync:***@host/db). Loading the output with the secrets restored
// gives the same configuration.
func (c *Config) Effective() ([]byte, error) {
	root, err := effectiveSection(reflect.ValueOf(c).Elem(), "", keys().byKey)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("config: effective: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: effective: %w", err)
	}
	return buf.Bytes(), nil
}

// effectiveSection returns the mapping node of a section, its keys in struct order.
// pattern is the section's key in the key table's terms ("relay.destinations.*"),
// fields the table's fields by key: keys().byKey, or the keys of a list's entries.
func effectiveSection(v reflect.Value, pattern string, fields map[string]*field) (*yaml.Node, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	typ := v.Type()
	for i := range typ.NumField() {
		sf := typ.Field(i)
		name := sf.Tag.Get("koanf")
		if name == "" || !sf.IsExported() {
			continue
		}
		key := name
		if pattern != "" {
			key = pattern + "." + name
		}
		fv := v.Field(i)
		var val *yaml.Node
		var err error
		switch sf.Type.Kind() {
		case reflect.Struct:
			val, err = effectiveSection(fv, key, fields)
		case reflect.Map:
			if f := fields[key]; f != nil && f.isStringMap() {
				val = effectiveStringMap(fv)
				break
			}
			val = &yaml.Node{Kind: yaml.MappingNode}
			names := make([]string, 0, fv.Len())
			for _, k := range fv.MapKeys() {
				names = append(names, k.String())
			}
			slices.Sort(names)
			for _, entry := range names {
				en, err := effectiveSection(fv.MapIndex(reflect.ValueOf(entry)), key+".*", fields)
				if err != nil {
					return nil, err
				}
				val.Content = append(val.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: entry}, en)
			}
			if strings.HasPrefix(name, "~") {
				// The further accounts of a type print where they are written,
				// connectors.<name>, with their type.
				n.Content = append(n.Content, val.Content...)
				continue
			}
		default:
			f := fields[key]
			if f.entries != nil {
				val, err = effectiveEntries(f, fv)
				break
			}
			val = new(yaml.Node)
			if err := val.Encode(effectiveValue(*f, fv)); err != nil {
				return nil, fmt.Errorf("config: effective %s: %w", key, err)
			}
			if f.isList() {
				val.Style = yaml.FlowStyle
			}
		}
		if err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, val)
	}
	return n, nil
}

// effectiveStringMap returns a map of strings, its names sorted; {} when empty.
func effectiveStringMap(v reflect.Value) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	names := make([]string, 0, v.Len())
	for _, k := range v.MapKeys() {
		names = append(names, k.String())
	}
	slices.Sort(names)
	for _, name := range names {
		n.Content = append(n.Content, stringNode(name), stringNode(v.MapIndex(reflect.ValueOf(name)).String()))
	}
	if len(names) == 0 {
		n.Style = yaml.FlowStyle
	}
	return n
}

// stringNode is a scalar that reads back as the string s: quoted when YAML would
// take it for something else (1, null, or << for a merge key).
func stringNode(s string) *yaml.Node {
	n := &yaml.Node{}
	_ = n.Encode(s) // a string always encodes
	if n.Tag != "!!str" {
		n.Tag, n.Style = "!!str", yaml.DoubleQuotedStyle
	}
	return n
}

// effectiveEntries returns a list of sections, each entry's keys in struct order;
// [] when there is none.
func effectiveEntries(f *field, v reflect.Value) (*yaml.Node, error) {
	n := &yaml.Node{Kind: yaml.SequenceNode}
	for i := range v.Len() {
		en, err := effectiveSection(v.Index(i), "", f.entries.byKey)
		if err != nil {
			return nil, err
		}
		n.Content = append(n.Content, en)
	}
	if v.Len() == 0 {
		n.Style = yaml.FlowStyle
	}
	return n, nil
}

func effectiveValue(f field, v reflect.Value) any {
	if f.typ == durationType {
		return formatDuration(time.Duration(v.Int()))
	}
	if f.typ == sizeType {
		return sizeValue(v.Int())
	}
	if f.isList() {
		list := make([]string, v.Len())
		for i := range list {
			list[i] = v.Index(i).String()
			if f.secret != "" && list[i] != "" {
				list[i] = mask
			}
		}
		return list
	}
	switch f.secret {
	case "true":
		if v.String() == "" {
			return ""
		}
		return mask
	case "url":
		return maskURL(v.String())
	}
	return v.Interface()
}

// sizeValue is a size in the effective configuration: its unit form, or a bare
// number of bytes as a YAML number.
func sizeValue(n int64) any {
	if s := bytesize.Text(n); strings.ContainsFunc(s, func(r rune) bool { return r > '9' }) {
		return s
	}
	return n
}

// maskURL replaces the password of a URL, in its user information or in a password
// query parameter, by ***. A value that is not a URL is masked whole.
func maskURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || !strings.Contains(s, "://") {
		return mask
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, part := range parts {
			name, _, _ := strings.Cut(part, "=")
			if n, err := url.QueryUnescape(name); err != nil || strings.EqualFold(n, "password") {
				parts[i] = name + "=" + mask
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if u.User == nil {
		return u.String()
	}
	if _, ok := u.User.Password(); !ok {
		return u.String()
	}
	user := url.User(u.User.Username()).String()
	u.User = nil
	// url.UserPassword would escape the asterisks; put the user information back by hand.
	return u.Scheme + "://" + user + ":" + mask + "@" + strings.TrimPrefix(u.String(), u.Scheme+"://")
}
