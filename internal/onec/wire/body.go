package wire

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/ordersync/ordersync/internal/bytesize"
	"github.com/ordersync/ordersync/internal/onec"
)

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// answerOf is what exchange makes of a response read whole: raw is its body.
func answerOf(status int, raw []byte, header http.Header) Answer {
	return Answer{Status: status, Body: bytes.TrimPrefix(raw, utf8BOM), Header: header}
}

// tooLargeError is the cause of an answer over onec.max_response.
type tooLargeError struct {
	announced int64 // the Content-Length over the limit, or -1
	read      int64 // when not announced: the bytes read before the limit was passed
}

func (e *tooLargeError) Error() string {
	if e.announced >= 0 {
		return fmt.Sprintf("it announced %d bytes (Content-Length)", e.announced)
	}
	return fmt.Sprintf("reading stopped after %d bytes", e.read)
}

// TooLarge reports whether err is an answer over onec.max_response.
func TooLarge(err error) bool {
	var e *tooLargeError
	return errors.As(err, &e)
}

// readBody reads the body of hr, at most limit bytes of it: a longer body is a
// *tooLargeError, read no further than limit+1 bytes (or not at all when its
// Content-Length says so). With a Content-Length the answer is held once, in one
// allocation of its size.
func readBody(hr *http.Response, limit int64) ([]byte, error) {
	var body io.Reader = hr.Body
	announced := hr.ContentLength
	if strings.EqualFold(hr.Header.Get("Content-Encoding"), "gzip") && !hr.Uncompressed && announced != 0 {
		// A gzip body the transport did not ask for (and so did not decode), as resty
		// would read it; the limit bounds what it inflates to.
		zr, err := gzip.NewReader(hr.Body)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		body, announced = zr, -1
	}
	return readLimited(body, announced, limit)
}

// readLimited reads r to its end if it holds at most limit bytes; announced is
// its length when known (the transport ends the body there), else -1. A known
// length is read into one buffer of that size; an unknown one as io.ReadAll does
// (growing chunks, then one buffer of the final size), no further than limit+1.
func readLimited(r io.Reader, announced, limit int64) ([]byte, error) {
	if announced > limit {
		return nil, &tooLargeError{announced: announced}
	}
	if announced >= 0 {
		buf := make([]byte, announced)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		var one [1]byte
		switch n, err := io.ReadFull(r, one[:]); {
		case n > 0:
			return nil, fmt.Errorf("the body goes on beyond its Content-Length %d", announced)
		case err != io.EOF:
			return nil, err
		}
		return buf, nil
	}
	stop := limit
	if stop < math.MaxInt64 {
		stop++ // one byte more than the limit tells a body of exactly the limit from a longer one
	}
	buf, err := io.ReadAll(io.LimitReader(r, stop))
	switch {
	case err != nil:
		return nil, err
	case int64(len(buf)) > limit:
		return nil, &tooLargeError{announced: -1, read: int64(len(buf))}
	}
	return buf, nil
}

// overLimit classifies an answer whose body is larger than onec.max_response: not
// read, so nothing in it can be judged.
func (c *Conn) overLimit(k Call, status int, cause error) *onec.Error {
	e := &onec.Error{Op: k.Op, Path: k.Path, Status: status, Err: cause}
	msg := fmt.Sprintf("1C's answer to %s %s is larger than onec.max_response (%s)", k.Method, k.Path, bytesize.Format(c.cfg.MaxResponse))
	switch {
	case k.Idempotent():
		e.Class = onec.Transient
		msg += ", so it was not read; the operation is tried again later"
	case k.Op == "create":
		e.Class = onec.Unknown
		msg += ", so it was not read; 1C did answer, so the order may have been created: it is looked up before it is created again"
	default:
		e.Class = onec.Unknown
		msg += ", so it was not read; 1C did answer, so it may have carried the request out"
	}
	e.Message = msg + " (raise onec.max_response if 1C's answers are rightly this large)"
	return e
}
