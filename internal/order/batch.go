package order

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Item is one order read from a batch: the order, or why it was rejected.
type Item struct {
	Line  int // 1-based line of the input where the order starts
	Order Order
	Err   error
}

// ReadBatch reads canonical orders from r: one JSON object (pretty-printed or not),
// a JSON array of objects, or JSON lines (one object per line; blank lines and lines
// starting with # are skipped). A bad order never hides the good ones: each item
// carries its own error, and only a failure to read r is returned as an error.
func ReadBatch(r io.Reader) ([]Item, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read orders: %w", err)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, nil
	}
	start := 1 + bytes.Count(data[:bytes.Index(data, trimmed[:1])], []byte("\n"))
	switch {
	case trimmed[0] == '[' && json.Valid(trimmed):
		var raws []json.RawMessage
		if err := json.Unmarshal(trimmed, &raws); err != nil {
			return []Item{{Line: start, Err: &ValidationError{Problems: []FieldError{{Field: "(document)", Message: err.Error()}}}}}, nil
		}
		items := make([]Item, len(raws))
		for i, raw := range raws {
			o, err := Parse(raw)
			items[i] = Item{Line: start, Order: o, Err: err}
		}
		return items, nil
	case trimmed[0] == '{' && json.Valid(trimmed):
		o, err := Parse(trimmed)
		return []Item{{Line: start, Order: o, Err: err}}, nil
	}
	var items []Item
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		o, err := Parse(line)
		items = append(items, Item{Line: n, Order: o, Err: err})
	}
	if err := sc.Err(); err != nil {
		return items, fmt.Errorf("read orders: line %d: %w", n+1, err)
	}
	return items, nil
}
