package ui

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// ReadPassword reads the password for `ordersync ui hash-password` from in: on a
// terminal twice, without echo where the system allows (hidden reports it), the
// prompts on prompt (which also says when the echo could not be turned off); from
// a pipe one line. A trailing newline is not part of it.
func ReadPassword(in io.Reader, prompt io.Writer) ([]byte, error) {
	f, ok := in.(*os.File)
	if !ok || !isTerminal(f) {
		line, err := bufio.NewReader(in).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read the password from stdin: %w", err)
		}
		pw := strings.TrimRight(line, "\r\n")
		if pw == "" {
			return nil, errors.New("stdin holds no password (one line is read)")
		}
		return []byte(pw), nil
	}
	warned := false
	read := func(label string) (string, error) {
		fmt.Fprint(prompt, label)
		s, hidden, err := readHidden(f)
		if hidden {
			fmt.Fprintln(prompt) // the Enter was not echoed either
		} else if !warned {
			fmt.Fprintln(prompt, "(the password showed as typed: this terminal's echo could not be turned off)")
			warned = true
		}
		return s, err
	}
	first, err := read("Password: ")
	if err != nil {
		return nil, err
	}
	if first == "" {
		return nil, errors.New("the password is empty")
	}
	second, err := read("Again: ")
	if err != nil {
		return nil, err
	}
	if first != second {
		return nil, errors.New("the two passwords differ")
	}
	return []byte(first), nil
}

// readLine reads one line from f byte by byte: nothing after the newline is taken
// from the terminal.
func readLine(f *os.File) (string, error) {
	var b []byte
	var c [1]byte
	for {
		n, err := f.Read(c[:])
		if n == 1 {
			if c[0] == '\n' {
				break
			}
			b = append(b, c[0])
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read the password: %w", err)
		}
	}
	return strings.TrimRight(string(b), "\r"), nil
}
