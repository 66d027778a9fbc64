// Command mkdeb builds ordersync's Debian package from a binary `make build` made:
//
//	go run ./packaging/cmd/mkdeb -version "$(git describe --tags --always --dirty)" \
//		-bin dist/build/ordersync -out dist
//
// (make deb does exactly that). It fills a staging directory with the binary, the
// repository's unit (binary path /usr/bin/ordersync), the configuration to start with
// (deploy/ordersync.yaml), the docs (packaging.DocFiles: README.md, docs/, the example
// configuration, deploy/1c, the Prometheus rules, the Grafana board, the example
// drop-in), a copyright file with the licences of every Go module in the binary, the
// man page and shell completions the binary's own help makes, and the maintainer
// scripts, checks that the unit, the configuration and postinst agree
// (packaging.CheckAgreement), then runs nfpm (pinned below, from the Go module proxy or its
// cache) on packaging/nfpm.yaml. It writes OUT/ordersync_<debian version>_amd64.deb and
// prints its path.
package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ordersync/ordersync/packaging"
)

// nfpmCmd is the nfpm that builds the package: `go run` of a pinned version needs no
// entry in go.mod, and the module proxy's checksum database vouches for it.
const nfpmCmd = "github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2"

func main() {
	version := flag.String("version", "", "the version the binary was built with (git describe --tags --always --dirty); required")
	bin := flag.String("bin", "", "the ordersync binary, built with CGO_ENABLED=0 for linux/amd64; required")
	root := flag.String("root", ".", "the repository")
	out := flag.String("out", "dist", "directory to write the package into")
	goCmd := flag.String("go", "go", "the go command that runs nfpm")
	flag.Parse()
	if *version == "" || *bin == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: mkdeb -version VERSION -bin BINARY [-root DIR] [-out DIR] [-go GO]")
		os.Exit(2)
	}
	deb, err := build(*version, *bin, *root, *out, *goCmd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkdeb:", err)
		os.Exit(1)
	}
	fmt.Println(deb)
}

func build(version, bin, root, out, goCmd string) (string, error) {
	debVersion, err := packaging.DebianVersion(version)
	if err != nil {
		return "", err
	}
	info, err := checkBinary(bin, version)
	if err != nil {
		return "", err
	}
	unit, err := os.ReadFile(filepath.Join(root, "deploy/systemd/ordersync.service"))
	if err != nil {
		return "", err
	}
	unit, err = packaging.PackagedUnit(unit)
	if err != nil {
		return "", fmt.Errorf("deploy/systemd/ordersync.service: %w", err)
	}
	mtime := sourceDate(root)

	stage, err := os.MkdirTemp("", "ordersync-deb-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(stage)

	docs, err := packaging.DocFiles(root)
	if err != nil {
		return "", err
	}
	copies := map[string]string{ // staged name -> source
		"ordersync":        bin,
		"ordersync.yaml":   filepath.Join(root, packaging.ConfigSource),
		"nfpm.yaml":        filepath.Join(root, "packaging/nfpm.yaml"),
		"scripts/postinst": filepath.Join(root, "packaging/scripts/postinst"),
		"scripts/prerm":    filepath.Join(root, "packaging/scripts/prerm"),
		"scripts/postrm":   filepath.Join(root, "packaging/scripts/postrm"),
	}
	// Each doc at its path in the repository, so the links between them hold in
	// /usr/share/doc/ordersync.
	for name, src := range docs {
		copies["doc/"+name] = src
	}
	for name, src := range copies {
		data, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		if err := writeFile(stage, name, data, modeOf(name)); err != nil {
			return "", err
		}
	}
	if err := writeFile(stage, "ordersync.service", unit, 0o644); err != nil {
		return "", err
	}
	// The docs link to the unit: the one installed.
	if err := writeFile(stage, "doc/"+packaging.DocUnit, unit, 0o644); err != nil {
		return "", err
	}
	config, err := os.ReadFile(filepath.Join(root, packaging.ConfigSource))
	if err != nil {
		return "", err
	}
	postinst, err := os.ReadFile(filepath.Join(root, "packaging/scripts/postinst"))
	if err != nil {
		return "", err
	}
	if err := packaging.CheckAgreement(unit, config, postinst); err != nil {
		return "", err
	}
	// The man page and the shell completions, from the binary itself.
	generated, err := fromBinary(bin, version, mtime)
	if err != nil {
		return "", err
	}
	for name, data := range generated {
		if err := writeFile(stage, name, data, 0o644); err != nil {
			return "", err
		}
	}
	copyright, err := copyrightFile(filepath.Join(root, "packaging/copyright"), info, goCmd)
	if err != nil {
		return "", err
	}
	if err := writeFile(stage, "doc/copyright", copyright, 0o644); err != nil {
		return "", err
	}
	// Directories: 0755 and the source date, so the package does not depend on when or
	// with which umask it was built.
	err = filepath.WalkDir(stage, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if err := os.Chmod(p, 0o755); err != nil {
				return err
			}
		}
		return os.Chtimes(p, mtime, mtime)
	})
	if err != nil {
		return "", err
	}

	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	deb := filepath.Join(absOut, fmt.Sprintf("ordersync_%s_%s.deb", debVersion, packaging.Arch))
	cmd := exec.Command(goCmd, "run", nfpmCmd, "package", "--config", "nfpm.yaml", "--packager", "deb", "--target", deb)
	cmd.Dir = stage
	cmd.Env = append(os.Environ(),
		"ORDERSYNC_DEB_VERSION="+debVersion,
		"SOURCE_DATE_EPOCH="+strconv.FormatInt(mtime.Unix(), 10))
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s run %s: %v\n%s", goCmd, nfpmCmd, err, log.Bytes())
	}
	if _, err := os.Stat(deb); err != nil {
		return "", fmt.Errorf("nfpm did not write %s:\n%s", deb, log.Bytes())
	}
	return deb, nil
}

