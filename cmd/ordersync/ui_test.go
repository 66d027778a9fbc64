package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

func TestUIHashPasswordFromAPipe(t *testing.T) {
	t.Parallel()
	const password = "s3cret пароль"
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"ui", "hash-password", "--name", "anna", "--role", "operator"},
		strings.NewReader(password+"\n"), &out, &errb, nil)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	hash := strings.TrimSpace(out.String())
	if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)); err != nil {
		t.Fatalf("the hash %q does not verify the password: %v", hash, err)
	}
	if cost, _ := bcrypt.Cost([]byte(hash)); cost < bcrypt.DefaultCost {
		t.Errorf("cost %d", cost)
	}
	snippet := errb.String()
	for _, want := range []string{"ui:", "users:", "- name: anna", "password_hash: '" + hash + "'", "role: operator"} {
		if !strings.Contains(snippet, want) {
			t.Errorf("stderr lacks %q:\n%s", want, snippet)
		}
	}
	if strings.Contains(out.String()+snippet, password) {
		t.Error("the password was printed")
	}

	for name, tc := range map[string]struct {
		stdin string
		args  []string
	}{
		"empty stdin": {"", nil},
		"empty line":  {"\n", nil},
		"bad role":    {"pw\n", []string{"--role", "admin"}},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"ui", "hash-password"}, tc.args...)
		if code := Main(context.Background(), args, strings.NewReader(tc.stdin), &out, &errb, nil); code != exitUsage || out.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q; want 2 and nothing", name, code, out.String())
		}
	}
}

// TestRunServesTheJournalPages runs the real service with ui.listen and a user:
// it logs where the pages listen, the journal asks for a sign-in, and after it
// shows the orders imported; SIGTERM still exits 0.
func TestRunServesTheJournalPages(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	hash, err := bcrypt.GenerateFromPassword([]byte("pw-анна"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users, _ := json.Marshal([]map[string]string{{"name": "anna", "password_hash": string(hash), "role": "operator"}})
	svc := e.startService("ORDERSYNC_UI__LISTEN=127.0.0.1:0", "ORDERSYNC_UI__USERS="+string(users), "ORDERSYNC_UI__LANG=en")
	var pages string
	eventually.True(t, "the UI's pages address in the log", func() bool {
		sc := bufio.NewScanner(strings.NewReader(svc.stderr.String()))
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && strings.HasPrefix(rec["msg"].(string), "ui: listening on http://127.0.0.1:") {
				pages, _ = rec["url"].(string)
			}
		}
		return pages != ""
	})
	if _, stderr, code := e.cli(orderJSON("UI-1", "SKU-1", "1", "100.00"), "order", "import"); code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}

	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	body := func(resp *http.Response, err error) (int, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, page := body(hc.Get(pages)) // redirected to sign in
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if code != http.StatusOK || !strings.Contains(page, `id="signin"`) || m == nil {
		t.Fatalf("GET %s without a session: %d\n%s", pages, code, page)
	}
	code, page = body(hc.PostForm(strings.TrimSuffix(pages, "/ui/journal")+"/ui/signin",
		url.Values{"name": {"anna"}, "password": {"pw-анна"}, "csrf": {m[1]}, "next": {"/ui/journal?q=UI-1"}}))
	if code != http.StatusOK || !strings.Contains(page, `data-key="site:order:UI-1:create"`) || !strings.Contains(page, "Journal of operations") {
		t.Fatalf("the journal after sign-in: %d\n%s", code, page)
	}

	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, svc.stderr.String())
	}
}
