// Package packaging builds ordersync's Debian package (make deb): the version rule, the
// packaged copy of the systemd unit, and the checks both the builder
// (packaging/cmd/mkdeb) and the package's test rely on. nfpm itself (nfpm.yaml) is run
// from the Go module proxy at a pinned version; it is not a dependency of this module.
package packaging

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Paths inside the package.
const (
	BinPath    = "/usr/bin/ordersync"
	UnitPath   = "/lib/systemd/system/ordersync.service"
	ConfigPath = "/etc/ordersync/ordersync.yaml"
	DocDir     = "/usr/share/doc/ordersync"
)

// Sources in the repository.
const (
	// ConfigSource is the configuration the package installs as ConfigPath: the
	// embedded SQLite journal, the 1C URL and password to fill, the rest commented.
	// configs/ordersync.example.yaml (every key) is among the docs.
	ConfigSource = "deploy/ordersync.yaml"
	// DropInSource is the example drop-in with a LoadCredential= line for each
	// secret besides the 1C password; it is installed among the docs.
	DropInSource = "deploy/systemd/credentials.conf"
	// DocUnit is where, under DocDir, the packaged unit is copied, for the docs'
	// links to deploy/systemd/ordersync.service.
	DocUnit = "deploy/systemd/ordersync.service"
)

// CredentialsDir is where systemd places the credentials the unit loads.
const CredentialsDir = "/run/credentials/ordersync.service/"

// docGlobs are the repository's files the package installs under DocDir, each at its
// path in the repository, so that the links between them hold.
var docGlobs = []string{
	"README.md", "docs/*.md", "docs/*.png",
	"configs/ordersync.example.yaml",
	ConfigSource, // as the package installed it, beside the copy in /etc you edit
	"deploy/1c/README.md", "deploy/1c/openapi.yaml", "deploy/1c/ordersync/*",
	"deploy/prometheus/*", "deploy/grafana/*",
	DropInSource,
}

// DocFiles are the documentation files the package installs, by their path under
// DocDir (the repository's), with their source under root. The packaged unit
// (DocUnit) and the copyright file are made by the builder and are not in it.
func DocFiles(root string) (map[string]string, error) {
	files := map[string]string{}
	for _, g := range docGlobs {
		matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(g)))
		if err != nil {
			return nil, err
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("docs: nothing matches %s", g)
		}
		for _, m := range matches {
			rel, err := filepath.Rel(root, m)
			if err != nil {
				return nil, err
			}
			files[filepath.ToSlash(rel)] = m
		}
	}
	return files, nil
}