// fromBinary makes the files the binary's own help and completion say: the man page
// (man/ordersync.1.gz, packaging.ManPage) and the completion scripts of bash, zsh
// and fish (completions/…), by staged name.
func fromBinary(bin, version string, date time.Time) (map[string][]byte, error) {
	out := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"} // nothing of the builder's ORDERSYNC_ environment
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s %s: %v: %s", bin, strings.Join(args, " "), err, stderr.Bytes())
		}
		return stdout.String(), nil
	}
	man, err := packaging.ManPage(version, date, out)
	if err != nil {
		return nil, err
	}
	if man, err = packaging.Gzip(man); err != nil {
		return nil, err
	}
	files := map[string][]byte{"man/ordersync.1.gz": man}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		script, err := out("completion", shell)
		if err != nil {
			return nil, err
		}
		files["completions/"+shell] = []byte(script)
	}
	return files, nil
}

// checkBinary refuses a binary that is not what make build makes for the package: a
// static linux/amd64 program whose version is the one the package is named after.
func checkBinary(bin, version string) (*buildinfo.BuildInfo, error) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if info.Path != "github.com/ordersync/ordersync/cmd/ordersync" {
		return nil, fmt.Errorf("%s is %s, not ordersync", bin, info.Path)
	}
	if settings["GOOS"] != "linux" || settings["GOARCH"] != packaging.Arch {
		return nil, fmt.Errorf("%s is built for %s/%s, the package is linux/%s", bin, settings["GOOS"], settings["GOARCH"], packaging.Arch)
	}
	if settings["CGO_ENABLED"] != "0" {
		return nil, fmt.Errorf("%s is built with CGO_ENABLED=%s; the package wants a static binary (CGO_ENABLED=0, as make build does)", bin, settings["CGO_ENABLED"])
	}
	// -trimpath keeps -ldflags out of the build information: ask the binary.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s version: %w", bin, err)
	}
	if want := "ordersync " + version; strings.TrimSpace(string(got)) != want {
		return nil, fmt.Errorf("%s version says %q, not %q: build it with make build VERSION=%s", bin, strings.TrimSpace(string(got)), want, version)
	}
	return info, nil
}

// copyrightFile is packaging/copyright followed by the licence of Go and of every module
// linked into the binary, read from the module cache (the build just used it).
func copyrightFile(header string, info *buildinfo.BuildInfo, goCmd string) ([]byte, error) {
	var b bytes.Buffer
	h, err := os.ReadFile(header)
	if err != nil {
		return nil, err
	}
	b.Write(h)
	env, err := exec.Command(goCmd, "env", "GOROOT", "GOMODCACHE").Output()
	if err != nil {
		return nil, fmt.Errorf("%s env: %w", goCmd, err)
	}
	lines := strings.Split(strings.TrimSpace(string(env)), "\n")
	if len(lines) != 2 {
		return nil, fmt.Errorf("%s env GOROOT GOMODCACHE: %q", goCmd, env)
	}
	goroot, modcache := lines[0], lines[1]

	section := func(title, dir string) error {
		text, err := licence(dir)
		if err != nil {
			return fmt.Errorf("%s: %w", title, err)
		}
		fmt.Fprintf(&b, "\n%s\n%s\n\n%s\n", title, strings.Repeat("-", len(title)), bytes.TrimSpace(text))
		return nil
	}
	if err := section("Go "+info.GoVersion+" (the standard library and runtime)", goroot); err != nil {
		return nil, err
	}
	deps := append([]*debug.Module(nil), info.Deps...)
	sort.Slice(deps, func(i, j int) bool { return deps[i].Path < deps[j].Path })
	for _, m := range deps {
		if m.Replace != nil {
			m = m.Replace
		}
		if err := section(m.Path+" "+m.Version, filepath.Join(modcache, escape(m.Path)+"@"+escape(m.Version))); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// licence is the licence file at the top of a module.
func licence(dir string) ([]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		n := strings.ToUpper(e.Name())
		if !e.IsDir() && (strings.HasPrefix(n, "LICENSE") || strings.HasPrefix(n, "LICENCE") || strings.HasPrefix(n, "COPYING")) {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no LICENSE file in " + dir)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for i, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		if i > 0 {
			fmt.Fprintf(&b, "\n\n(%s)\n\n", n)
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}

// escape is the module cache's spelling of a path or version: an upper-case letter is
// "!" and the letter in lower case.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// sourceDate is SOURCE_DATE_EPOCH, else the time of the repository's last commit, else
// now: the files' times in the package.
func sourceDate(root string) time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0)
		}
	}
	cmd := exec.Command("git", "log", "-1", "--format=%ct")
	cmd.Dir = root
	if outp, err := cmd.Output(); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(outp)), 10, 64); err == nil {
			return time.Unix(n, 0)
		}
	}
	return time.Now().Truncate(time.Second)
}

func modeOf(name string) fs.FileMode {
	if name == "ordersync" || strings.HasPrefix(name, "scripts/") {
		return 0o755
	}
	return 0o644
}

func writeFile(stage, name string, data []byte, mode fs.FileMode) error {
	p := filepath.Join(stage, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		return err
	}
	return os.Chmod(p, mode) // whatever the umask
}
