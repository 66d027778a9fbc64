package packaging

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ManPage has a subsection for each command the help lists, below groups too, with
// the help's text escaped for roff; help and completion are left out.
func TestManPage(t *testing.T) {
	t.Parallel()
	helps := map[string]string{
		"--help":         "Does things.\n\nSecond paragraph.\n\nUsage:\n  x [command]\n\nAvailable Commands:\n  completion  c\n  help  h\n  grp  a group\n  leaf  a leaf\n\nFlags:\n  -h\n\nUse \"x [command] --help\" for more information about a command.\n",
		"grp --help":     "Group.\n\nAvailable Commands:\n  sub  a sub\n\nUse \"x grp [command] --help\" for more.\n",
		"grp sub --help": ".starts with a dot\nback\\slash\n",
		"leaf --help":    "Leaf -- with dashes\n",
	}
	var asked []string
	page, err := ManPage("1.2.3", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), func(args ...string) (string, error) {
		k := strings.Join(args, " ")
		asked = append(asked, k)
		return helps[k], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"--help", "grp --help", "grp sub --help", "leaf --help"}; !slices.Equal(asked, want) {
		t.Errorf("asked for %q, want %q", asked, want)
	}
	for _, want := range []string{`.TH ORDERSYNC 1 "2026-12-02" "ordersync 1.2.3"`, ".PP\nDoes things.\n.PP\nSecond paragraph.\n",
		`.SS "ordersync grp"`, `.SS "ordersync grp sub"`, `.SS "ordersync leaf"`, "\\&.starts with a dot\n", `back\eslash`, `Leaf \-\- with dashes`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	for _, not := range []string{`"ordersync help"`, `"ordersync completion"`, "for more information", "Global Flags", "config string"} {
		if strings.Contains(string(page), not) {
			t.Errorf("the page has %q:\n%s", not, page)
		}
	}
}

// checkManPage: the installed man page renders without a warning and has a
// subsection for every command the installed binary lists.
func checkManPage(t *testing.T, root string) {
	t.Helper()
	gz, err := os.ReadFile(filepath.Join(root, ManPath))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, BinPath)
	var commands []string
	var walk func(path []string)
	walk = func(path []string) {
		out, err := exec.Command(bin, append(path, "--help")...).Output()
		if err != nil {
			t.Fatalf("%s %s --help: %v", bin, strings.Join(path, " "), err)
		}
		for _, sub := range Subcommands(string(out)) {
			p := append(append([]string(nil), path...), sub)
			commands = append(commands, strings.Join(p, " "))
			walk(p)
		}
	}
	walk(nil)
	if !slices.Contains(commands, "status") || !slices.Contains(commands, "stock status") || len(commands) < 30 {
		t.Fatalf("the binary lists %d commands: %q", len(commands), commands)
	}
	for _, c := range commands {
		if !bytes.Contains(page, []byte(`.SS "ordersync `+c+`"`)) {
			t.Errorf("%s has no section for ordersync %s", ManPath, c)
		}
	}
	groff := need(t, "groff", "groff-base")
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z", "-k")
	cmd.Stdin = bytes.NewReader(page)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("groff -man -ww of %s: %v\n%s", ManPath, err, out)
	}
	t.Logf("%s: %d commands, %d bytes (%d compressed)", ManPath, len(commands), len(page), len(gz))
}

// checkBashCompletion: bash, with the installed completion loaded and the installed
// binary on its PATH, completes "ordersync st" to status and stock, and
// "ordersync stock st" to status.
func checkBashCompletion(t *testing.T, root string) {
	t.Helper()
	bash := need(t, "bash", "bash")
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"ordersync", "st"}, []string{"status", "stock"}},
		{[]string{"ordersync", "stock", "st"}, []string{"status"}},
	} {
		// bash-completion, which loads the file from its directory, provides
		// _get_comp_words_by_ref; where it is not installed, a stand-in for the
		// simple case of words split at blanks.
		script := `if [ -r /usr/share/bash-completion/bash_completion ]; then . /usr/share/bash-completion/bash_completion; fi
if ! declare -F _get_comp_words_by_ref >/dev/null; then
	_get_comp_words_by_ref() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
fi
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
__start_ordersync
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, append([]string{"--norc", "--noprofile", "-c", script, "bash", filepath.Join(root, BashCompletion)}, c.words...)...)
		cmd.Env = []string{"PATH=" + filepath.Join(root, "usr/bin") + ":/usr/bin:/bin", "HOME=" + t.TempDir()}
		var stderr bytes.Buffer // compopt complains outside a real completion
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				got = append(got, f[0])
			}
		}
		slices.Sort(got)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("bash completes %q to %q (%v), want %q:\n%s%s", c.words, got, err, c.want, out, stderr.Bytes())
		}
	}
}
