package config

import "strings"

// Error is a configuration error: one or more problems, each naming its key. The
// command line maps it to exit code 2 (usage or configuration error):
//
//	var cerr *config.Error
//	if errors.As(err, &cerr) { … }
type Error struct {
	Problems []Problem
}

// Problem is one thing wrong with the configuration.
type Problem struct {
	// Key is the configuration key, such as "onec.timeout", or "" for a problem
	// with the file as a whole (missing, not YAML).
	Key string
	// Message says what is wrong and, where it helps, what is expected. It never
	// contains a secret.
	Message string
}

func (p Problem) String() string {
	if p.Key == "" {
		return p.Message
	}
	return p.Key + ": " + p.Message
}

// Error prints one problem per line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problems collects Problems in the order found.
type problems []Problem

// add records a problem; a key or message in the key table's terms is put back in
// the user's (userKey).
func (p *problems) add(key, msg string) {
	*p = append(*p, Problem{Key: userKey(key), Message: userKey(msg)})
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return &Error{Problems: p}
}
