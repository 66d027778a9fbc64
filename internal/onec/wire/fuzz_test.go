package wire

import (
	"bytes"
	"testing"
)

// FuzzReadLimited: any body, any limit, any announced length: the body comes back
// whole when it fits, and otherwise the answer is too large; never more than the
// limit is kept.
func FuzzReadLimited(f *testing.F) {
	f.Add([]byte(`{"orders":[]}`), int64(13), int64(-1))
	f.Add([]byte(`{"orders":[]}`), int64(12), int64(13))
	f.Add([]byte{}, int64(1), int64(0))
	f.Add(bytes.Repeat([]byte("x"), 9000), int64(8999), int64(-1))
	f.Fuzz(func(t *testing.T, body []byte, limit, announced int64) {
		limit = 1 + (limit%(1<<16)+(1<<16))%(1<<16)
		if announced >= 0 {
			announced = int64(len(body)) // the transport holds a body to its Content-Length
		} else {
			announced = -1
		}
		got, err := readLimited(bytes.NewReader(body), announced, limit)
		switch {
		case int64(len(body)) <= limit:
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("%d bytes, limit %d: %d bytes, %v; want the body", len(body), limit, len(got), err)
			}
		case !TooLarge(err) || got != nil:
			t.Fatalf("%d bytes, limit %d: %d bytes, %v; want too large", len(body), limit, len(got), err)
		}
	})
}
