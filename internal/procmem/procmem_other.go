//go:build !linux

package procmem

import "errors"

// ReleaseExecutablePages is Linux's only (madvise(MADV_PAGEOUT)); elsewhere it
// does nothing and says so.
func ReleaseExecutablePages() (Released, error) {
	return Released{}, errors.ErrUnsupported
}
