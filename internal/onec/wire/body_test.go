package wire

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

func TestReadLimited(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size, limit int
		announced   bool
		ok          bool
	}{
		{0, 1, false, true}, {0, 1, true, true}, {1, 1, false, true}, {2, 1, false, false}, {2, 1, true, false},
		{5000, 5000, false, true}, {5001, 5000, false, false}, {5000, 5000, true, true}, {100000, 99999, false, false},
	} {
		body := bytes.Repeat([]byte("x"), tc.size)
		announced := int64(-1)
		if tc.announced {
			announced = int64(tc.size)
		}
		for _, r := range []io.Reader{bytes.NewReader(body), iotest.OneByteReader(bytes.NewReader(body)), iotest.DataErrReader(bytes.NewReader(body))} {
			got, err := readLimited(r, announced, int64(tc.limit))
			switch {
			case tc.ok && (err != nil || !bytes.Equal(got, body)):
				t.Errorf("size %d, limit %d: %d bytes, %v; want the body", tc.size, tc.limit, len(got), err)
			case !tc.ok && !TooLarge(err):
				t.Errorf("size %d, limit %d: %d bytes, %v; want too large", tc.size, tc.limit, len(got), err)
			}
		}
	}
	if _, err := readLimited(iotest.ErrReader(io.ErrUnexpectedEOF), -1, 10); err != io.ErrUnexpectedEOF {
		t.Errorf("a failed read = %v, want it returned", err)
	}
}
