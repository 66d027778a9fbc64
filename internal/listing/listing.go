// Package listing reads a listing page by page, each after the last row of the one
// before (keyset paging), and writes it as it comes: a command lists a whole journal,
// outbox or inbox in bounded memory, and its output streams.
package listing

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
)

// PageSize is how many rows Each reads at a time.
const PageSize = 500

// Each reads a listing page by page, each after the last row of the one before
// (fetch's after, nil for the first), at most n rows a page, and hands each page to
// emit, until limit rows (0: no limit) or the listing's end.
func Each[T any](limit int, fetch func(after *T, n int) ([]T, error), emit func([]T) error) error {
	return Pages(PageSize, limit, fetch, emit)
}

// Pages is Each with pages of size rows.
func Pages[T any](size, limit int, fetch func(after *T, n int) ([]T, error), emit func([]T) error) error {
	var after *T
	for done := 0; limit == 0 || done < limit; {
		n := size
		if limit > 0 {
			n = min(n, limit-done)
		}
		page, err := fetch(after, n)
		if err != nil {
			return err
		}
		page = page[:min(len(page), n)]
		if err := emit(page); err != nil {
			return err
		}
		done += len(page)
		if len(page) < n {
			return nil
		}
		last := page[len(page)-1]
		after = &last
	}
	return nil
}

// jsonArray writes a JSON array one element at a time, as a whole one is written
// by an encoder with two spaces of indent: indented by two spaces, "[]" when empty.
type jsonArray struct {
	w io.Writer
	n int
}

func (j *jsonArray) add(v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("  ", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	sep := ",\n  "
	if j.n == 0 {
		sep = "[\n  "
	}
	j.n++
	_, err := io.WriteString(j.w, sep+strings.TrimSuffix(b.String(), "\n"))
	return err
}

// WriteJSON writes every page pages yields as one JSON array, each element
// turned by row, as the pages come.
func WriteJSON[T any](w io.Writer, pages func(emit func([]T) error) error, row func(T) any) error {
	arr := &jsonArray{w: w}
	if err := pages(func(items []T) error {
		for _, it := range items {
			if err := arr.add(row(it)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return arr.close()
}

func (j *jsonArray) close() error {
	end := "\n]\n"
	if j.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(j.w, end)
	return err
}
