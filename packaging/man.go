package packaging

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"time"
)

// Paths of the generated files inside the package.
const (
	ManPath        = "/usr/share/man/man1/ordersync.1.gz"
	BashCompletion = "/usr/share/bash-completion/completions/ordersync"
	ZshCompletion  = "/usr/share/zsh/vendor-completions/_ordersync"
	FishCompletion = "/usr/share/fish/vendor_completions.d/ordersync.fish"
)

// Help runs the binary with args (a command's path and --help) and returns what it
// printed.
type Help func(args ...string) (string, error)

// Subcommands are the commands the help text of one command lists under
// "Available Commands:", without cobra's help and completion.
func Subcommands(help string) []string {
	var names []string
	in := false
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.TrimSpace(line) == "Available Commands:":
			in = true
		case in && strings.TrimSpace(line) == "":
			in = false
		case in:
			if f := strings.Fields(line); len(f) > 0 && f[0] != "help" && f[0] != "completion" {
				names = append(names, f[0])
			}
		}
	}
	return names
}

// ManPage is ordersync(1), made of the binary's own help: the root's text as the
// description, and every command's --help (each group and each command below it)
// as a subsection, so the page says what the binary says. date is the page's date
// (the source date, for a reproducible package).
func ManPage(version string, date time.Time, help Help) ([]byte, error) {
	root, err := help("--help")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, ".TH ORDERSYNC 1 %q %q \"User Commands\"\n", date.UTC().Format("2006-01-02"), "ordersync "+version)
	b.WriteString(".SH NAME\nordersync \\- bring marketplace and CRM orders into 1C:Enterprise exactly once\n")
	b.WriteString(".SH SYNOPSIS\n.B ordersync\n.I command\n.RI [ flags ]\n")
	b.WriteString(".SH DESCRIPTION\n")
	desc, _, _ := strings.Cut(root, "\nUsage:")
	for _, para := range strings.Split(strings.TrimSpace(desc), "\n\n") {
		b.WriteString(".PP\n" + escapeText(strings.Join(strings.Fields(para), " ")) + "\n")
	}
	b.WriteString(".PP\nEvery command reads the configuration file (\\fB\\-\\-config\\fR, default\n" +
		".I /etc/ordersync/ordersync.yaml\nwhen present) and the ORDERSYNC_ environment variables.\n")
	b.WriteString(".SH COMMANDS\n")
	var walk func(path []string, help string) error
	walk = func(path []string, text string) error {
		if len(path) > 0 {
			fmt.Fprintf(&b, ".SS \"ordersync %s\"\n", strings.Join(path, " "))
			b.WriteString(".nf\n")
			for _, line := range strings.Split(strings.TrimRight(stripMore(text), "\n"), "\n") {
				b.WriteString(escapeLine(line) + "\n")
			}
			b.WriteString(".fi\n")
		}
		for _, sub := range Subcommands(text) {
			p := append(append([]string(nil), path...), sub)
			t, err := help(append(p, "--help")...)
			if err != nil {
				return err
			}
			if err := walk(p, t); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(nil, root); err != nil {
		return nil, err
	}
	b.WriteString(`.SH EXIT STATUS
.TP
.B 0
success
.TP
.B 1
an operational failure: the database or 1C did not answer, an operation did not end
done, an order was rejected
.TP
.B 2
a usage or configuration error; the unit does not restart the service after it
.TP
.B 3
.B ordersync status
only: something needs attention
.SH FILES
.TP
.I /etc/ordersync/ordersync.yaml
the configuration
.TP
.I /etc/ordersync/onec-password
the 1C password, handed to the service as the credential onec-password
.TP
.I /var/lib/ordersync/ordersync.db
the embedded SQLite journal, when no database.url is set
.TP
.I /usr/share/doc/ordersync/
README.md, the reference pages under docs/, the example configuration with every key,
the 1C side under deploy/1c/, the example drop-in deploy/systemd/credentials.conf
.SH SEE ALSO
.BR systemctl (1),
.BR journalctl (1),
.I /usr/share/doc/ordersync/docs/cli.md
`)
	return b.Bytes(), nil
}

// stripMore drops cobra's closing `Use "ordersync … --help" for more information`
// and the "Global Flags:" of every command (--config, which DESCRIPTION names).
func stripMore(help string) string {
	var lines []string
	global := false
	for _, line := range strings.Split(strings.TrimRight(help, "\n"), "\n") {
		switch {
		case line == "Global Flags:":
			global = true
		case global && strings.TrimSpace(line) == "":
			global = false
		case !global:
			lines = append(lines, line)
		}
	}
	if n := len(lines); n > 0 && strings.HasPrefix(lines[n-1], "Use \"") {
		lines = lines[:n-1]
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// escapeText escapes roff's backslash and a control character at a line's start.
func escapeText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// escapeLine is one line of a no-fill block.
func escapeLine(s string) string {
	if s == "" {
		return ""
	}
	return escapeText(s)
}

// Gzip compresses a man page as Debian keeps them: best compression, no name and
// no time in the header, so that the package is reproducible.
func Gzip(data []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
