package packaging

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDebianVersion(t *testing.T) {
	for _, c := range []struct{ describe, want string }{
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v1.2.3-dirty", "1.2.3+0.dirty"},
		{"v1.2.3-rc1", "1.2.3~rc1"},
		{"v1.2.3-rc.1-4-gabc1234", "1.2.3~rc.1+4.gabc1234"},
		{"v1.2.3-4-gabc1234", "1.2.3+4.gabc1234"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.3+4.gabc1234+dirty"},
		{"v1.2.3+meta-x", "1.2.3+meta.x"},
		{"3a7e475", "0.0.0~git3a7e475"},
		{"3a7e475-dirty", "0.0.0~git3a7e475+dirty"},
		{"dev", "0.0.0~dev"},
		{"release_5-2-g0123abcd", "0.0.0~release.5+2.g0123abcd"},
	} {
		got, err := DebianVersion(c.describe)
		if err != nil || got != c.want {
			t.Errorf("DebianVersion(%q) = %q, %v; want %q", c.describe, got, err, c.want)
		}
	}
	if _, err := DebianVersion(" "); err == nil {
		t.Error("DebianVersion of an empty version: no error")
	}

	// dpkg agrees that they are valid and sort as releases do.
	dpkg := need(t, "dpkg", "dpkg")
	order := []string{"0.0.0~dev", "0.0.0~git3a7e475", "0.0.0~git3a7e475+dirty", "0.1.0~rc1", "0.1.0~rc1+2.gabc1234",
		"0.1.0", "0.1.0+0.dirty", "0.1.0+1.gabc1234", "0.1.0+3.gabc1234", "0.1.0+3.gabc1234+dirty", "0.1.1"}
	for i := range order {
		if out, err := exec.Command(dpkg, "--validate-version", order[i]).CombinedOutput(); err != nil {
			t.Errorf("dpkg --validate-version %s: %v %s", order[i], err, out)
		}
		if i > 0 {
			if err := exec.Command(dpkg, "--compare-versions", order[i-1], "lt", order[i]).Run(); err != nil {
				t.Errorf("dpkg: not %s < %s", order[i-1], order[i])
			}
		}
	}
}

func TestPackagedUnit(t *testing.T) {
	repo, err := os.ReadFile("../deploy/systemd/ordersync.service")
	if err != nil {
		t.Fatal(err)
	}
	unit, err := PackagedUnit(repo)
	if err != nil {
		t.Fatalf("the repository's unit: %v", err)
	}
	if bytes.Contains(unit, []byte(RepoBinPath)) {
		t.Errorf("the packaged unit still names %s", RepoBinPath)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"other binary", "ExecStart=" + BinPath, "ExecStart=/opt/ordersync", "/opt/ordersync"},
		{"other binary after", "[Service]\n", "[Service]\nExecStartPost=-/opt/bin/ordersync x\n", "ExecStartPost= runs \"/opt/bin/ordersync\""},
		{"fixed user", "DynamicUser=yes", "User=ordersync", "User=ordersync"},
		{"no dynamic user", "DynamicUser=yes", "DynamicUser=no", "DynamicUser=yes"},
		{"no state directory", "StateDirectory=ordersync", "#", "StateDirectory"},
	} {
		bad := bytes.Replace(unit, []byte(c.from), []byte(c.to), 1)
		if bytes.Equal(bad, unit) {
			t.Errorf("%s: the unit has no %q to change", c.name, c.from)
			continue
		}
		if err := CheckUnit(bad); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: CheckUnit = %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

// TestMaintainerScripts runs the scripts as dpkg would on a host with systemd, with a
// stand-in systemctl that records its calls: reloading is all they do on install and
// upgrade; only removal stops (and disables) the service.
func TestMaintainerScripts(t *testing.T) {
	dir := t.TempDir()
	systemdDir := filepath.Join(dir, "run-systemd-system") // stands for /run/systemd/system
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{systemdDir, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	calls := filepath.Join(dir, "calls")
	fake := "#!/bin/sh\necho \"$*\" >> " + calls + "\n" +
		"case \"$*\" in *is-active*) exit ${FAKE_ACTIVE:-3} ;; *is-enabled*) exit ${FAKE_ENABLED:-1} ;; esac\nexit 0\n"
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		script string
		args   []string
		env    []string
		calls  []string
		out    string // in its output
	}{
		{"postinst", []string{"configure", ""}, nil,
			[]string{"--system daemon-reload", "--quiet is-active ordersync.service"}, "neither enabled nor started"},
		{"postinst", []string{"configure", "0.1.0"}, []string{"FAKE_ACTIVE=0"},
			[]string{"--system daemon-reload", "--quiet is-active ordersync.service"}, "systemctl restart ordersync"},
		{"postinst", []string{"configure", "0.1.0"}, []string{"FAKE_ENABLED=0"},
			[]string{"--system daemon-reload", "--quiet is-active ordersync.service", "--quiet is-enabled ordersync.service"}, ""},
		{"postinst", []string{"configure", ""}, []string{"DPKG_ROOT=" + dir}, nil, "neither enabled nor started"},
		{"postinst", []string{"abort-upgrade", "0.2.0"}, nil, []string{"--system daemon-reload"}, ""},
		{"prerm", []string{"remove"}, nil, []string{"--system stop ordersync.service", "--system --quiet disable ordersync.service"}, ""},
		{"prerm", []string{"remove"}, []string{"DPKG_ROOT=" + dir}, nil, ""},
		{"prerm", []string{"upgrade", "0.2.0"}, nil, nil, ""},
		{"postrm", []string{"remove"}, nil, []string{"--system daemon-reload"}, ""},
		{"postrm", []string{"upgrade", "0.2.0"}, nil, nil, ""},
	} {
		name := c.script + " " + strings.Join(c.args, " ") + " " + strings.Join(c.env, " ")
		src, err := os.ReadFile(filepath.Join("scripts", c.script))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(src, []byte("/run/systemd/system")) {
			t.Fatalf("%s does not look for /run/systemd/system", c.script)
		}
		script := filepath.Join(dir, c.script)
		if err := os.WriteFile(script, bytes.ReplaceAll(src, []byte("/run/systemd/system"), []byte(systemdDir)), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Remove(calls)
		cmd := exec.Command("/bin/sh", append([]string{"-eu", script}, c.args...)...)
		cmd.Env = append([]string{"PATH=" + bin + ":/usr/bin:/bin"}, c.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, out)
			continue
		}
		logged, _ := os.ReadFile(calls)
		var got []string
		if s := strings.TrimSpace(string(logged)); s != "" {
			got = strings.Split(s, "\n")
		}
		if !slices.Equal(got, c.calls) {
			t.Errorf("%s: systemctl called with %q, want %q", name, got, c.calls)
		}
		if c.out != "" && !strings.Contains(string(out), c.out) {
			t.Errorf("%s: output lacks %q:\n%s", name, c.out, out)
		}
		if c.out == "" && len(out) > 0 && c.script != "postinst" {
			t.Errorf("%s: said %q", name, out)
		}
	}
}

// TestDeb builds the package with make deb into a temporary directory, reads it back with
// dpkg-deb, installs, removes and purges it with dpkg in a throwaway root (its own
// administrative directory, maintainer scripts run with DPKG_ROOT set), and verifies the
// installed unit with systemd-analyze.
func TestDeb(t *testing.T) {
	dpkgDeb := need(t, "dpkg-deb", "dpkg")
	dpkg := need(t, "dpkg", "dpkg")
	analyze := need(t, "systemd-analyze", "systemd")
	makeCmd := need(t, "make", "make")
	start := time.Now()

	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) []byte {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	repoUnit := read(filepath.Join(root, "deploy/systemd/ordersync.service"))
	wantUnit, err := PackagedUnit(repoUnit)
	if err != nil {
		t.Fatal(err)
	}
	wantConfig := read(filepath.Join(root, ConfigSource))
	docs, err := DocFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	version := "dev" // as the Makefile says without git
	if out, err := exec.Command("git", "-C", root, "describe", "--tags", "--always", "--dirty").Output(); err == nil {
		version = strings.TrimSpace(string(out))
	}
	debVersion, err := DebianVersion(version)
	if err != nil {
		t.Fatal(err)
	}

	tmp := t.TempDir()
	out := run(t, root, makeCmd, "--no-print-directory", "deb", "DIST="+tmp, "VERSION="+version)
	deb := filepath.Join(tmp, "ordersync_"+debVersion+"_amd64.deb")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); lines[len(lines)-1] != deb {
		t.Fatalf("make deb did not end by naming %s:\n%s", deb, out)
	}
	t.Logf("make deb: %s in %s", filepath.Base(deb), time.Since(start).Round(time.Millisecond))

	// Contents.
	want := map[string]string{ // path -> mode
		"./usr/bin/ordersync":                    "-rwxr-xr-x",
		"./lib/systemd/system/ordersync.service": "-rw-r--r--",
		"./etc/ordersync/ordersync.yaml":         "-rw-r--r--",
		"./usr/share/doc/ordersync/README.md":    "-rw-r--r--",
		"./usr/share/doc/ordersync/copyright":    "-rw-r--r--",
		"./etc/ordersync/":                       "drwxr-xr-x",
		"./usr/share/doc/ordersync/":             "drwxr-xr-x",
		"./lib/systemd/system/":                  "drwxr-xr-x",
		"./usr/bin/":                             "drwxr-xr-x",
		"./usr/share/doc/":                       "drwxr-xr-x",
		"./usr/share/":                           "drwxr-xr-x",
		"./usr/":                                 "drwxr-xr-x",
		"./lib/systemd/":                         "drwxr-xr-x",
		"./lib/":                                 "drwxr-xr-x",
		"./etc/":                                 "drwxr-xr-x",
	}
	for name := range docs {
		want["."+DocDir+"/"+name] = "-rw-r--r--"
	}
	want["."+DocDir+"/"+DocUnit] = "-rw-r--r--"
	for _, p := range []string{ManPath, BashCompletion, ZshCompletion, FishCompletion} {
		want["."+p] = "-rw-r--r--"
	}
	for p := range want { // and every directory above each file
		for d := path.Dir(strings.TrimPrefix(p, "./")); d != "."; d = path.Dir(d) {
			want["./"+d+"/"] = "drwxr-xr-x"
		}
	}
	listing := run(t, "", dpkgDeb, "-c", deb)
	t.Logf("dpkg-deb -c:\n%s", listing)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(listing), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb -c: %q", line)
		}
		got[f[len(f)-1]] = f[0]
		if f[1] != "root/root" {
			t.Errorf("%s is owned by %s, not root/root", f[len(f)-1], f[1])
		}
	}
	for p, mode := range want {
		if got[p] != mode {
			t.Errorf("package: %s is %q, want %q", p, got[p], mode)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("package: unexpected %s", p)
		}
	}

	// Control fields and files.
	info := run(t, "", dpkgDeb, "-I", deb)
	for _, member := range []string{"control", "conffiles", "md5sums", "postinst", "prerm", "postrm"} {
		if !regexpLine(info, member) {
			t.Errorf("dpkg-deb -I: no %s in the control archive:\n%s", member, info)
		}
	}
	fields := control(run(t, "", dpkgDeb, "-I", deb, "control"))
	for k, v := range map[string]string{"Package": "ordersync", "Version": debVersion, "Architecture": "amd64",
		"Section": "net", "Priority": "optional"} {
		if fields[k] != v {
			t.Errorf("control: %s is %q, want %q", k, fields[k], v)
		}
	}
	for _, k := range []string{"Maintainer", "Description", "Installed-Size"} {
		if fields[k] == "" {
			t.Errorf("control: no %s", k)
		}
	}
	for _, k := range []string{"Depends", "Pre-Depends"} {
		if fields[k] != "" {
			t.Errorf("control: %s: %s (the binary is static)", k, fields[k])
		}
	}
	if c := strings.TrimSpace(run(t, "", dpkgDeb, "-I", deb, "conffiles")); c != ConfigPath {
		t.Errorf("conffiles: %q, want %q", c, ConfigPath)
	}

	// Install into a throwaway root: dpkg's database is the root's own; the maintainer
	// scripts run without chroot (the root has no shell) but with DPKG_ROOT, which keeps
	// them off the host's systemd. dpkg sets owners, so that takes root; as another user
	// the package is only extracted.
	r := filepath.Join(tmp, "root")
	asRoot := os.Geteuid() == 0
	dpkgIn := func(args ...string) string {
		t.Helper()
		return run(t, "", dpkg, append([]string{"--root=" + r, "--admindir=" + filepath.Join(r, "var/lib/dpkg"),
			"--log=" + filepath.Join(tmp, "dpkg.log"), "--force-script-chrootless"}, args...)...)
	}
	if asRoot {
		for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"} {
			if err := os.MkdirAll(filepath.Join(r, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
			if err := os.WriteFile(filepath.Join(r, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		installed := dpkgIn("-i", deb)
		t.Logf("dpkg -i:\n%s", installed)
		if !strings.Contains(installed, "neither enabled nor started") {
			t.Errorf("postinst did not say the service is neither enabled nor started:\n%s", installed)
		}
		if s := control(dpkgIn("-s", "ordersync")); s["Status"] != "install ok installed" || s["Version"] != debVersion {
			t.Errorf("dpkg -s ordersync: Status %q, Version %q", s["Status"], s["Version"])
		}
	} else {
		t.Log("not root: the package is extracted with dpkg-deb -x, not installed with dpkg -i")
		run(t, "", dpkgDeb, "-x", deb, r)
	}
	if v := strings.TrimSpace(run(t, "", filepath.Join(r, BinPath), "version")); v != "ordersync "+version {
		t.Errorf("%s version: %q, want %q", BinPath, v, "ordersync "+version)
	}
	if !bytes.Equal(read(filepath.Join(r, ConfigPath)), wantConfig) {
		t.Errorf("%s is not %s", ConfigPath, ConfigSource)
	}
	unit := read(filepath.Join(r, UnitPath))
	if !bytes.Equal(unit, wantUnit) {
		t.Errorf("%s is not deploy/systemd/ordersync.service with %s for %s", UnitPath, BinPath, RepoBinPath)
	}
	for name, src := range docs {
		if !bytes.Equal(read(filepath.Join(r, DocDir, name)), read(src)) {
			t.Errorf("%s/%s is not the repository's %s", DocDir, name, name)
		}
	}
	if !bytes.Equal(read(filepath.Join(r, DocDir, DocUnit)), wantUnit) {
		t.Errorf("%s/%s is not the installed unit", DocDir, DocUnit)
	}
	// Every relative link of the installed docs leads to something installed.
	for p := range got {
		if !strings.HasPrefix(p, "."+DocDir+"/") || !strings.HasSuffix(p, ".md") {
			continue
		}
		for _, l := range RelativeLinks(read(filepath.Join(r, p))) {
			target := "./" + path.Join(path.Dir(p), l) // Join drops the "./" of dpkg-deb's paths
			if got[target] == "" && got[target+"/"] == "" {
				t.Errorf("%s links to %s, which the package does not install (%s)", strings.TrimPrefix(p, "."), l, strings.TrimPrefix(target, "."))
			}
		}
	}
	if err := CheckAgreement(unit, read(filepath.Join(r, ConfigPath)), read(filepath.Join(root, "packaging/scripts/postinst"))); err != nil {
		t.Error(err)
	}
	if c := read(filepath.Join(r, DocDir, "copyright")); !bytes.Contains(c, []byte("modernc.org/sqlite")) || !bytes.Contains(c, []byte("The Go Authors")) {
		t.Errorf("%s/copyright lacks the licences of the modules in the binary", DocDir)
	}

	// systemd-analyze verify of the installed unit, its Exec lines pointed at the installed
	// binary (verify checks that they are executable; --root does not reach them).
	vdir := filepath.Join(tmp, "verify")
	if err := os.Mkdir(vdir, 0o755); err != nil {
		t.Fatal(err)
	}
	var vunit bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Exec") {
			line = strings.ReplaceAll(line, BinPath, filepath.Join(r, BinPath))
		}
		vunit.WriteString(line + "\n")
	}
	if err := os.WriteFile(filepath.Join(vdir, "ordersync.service"), vunit.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	vout, err := exec.Command(analyze, "verify", "--man=no", filepath.Join(vdir, "ordersync.service")).CombinedOutput()
	if err != nil || bytes.Contains(vout, []byte("ordersync")) {
		t.Errorf("systemd-analyze verify of the installed unit: %v\n%s", err, vout)
	}

	checkManPage(t, r)
	checkBashCompletion(t, r)
	startPackaged(t, r, unit)

	if !asRoot {
		return
	}
	// Removal keeps the conffile and what the service wrote; purge takes the conffile and
	// still keeps the journal.
	journal := filepath.Join(r, "var/lib/private/ordersync/ordersync.db")
	if err := os.MkdirAll(filepath.Dir(journal), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journal, []byte("journal"), 0o600); err != nil {
		t.Fatal(err)
	}
	dpkgIn("-r", "ordersync")
	for _, p := range []string{BinPath, UnitPath, DocDir} {
		if _, err := os.Lstat(filepath.Join(r, p)); err == nil {
			t.Errorf("dpkg -r left %s", p)
		}
	}
	if _, err := os.Stat(filepath.Join(r, ConfigPath)); err != nil {
		t.Errorf("dpkg -r removed the conffile: %v", err)
	}
	purged := dpkgIn("--purge", "ordersync")
	if _, err := os.Stat(filepath.Join(r, ConfigPath)); err == nil {
		t.Errorf("dpkg --purge left %s", ConfigPath)
	}
	if _, err := os.Stat(journal); err != nil {
		t.Errorf("dpkg --purge removed the journal: %v", err)
	}
	if !strings.Contains(purged, "kept "+filepath.Join(r, "var/lib/private/ordersync")) {
		t.Errorf("postrm purge did not say it kept the journal:\n%s", purged)
	}
	t.Logf("built, read, installed, verified and purged in %s", time.Since(start).Round(time.Millisecond))
}

// need is the path of a program the test cannot do without: missing, it fails the test
// naming the Debian package to install.
func need(t *testing.T, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("%s is not installed: install the %s package (apt-get install %s); the Debian package's tests need it", prog, pkg, pkg)
	}
	return p
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.String() + stderr.String()
}

// control reads the fields of a control file (continuation lines folded in).
func control(text string) map[string]string {
	fields := map[string]string{}
	last := ""
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, " ") && last != "" {
			fields[last] += "\n" + strings.TrimSpace(line)
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			last = k
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fields
}

// regexpLine says whether dpkg-deb -I lists a control member of that name.
func regexpLine(info, member string) bool {
	for _, line := range strings.Split(info, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && f[1] == "bytes," && f[3] == "lines" && (f[4] == member || (f[4] == "*" && len(f) > 5 && f[5] == member)) {
			return true
		}
	}
	return false
}
