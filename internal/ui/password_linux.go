package ui

import (
	"os"

	"golang.org/x/sys/unix"
)

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// readHidden reads a line with the terminal's echo off, and puts the terminal back
// as it was.
func readHidden(f *os.File) (string, bool, error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		s, err := readLine(f)
		return s, false, err
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	quiet.Iflag |= unix.ICRNL
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		s, err := readLine(f)
		return s, false, err
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, old)
	s, err := readLine(f)
	return s, true, err
}
