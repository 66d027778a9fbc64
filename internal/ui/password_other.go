//go:build !linux

package ui

import (
	"os"

	"github.com/mattn/go-isatty"
)

func isTerminal(f *os.File) bool { return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()) }

// readHidden cannot turn the echo off here: the password shows as it is typed
// (the caller says so).
func readHidden(f *os.File) (string, bool, error) {
	s, err := readLine(f)
	return s, false, err
}