var (
	// A Markdown link or image: [text](target) or ![alt](target "title").
	mdLinkRe = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// A reference definition: [name]: target
	mdRefRe = regexp.MustCompile(`(?m)^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
)

// RelativeLinks are the targets of the relative links of a Markdown text, without
// their #fragment: neither a URL with a scheme nor a link within the page. Code
// blocks and code spans are not read.
func RelativeLinks(md []byte) []string {
	var text bytes.Buffer
	fenced := false
	for _, line := range strings.Split(string(md), "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t") {
			continue
		}
		text.WriteString(stripCodeSpans(line) + "\n")
	}
	var links []string
	for _, re := range []*regexp.Regexp{mdLinkRe, mdRefRe} {
		for _, m := range re.FindAllStringSubmatch(text.String(), -1) {
			target, _, _ := strings.Cut(strings.Trim(m[1], "<>"), "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if !slices.Contains(links, target) {
				links = append(links, target)
			}
		}
	}
	sort.Strings(links)
	return links
}

// stripCodeSpans removes `code spans` from a line.
func stripCodeSpans(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Credentials are the names of the credentials a unit loads (LoadCredential=
// name:file, in [Service]), with their files.
func Credentials(unit []byte) map[string]string {
	m := map[string]string{}
	section := ""
	for _, line := range strings.Split(string(unit), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		if v, ok := strings.CutPrefix(line, "LoadCredential="); ok && section == "[Service]" {
			id, file, _ := strings.Cut(v, ":")
			m[id] = file
		}
	}
	return m
}

var credentialKeyRe = regexp.MustCompile(`(?m)^\s*([a-z0-9_]+_file):\s*` + regexp.QuoteMeta(CredentialsDir) + `([A-Za-z0-9._-]+)\s*$`)

// ConfigCredentials are the credentials a configuration file reads: the names of the
// files its (uncommented) *_file keys give under CredentialsDir, with the key.
func ConfigCredentials(config []byte) map[string]string {
	m := map[string]string{}
	for _, k := range credentialKeyRe.FindAllSubmatch(config, -1) {
		m[string(k[2])] = string(k[1])
	}
	return m
}

// CheckAgreement checks that the packaged unit, configuration and postinst say the
// same: the unit loads exactly the credentials the configuration reads (a
// LoadCredential= whose file is missing keeps the unit from starting, and a *_file
// the unit does not load fails `ordersync run`), each from /etc/ordersync/<name>;
// postinst names each of those files, and the example drop-in for the others.
func CheckAgreement(unit, config, postinst []byte) error {
	loads, reads := Credentials(unit), ConfigCredentials(config)
	var problems []string
	for id, file := range loads {
		if _, ok := reads[id]; !ok {
			problems = append(problems, fmt.Sprintf("the unit loads the credential %s, which %s does not read: it would keep the unit from starting for nothing", id, ConfigSource))
		}
		if want := "/etc/ordersync/" + id; file != want {
			problems = append(problems, fmt.Sprintf("the unit loads %s from %s, not %s", id, file, want))
		}
		if !bytes.Contains(postinst, []byte("/etc/ordersync/"+id)) {
			problems = append(problems, fmt.Sprintf("postinst does not say to put the credential %s in /etc/ordersync/%s", id, id))
		}
	}
	for id, key := range reads {
		if _, ok := loads[id]; !ok {
			problems = append(problems, fmt.Sprintf("%s reads %s from %s%s, which the unit does not load", ConfigSource, key, CredentialsDir, id))
		}
	}
	if !bytes.Contains(postinst, []byte(DocDir+"/"+DropInSource)) {
		problems = append(problems, "postinst does not name the example drop-in "+DocDir+"/"+DropInSource)
	}
	if len(loads) == 0 {
		problems = append(problems, "the unit loads no credential: not even the 1C password")
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return fmt.Errorf("packaging: %s", strings.Join(problems, "; "))
	}
	return nil
}

// Arch is the only architecture the package is built for.
const Arch = "amd64"

// RepoBinPath is where deploy/systemd/ordersync.service expects a hand-installed binary.
// The packaged unit names BinPath instead: a Debian package never installs into /usr/local.
const RepoBinPath = "/usr/local/bin/ordersync"

var (
	describeRe = regexp.MustCompile(`^(.+)-([0-9]+)-g([0-9a-f]{4,64})$`)
	hashRe     = regexp.MustCompile(`^[0-9a-f]{4,64}$`)
	// An upstream version without a Debian revision: no hyphen, and a digit first.
	debianRe = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)
)

// DebianVersion turns the output of `git describe --tags --always --dirty` (what the
// Makefile builds the binary with) into a valid Debian version that sorts the same way:
//
//	v1.2.3                   1.2.3
//	v1.2.3-rc1               1.2.3~rc1             (before 1.2.3)
//	v1.2.3-4-gabc1234        1.2.3+4.gabc1234      (after 1.2.3, before 1.2.4)
//	abc1234 (no tag yet)     0.0.0~gitabc1234      (before any tagged release)
//	v1.2.3-dirty             1.2.3+0.dirty         (before 1.2.3+1.g…)
//	…-4-gabc1234-dirty       …+4.gabc1234+dirty
//	dev (no git)             0.0.0~dev
//
// A tag that does not start with a digit (after a leading v) is put behind "0.0.0~".
func DebianVersion(describe string) (string, error) {
	d := strings.TrimSpace(describe)
	if d == "" {
		return "", fmt.Errorf("empty version")
	}
	d, dirty := strings.CutSuffix(d, "-dirty")
	var v string
	switch m := describeRe.FindStringSubmatch(d); {
	case m != nil:
		v = upstream(m[1]) + "+" + m[2] + ".g" + m[3]
		if dirty {
			v += "+dirty"
		}
	case hashRe.MatchString(d):
		v = "0.0.0~git" + d
		if dirty {
			v += "+dirty"
		}
	default:
		v = upstream(d)
		if dirty {
			v += "+0.dirty" // before the tag's next commit, +1.g…
		}
	}
	if !debianRe.MatchString(v) {
		return "", fmt.Errorf("version %q makes %q, not a valid Debian version", describe, v)
	}
	return v, nil
}

// upstream maps a tag to Debian's alphabet: the leading v goes, a semver pre-release's
// hyphen becomes ~ (so it sorts before the release), any other character outside
// [A-Za-z0-9.+~] becomes a dot.
func upstream(tag string) string {
	if len(tag) > 1 && (tag[0] == 'v' || tag[0] == 'V') && tag[1] >= '0' && tag[1] <= '9' {
		tag = tag[1:]
	}
	var b strings.Builder
	sep := false // past the pre-release hyphen or the build metadata's +
	for i, r := range tag {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '~':
			b.WriteRune(r)
		case r == '+':
			sep = true // a hyphen in build metadata is no pre-release
			b.WriteRune(r)
		case r == '-' && !sep && i > 0:
			sep = true
			b.WriteRune('~')
		default:
			b.WriteRune('.')
		}
	}
	s := b.String()
	if s == "" || s[0] < '0' || s[0] > '9' {
		s = "0.0.0~" + s
	}
	return s
}

// PackagedUnit is the repository's unit as the package installs it: the binary's path
// is BinPath, and a header says where the file comes from. It fails when the result does
// not pass CheckUnit.
func PackagedUnit(unit []byte) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# Installed by the ordersync Debian package from deploy/systemd/ordersync.service,\n")
	b.WriteString("# the binary's path made " + BinPath + ". An upgrade replaces this file:\n")
	b.WriteString("# change the service with `systemctl edit ordersync` (a drop-in in\n")
	b.WriteString("# /etc/systemd/system/ordersync.service.d/), not here.\n#\n")
	b.Write(bytes.ReplaceAll(unit, []byte(RepoBinPath), []byte(BinPath)))
	out := b.Bytes()
	if err := CheckUnit(out); err != nil {
		return nil, err
	}
	return out, nil
}

// CheckUnit checks what the package assumes of its unit: ExecStart= (and any other Exec
// line that runs ordersync) runs BinPath, and the service runs as a dynamic user with a
// StateDirectory=, so the maintainer scripts create no user and no directory. A unit
// that names a fixed User= would need postinst to create that user (and its state
// directory) first.
func CheckUnit(unit []byte) error {
	keys := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		if section != "[Service]" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		keys[strings.TrimSpace(k)] = append(keys[strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	if err := sc.Err(); err != nil {
		return err
	}
	starts := keys["ExecStart"]
	if len(starts) == 0 {
		return fmt.Errorf("unit: no ExecStart= in [Service]")
	}
	if cmd := ExecCommand(starts[len(starts)-1]); cmd != BinPath {
		return fmt.Errorf("unit: ExecStart= runs %q; the package installs the binary as %s (deploy/systemd/ordersync.service should name %s or %s)", cmd, BinPath, RepoBinPath, BinPath)
	}
	for k, vs := range keys {
		for _, v := range vs {
			if cmd := ExecCommand(v); strings.HasPrefix(k, "Exec") && path.Base(cmd) == "ordersync" && cmd != BinPath {
				return fmt.Errorf("unit: %s= runs %q; the package installs the binary as %s", k, cmd, BinPath)
			}
		}
	}
	if u := keys["User"]; len(u) > 0 {
		return fmt.Errorf("unit: User=%s: the package creates no user; with a fixed user its postinst must create it (adduser --system) and its state directory", u[len(u)-1])
	}
	if d := keys["DynamicUser"]; len(d) == 0 || !isTrue(d[len(d)-1]) {
		return fmt.Errorf("unit: no DynamicUser=yes: the package creates no user, so the service would run as root; set DynamicUser=yes or make postinst create a user")
	}
	if s := keys["StateDirectory"]; len(s) == 0 || s[len(s)-1] == "" {
		return fmt.Errorf("unit: no StateDirectory=: with DynamicUser=yes the journal (embedded SQLite) has nowhere to live that survives a restart")
	}
	return nil
}

// ExecCommand is the program an Exec*= value runs, without systemd's prefixes (-@:+!).
func ExecCommand(v string) string {
	v = strings.TrimLeft(strings.TrimSpace(v), "-@:+!|")
	cmd, _, _ := strings.Cut(v, " ")
	return cmd
}

func isTrue(v string) bool {
	switch strings.ToLower(v) {
	case "1", "yes", "y", "true", "t", "on":
		return true
	}
	return false
}
