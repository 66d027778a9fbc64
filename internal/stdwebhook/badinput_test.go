package stdwebhook

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// A signed delivery whose webhook-id cannot be stored is ErrID, naming the header;
// two ids that differ only in invalid bytes are both refused, never one id.
func TestVerifyRefusesABadWebhookID(t *testing.T) {
	t.Parallel()
	sec := MustParseSecret(vecSecret)
	v := &Verifier{Secrets: []Secret{sec}, Now: at(vecTime)}
	body := []byte(vecBody)
	for _, id := range []string{"msg_\xff", "msg_\xfe", "msg_\x00", "msg_\x1b[0m", "msg_\u200b", "msg_\u0085"} {
		h := Headers([]Secret{sec}, id, vecTime, body)
		got, err := v.Verify(h, body)
		if !errors.Is(err, ErrID) || got != "" || !strings.Contains(err.Error(), HeaderID) {
			t.Errorf("Verify(%q) = %q, %v; want ErrID naming %s", id, got, err, HeaderID)
		}
		if !utf8.ValidString(err.Error()) {
			t.Errorf("the error %q is not valid UTF-8", err)
		}
	}
	// Unsigned, a bad id is a bad signature: nothing about it is told before the
	// sender is known.
	h := Headers([]Secret{MustParseSecret("whsec_c2Vjb25kLXNlY3JldA==")}, "msg_\xff", vecTime, body)
	if _, err := v.Verify(h, body); !errors.Is(err, ErrSignature) {
		t.Errorf("unsigned bad id: %v, want ErrSignature", err)
	}
	// Printable ids pass, whatever their script.
	for _, id := range []string{vecID, "заказ-1", "msg 1"} {
		if got, err := v.Verify(Headers([]Secret{sec}, id, vecTime, body), body); err != nil || got != id {
			t.Errorf("Verify(%q) = %q, %v", id, got, err)
		}
	}
}

func FuzzVerify(f *testing.F) {
	sec := MustParseSecret(vecSecret)
	v := &Verifier{Secrets: []Secret{sec}, Now: at(vecTime)}
	f.Add(vecID, strconv.FormatInt(vecTimestamp, 10), vecSig, []byte(vecBody))
	f.Add("msg_\xff", strconv.FormatInt(vecTimestamp, 10), Sign(sec, "msg_\xff", vecTime, []byte(vecBody)), []byte(vecBody))
	f.Add(vecID, "1614265330.5", "v1,AAAA v2,xyz", []byte(""))
	f.Add(" "+vecID+" ", "+1614265330", "v1a,"+vecSig, []byte("{}"))
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h[HeaderID] = []string{id}
		h[HeaderTimestamp] = []string{ts}
		h[HeaderSignature] = []string{sig}
		got, err := v.Verify(h, body)
		if err != nil {
			if got != "" {
				t.Fatalf("Verify returned id %q with error %v", got, err)
			}
			return
		}
		if CheckID(got) != "" || got == "" {
			t.Fatalf("Verify accepted the id %q: %s", got, CheckID(got))
		}
		// Accepted means one v1 entry is the HMAC of what was received.
		want := Sign(sec, got, vecTime, body)
		sec, err := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
		if err != nil {
			t.Fatalf("accepted a timestamp that is not unix seconds: %q", ts)
		}
		if d := sec - vecTimestamp; d < -300 || d > 300 {
			t.Fatalf("accepted a timestamp %d s away", d)
		}
		if sec == vecTimestamp && !strings.Contains(sig, strings.TrimPrefix(want, "v1,")) {
			t.Fatalf("accepted a signature %q that is not %q", sig, want)
		}
	})
}
