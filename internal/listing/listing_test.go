package listing

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// Pages reads a listing in pages up to a limit, and WriteJSON streams what a whole
// encoding writes.
func TestPagesAndJSONArray(t *testing.T) {
	t.Parallel()
	items := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	fetch := func(after *int, n int) ([]int, error) {
		i := 0
		if after != nil {
			i = slices.Index(items, *after) + 1
		}
		return items[i:min(len(items), i+n)], nil
	}
	for _, tc := range []struct {
		limit int
		pages []int
	}{{0, []int{3, 3, 3, 1}}, {7, []int{3, 3, 1}}, {9, []int{3, 3, 3}}, {2, []int{2}}, {20, []int{3, 3, 3, 1}}} {
		var got []int
		var sizes []int
		if err := Pages(3, tc.limit, fetch, func(p []int) error {
			got = append(got, p...)
			sizes = append(sizes, len(p))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want := items[:min(len(items), max(tc.limit, 0))]
		if tc.limit == 0 {
			want = items
		}
		if !slices.Equal(got, want) || !slices.Equal(sizes, tc.pages) {
			t.Errorf("limit %d: %v in pages %v, want %v in %v", tc.limit, got, sizes, want, tc.pages)
		}
	}
	type row struct {
		Key  string         `json:"key"`
		HTML string         `json:"html"`
		M    map[string]any `json:"m"`
	}
	for _, rows := range [][]row{{}, {{Key: "a", HTML: "<b>&", M: map[string]any{"x": []int{1}}}}, {{Key: "a"}, {Key: "b"}, {Key: "c"}}} {
		var whole, streamed bytes.Buffer
		enc := json.NewEncoder(&whole)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rows); err != nil {
			t.Fatal(err)
		}
		pages := func(emit func([]row) error) error { return emit(rows) }
		if err := WriteJSON(&streamed, pages, func(r row) any { return r }); err != nil {
			t.Fatal(err)
		}
		if whole.String() != streamed.String() {
			t.Errorf("streamed JSON differs:\n%s\nwant\n%s", streamed.String(), whole.String())
		}
	}
}
