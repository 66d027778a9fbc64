package config

import (
	"bytes"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// mask replaces a secret in the effective configuration.
const mask = "***"

// Effective returns the configuration as YAML, in struct order, with every key
// (defaults included), durations as Go durations (30s), and secrets masked: a
// secret that is set prints as '***', a URL prints with its password replaced
// (postgres://ordersync:***@host/db). Loading the output with the secrets restored
// gives the same configuration.
func (c *Config) Effective() ([]byte, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	sections := map[string]*yaml.Node{"": root}
	v := reflect.ValueOf(c).Elem()
	for _, f := range keys().fields {
		parentKey, name := "", f.key
		if i := strings.LastIndexByte(f.key, '.'); i >= 0 {
			parentKey, name = f.key[:i], f.key[i+1:]
		}
		parent := section(sections, parentKey)
		var val yaml.Node
		if err := val.Encode(effectiveValue(f, v.FieldByIndex(f.index))); err != nil {
			return nil, fmt.Errorf("config: effective %s: %w", f.key, err)
		}
		parent.Content = append(parent.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, &val)
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

// section returns the mapping node for a dotted section key, creating it (and its
// parents) in order of first use.
func section(sections map[string]*yaml.Node, key string) *yaml.Node {
	if n, ok := sections[key]; ok {
		return n
	}
	parentKey, name := "", key
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		parentKey, name = key[:i], key[i+1:]
	}
	parent := section(sections, parentKey)
	n := &yaml.Node{Kind: yaml.MappingNode}
	parent.Content = append(parent.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, n)
	sections[key] = n
	return n
}

func effectiveValue(f field, v reflect.Value) any {
	if f.typ == durationType {
		return formatDuration(time.Duration(v.Int()))
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
