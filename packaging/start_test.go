package packaging

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The unit, the configuration and postinst the package installs agree on the
// credentials, and CheckAgreement notices when one of them says otherwise.
func TestPackagedFilesAgree(t *testing.T) {
	t.Parallel()
	read := func(p string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("..", p))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	unit, err := PackagedUnit(read("deploy/systemd/ordersync.service"))
	if err != nil {
		t.Fatal(err)
	}
	config, postinst := read(ConfigSource), read("packaging/scripts/postinst")
	if err := CheckAgreement(unit, config, postinst); err != nil {
		t.Fatalf("the packaged files: %v", err)
	}
	if got := ConfigCredentials(config); len(got) != 1 || got["onec-password"] != "password_file" {
		t.Errorf("%s reads the credentials %v, want only onec-password (onec.password_file)", ConfigSource, got)
	}
	for _, c := range []struct {
		name                   string
		unit, config, postinst []byte
		want                   string
	}{
		{"a credential the config does not read",
			bytes.Replace(unit, []byte("LoadCredential=onec-password"), []byte("LoadCredential=site-webhook-secrets:/etc/ordersync/site-webhook-secrets\nLoadCredential=onec-password"), 1),
			config, postinst, "site-webhook-secrets"},
		{"a credential the unit does not load", unit,
			append(append([]byte(nil), config...), "webhooks:\n  sources:\n    site:\n      secrets_file: /run/credentials/ordersync.service/site-webhook-secrets\n"...),
			postinst, "webhooks.sources.site.secrets_file"[len("webhooks.sources.site."):]},
		{"postinst silent on the password file", unit, config,
			bytes.ReplaceAll(postinst, []byte("/etc/ordersync/onec-password"), []byte("/etc/ordersync/password")), "/etc/ordersync/onec-password"},
		{"postinst silent on the drop-in", unit, config,
			bytes.ReplaceAll(postinst, []byte("credentials.conf"), []byte("x.conf")), DropInSource},
	} {
		err := CheckAgreement(c.unit, c.config, c.postinst)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: CheckAgreement = %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

// Every relative link in the docs the package installs leads to a file it installs
// (TestDeb checks the same on the built package).
func TestDocLinksLeadToPackagedFiles(t *testing.T) {
	t.Parallel()
	docs, err := DocFiles("..")
	if err != nil {
		t.Fatal(err)
	}
	installed := map[string]bool{DocUnit: true, "copyright": true}
	for name := range docs {
		installed[name] = true
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			installed[d] = true
		}
	}
	for _, must := range []string{"deploy/1c/openapi.yaml", "deploy/1c/ordersync/Module.bsl", "deploy/prometheus/ordersync.rules.yml",
		"deploy/grafana/ordersync.json", "configs/ordersync.example.yaml", DropInSource} {
		if !installed[must] {
			t.Errorf("the package does not install %s", must)
		}
	}
	links := 0
	for name, src := range docs {
		if !strings.HasSuffix(name, ".md") {
			continue
		}
		md, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range RelativeLinks(md) {
			links++
			if target := path.Clean(path.Join(path.Dir(name), l)); !installed[target] {
				t.Errorf("%s links to %s, which the package does not install (%s)", name, l, target)
			}
		}
	}
	if links < 50 {
		t.Errorf("found %d relative links in the docs: the link reader reads too little", links)
	}

	got := RelativeLinks([]byte("[a](x.md#f) ![i](p.png \"t\") [b](https://e.x/y) [c](#here) `[d](code.md)`\n" +
		"```\n[e](fenced.md)\n```\n[r]: ref.md\n"))
	if want := []string{"p.png", "ref.md", "x.md"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("RelativeLinks = %q, want %q", got, want)
	}
}

// startPackaged starts the installed binary on the installed configuration as the
// installed unit does (its ExecStartPre= and ExecStart=, its Environment=, the
// state and credentials directories systemd would give it), with only the 1C URL
// filled in the configuration and the 1C password in its credential, against the
// installed binary's simulated 1C, and waits for the service to tell systemd it is
// ready (READY=1) and for /readyz to answer 200. The listeners are moved to free
// ports: the test machine's 8080 and 9090 are not the test's.
func startPackaged(t *testing.T, root string, unit []byte) {
	t.Helper()
	bin := filepath.Join(root, BinPath)
	dir := t.TempDir()
	state, creds := filepath.Join(dir, "state"), filepath.Join(dir, "credentials")
	for _, d := range []string{state, creds} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}

	// The 1C: the package's own simulator, with a password.
	const password = "s3cret-1c"
	sim := startProcess(t, bin, nil, "sim", "onec", "--listen", "127.0.0.1:0", "--username", "ordersync", "--password", password)
	var baseURL string
	waitFor(t, "the simulator's URL", 30*time.Second, func() bool {
		m := regexp.MustCompile(`onec\.base_url = (\S+)`).FindStringSubmatch(sim.output())
		if m != nil {
			baseURL = m[1]
		}
		return m != nil
	})

	// Fill what postinst says to fill, and nothing else.
	configPath := filepath.Join(root, ConfigPath)
	config, err := os.ReadFile(configPath)
	if err != nil {
		t.Fatal(err)
	}
	filled := bytes.Replace(config, []byte(`base_url: ""`), []byte("base_url: "+baseURL), 1)
	if bytes.Equal(filled, config) {
		t.Fatalf("%s has no empty onec.base_url to fill", ConfigPath)
	}
	if err := os.WriteFile(configPath, filled, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(configPath, config, 0o644) }) // dpkg -r compares it
	for id := range Credentials(unit) {
		if id != "onec-password" {
			t.Fatalf("the unit loads %s: the test fills only the 1C password", id)
		}
		if err := os.WriteFile(filepath.Join(creds, id), []byte(password), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The unit's commands and environment, on the installed files.
	var pre, start []string
	env := []string{"PATH=/usr/bin:/bin", "STATE_DIRECTORY=" + state, "CREDENTIALS_DIRECTORY=" + creds,
		"ORDERSYNC_HTTP__LISTEN=127.0.0.1:0", "ORDERSYNC_ADMIN__LISTEN=127.0.0.1:0", "ORDERSYNC_LOG__FORMAT=json"}
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		args := func() []string {
			f := strings.Fields(strings.TrimLeft(v, "-@:+!|"))
			for i := range f {
				f[i] = strings.NewReplacer(BinPath, bin, ConfigPath, configPath).Replace(f[i])
			}
			return f
		}
		switch k {
		case "ExecStartPre":
			pre = args()
		case "ExecStart":
			start = args()
		case "Environment":
			env = append(env, strings.ReplaceAll(v, "%d", creds))
		}
	}
	if len(start) == 0 {
		t.Fatal("the unit has no ExecStart=")
	}
	if len(pre) > 0 {
		if out, err := runWith(env, pre...); err != nil {
			t.Fatalf("ExecStartPre= %s: %v\n%s", strings.Join(pre, " "), err, out)
		}
	}
	sock := listenNotify(t)
	svc := startProcess(t, start[0], append(env, "NOTIFY_SOCKET="+sock.addr), start[1:]...)
	waitFor(t, "READY=1 from the packaged service", 60*time.Second, func() bool {
		if svc.exited() {
			t.Fatalf("%s exited before it was ready:\n%s", strings.Join(start, " "), svc.output())
		}
		return sock.has("READY=1")
	})
	var admin string
	for _, line := range strings.Split(svc.output(), "\n") {
		var rec struct{ Msg, Address string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "admin listening" {
			admin = rec.Address
		}
	}
	if admin == "" {
		t.Fatalf("no admin address in the log:\n%s", svc.output())
	}
	waitFor(t, "/readyz 200 (1C answered)", 60*time.Second, func() bool {
		resp, err := http.Get(admin + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK
	})
	if db := filepath.Join(state, "ordersync.db"); !exists(db) {
		t.Errorf("the service is ready but its embedded journal is not %s", db)
	}
	t.Logf("the packaged configuration, with the 1C URL and password filled, is ready: %s", admin)
}

type process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// startProcess runs name in the background, stopped with SIGTERM (then killed) when
// the test ends.
func startProcess(t *testing.T, name string, env []string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(name, args...), done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func runWith(env []string, args ...string) (string, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// notifySocket stands for systemd's notification socket.
type notifySocket struct {
	addr string
	mu   sync.Mutex
	got  []string
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	s := &notifySocket{addr: fmt.Sprintf("@ordersync-packaging-test-%d-%d", os.Getpid(), time.Now().UnixNano())}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: s.addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.got = append(s.got, strings.Split(string(buf[:n]), "\n")...)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return s
}

func (s *notifySocket) has(line string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.got {
		if l == line {
			return true
		}
	}
	return false
}
