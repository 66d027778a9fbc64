package stdwebhook

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The specification's published test vector.
const (
	vecSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTimestamp = 1614265330
	vecBody      = `{"test": 2432232314}`
	vecSig       = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

var vecTime = time.Unix(vecTimestamp, 0)

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

func vecHeaders(sig string) http.Header {
	h := http.Header{}
	h.Set(HeaderID, vecID)
	h.Set(HeaderTimestamp, fmt.Sprint(vecTimestamp))
	if sig != "" {
		h.Set(HeaderSignature, sig)
	}
	return h
}

func TestSignTestVector(t *testing.T) {
	t.Parallel()
	got := Sign(MustParseSecret(vecSecret), vecID, vecTime, []byte(vecBody))
	if got != vecSig {
		t.Fatalf("Sign = %q, want %q", got, vecSig)
	}
	h := Headers([]Secret{MustParseSecret(vecSecret)}, vecID, vecTime, []byte(vecBody))
	for name, want := range map[string]string{
		HeaderID: vecID, HeaderTimestamp: "1614265330", HeaderSignature: vecSig,
	} {
		if got := h.Get(name); got != want {
			t.Errorf("Headers: %s = %q, want %q", name, got, want)
		}
	}
}

func TestVerifyTestVector(t *testing.T) {
	t.Parallel()
	v := &Verifier{Secrets: []Secret{MustParseSecret(vecSecret)}, Now: at(vecTime)}
	id, err := v.Verify(vecHeaders(vecSig), []byte(vecBody))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if id != vecID {
		t.Fatalf("id = %q, want %q", id, vecID)
	}
}

func TestVerifyRawBytesOnly(t *testing.T) {
	t.Parallel()
	v := &Verifier{Secrets: []Secret{MustParseSecret(vecSecret)}, Now: at(vecTime)}
	// The same JSON value, re-serialised without the space, is other bytes.
	for _, body := range []string{`{"test":2432232314}`, vecBody + "\n", `{"test": 2432232315}`, ""} {
		if _, err := v.Verify(vecHeaders(vecSig), []byte(body)); !errors.Is(err, ErrSignature) {
			t.Errorf("body %q: err = %v, want ErrSignature", body, err)
		}
	}
	// Another id or timestamp is other signed content as well.
	h := vecHeaders(vecSig)
	h.Set(HeaderID, vecID+"x")
	if _, err := v.Verify(h, []byte(vecBody)); !errors.Is(err, ErrSignature) {
		t.Errorf("other id: err = %v, want ErrSignature", err)
	}
	h = vecHeaders(vecSig)
	h.Set(HeaderTimestamp, fmt.Sprint(vecTimestamp+1))
	if _, err := v.Verify(h, []byte(vecBody)); !errors.Is(err, ErrSignature) {
		t.Errorf("other timestamp: err = %v, want ErrSignature", err)
	}
}

func TestVerifyRotation(t *testing.T) {
	t.Parallel()
	oldS := MustParseSecret(vecSecret)
	newS, err := GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := GenerateSecret()
	body := []byte(`{"event_id":"e1"}`)
	now := time.Date(2026, 9, 16, 5, 0, 0, 0, time.UTC)

	// The receiver lists both secrets: a sender on either one is accepted.
	rx := &Verifier{Secrets: []Secret{newS, oldS}, Now: at(now)}
	for name, s := range map[string]Secret{"old": oldS, "new": newS} {
		h := Headers([]Secret{s}, "e1", now, body)
		if _, err := rx.Verify(h, body); err != nil {
			t.Errorf("sender on the %s secret: %v", name, err)
		}
	}
	// A sender in rotation signs with both: two entries, the first secret first;
	// a receiver that knows either accepts.
	h := Headers([]Secret{newS, oldS}, "e1", now, body)
	entries := strings.Fields(h.Get(HeaderSignature))
	if len(entries) != 2 || entries[0] != Sign(newS, "e1", now, body) || entries[1] != Sign(oldS, "e1", now, body) {
		t.Fatalf("signature header = %q, want the new then the old entry", h.Get(HeaderSignature))
	}
	for name, s := range map[string]Secret{"old": oldS, "new": newS} {
		if _, err := (&Verifier{Secrets: []Secret{s}, Now: at(now)}).Verify(h, body); err != nil {
			t.Errorf("receiver on the %s secret: %v", name, err)
		}
	}
	// A secret neither side knows is refused.
	if _, err := (&Verifier{Secrets: []Secret{other}, Now: at(now)}).Verify(h, body); !errors.Is(err, ErrSignature) {
		t.Errorf("unknown secret: err = %v, want ErrSignature", err)
	}
}

func TestVerifyTimestamp(t *testing.T) {
	t.Parallel()
	sec := MustParseSecret(vecSecret)
	body := []byte(vecBody)
	for _, tc := range []struct {
		name      string
		skew      time.Duration // receiver's clock minus the timestamp
		tolerance time.Duration
		ok        bool
	}{
		{"on time", 0, 0, true},
		{"4m late", 4 * time.Minute, 0, true},
		{"4m early", -4 * time.Minute, 0, true},
		{"exactly 5m late", 5 * time.Minute, 0, true},
		{"exactly 5m early", -5 * time.Minute, 0, true},
		{"6m late", 6 * time.Minute, 0, false},
		{"6m early", -6 * time.Minute, 0, false},
		{"6m late, 10m tolerance", 6 * time.Minute, 10 * time.Minute, true},
		{"2m late, 1m tolerance", 2 * time.Minute, time.Minute, false},
		{"a year late", 365 * 24 * time.Hour, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &Verifier{Secrets: []Secret{sec}, Tolerance: tc.tolerance, Now: at(vecTime.Add(tc.skew))}
			_, err := v.Verify(vecHeaders(vecSig), body)
			if tc.ok && err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if !tc.ok && !errors.Is(err, ErrTimestamp) {
				t.Fatalf("err = %v, want ErrTimestamp", err)
			}
		})
	}
	// A well-signed delivery whose timestamp is not a number.
	for _, ts := range []string{"yesterday", "1614265330.5", "0x603817f2", "99999999999999999999"} {
		h := vecHeaders("")
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, sign(sec, vecID, ts, body))
		v := &Verifier{Secrets: []Secret{sec}, Now: at(vecTime)}
		if _, err := v.Verify(h, body); !errors.Is(err, ErrTimestamp) {
			t.Errorf("timestamp %q: err = %v, want ErrTimestamp", ts, err)
		}
	}
}

func TestVerifyMissingHeaders(t *testing.T) {
	t.Parallel()
	v := &Verifier{Secrets: []Secret{MustParseSecret(vecSecret)}, Now: at(vecTime)}
	for _, name := range []string{HeaderID, HeaderTimestamp, HeaderSignature} {
		for _, how := range []string{"absent", "empty"} {
			h := vecHeaders(vecSig)
			if how == "absent" {
				h.Del(name)
			} else {
				h.Set(name, " ")
			}
			_, err := v.Verify(h, []byte(vecBody))
			if !errors.Is(err, ErrMissingHeaders) {
				t.Errorf("%s %s: err = %v, want ErrMissingHeaders", name, how, err)
				continue
			}
			if !strings.Contains(err.Error(), name) {
				t.Errorf("%s %s: error %q does not name the header", name, how, err)
			}
		}
	}
	if _, err := v.Verify(http.Header{}, nil); !errors.Is(err, ErrMissingHeaders) ||
		!strings.Contains(err.Error(), "webhook-id, webhook-timestamp, webhook-signature") {
		t.Errorf("no headers: err = %v", err)
	}
}

func TestVerifySignatureEntries(t *testing.T) {
	t.Parallel()
	v := &Verifier{Secrets: []Secret{MustParseSecret(vecSecret)}, Now: at(vecTime)}
	other := Sign(MustParseSecret("whsec_"+strings.Repeat("A", 32)), vecID, vecTime, []byte(vecBody))
	for _, tc := range []struct {
		name string
		sig  string
		ok   bool
	}{
		{"matching entry", vecSig, true},
		{"non-matching entry before a matching one", other + " " + vecSig, true},
		{"non-matching entry after a matching one", vecSig + " " + other, true},
		{"other versions ignored", "v2,abc v1a,xyz " + vecSig, true},
		{"extra spaces", "  " + vecSig + "   ", true},
		{"garbage", "garbage", false},
		{"not base64", "v1,!!!notbase64!!!", false},
		{"truncated", vecSig[:len(vecSig)-4], false},
		{"empty v1", "v1,", false},
		{"only another version", "v1a," + vecSig[3:], false},
		{"upper-case version", "V1," + vecSig[3:], false},
		{"signature in hex form", "v1,836c4cf52b04f8e3cf25312dfed98828ad4b266513" +
			"77b852442d594d20e2c9d4e1", false},
		{"only a non-matching entry", other, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(vecHeaders(tc.sig), []byte(vecBody))
			if tc.ok && err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if !tc.ok && !errors.Is(err, ErrSignature) {
				t.Fatalf("err = %v, want ErrSignature", err)
			}
		})
	}
	// Two webhook-signature header lines count as one list.
	h := vecHeaders(other)
	h.Add(HeaderSignature, vecSig)
	if _, err := v.Verify(h, []byte(vecBody)); err != nil {
		t.Errorf("signature split over two header lines: %v", err)
	}
	// No secret configured never verifies.
	if _, err := (&Verifier{Now: at(vecTime)}).Verify(vecHeaders(vecSig), []byte(vecBody)); !errors.Is(err, ErrSignature) {
		t.Errorf("no secrets: err = %v, want ErrSignature", err)
	}
}

func TestParseSecret(t *testing.T) {
	t.Parallel()
	const key = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, tc := range []struct {
		in      string
		wantErr string // "" means valid
	}{
		{"whsec_" + key, ""},
		{"  whsec_" + key + "\n", ""},
		{"", "empty"},
		{key, `must start with "whsec_"`},
		{"WHSEC_" + key, `must start with "whsec_"`},
		{"whsec_", `nothing after "whsec_"`},
		{"whsec_" + key + "!", "not standard base64"},
		{"whsec_" + key[:len(key)-1], "not standard base64"},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2La_-Sw", "not standard base64"}, // URL alphabet
		{"whsec_====", "not standard base64"},
	} {
		_, err := ParseSecret(tc.in)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("ParseSecret(%q): %v", tc.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ParseSecret(%q) = %v, want an error with %q", tc.in, err, tc.wantErr)
			continue
		}
		if len(tc.in) > 10 && strings.Contains(err.Error(), strings.TrimSpace(tc.in)[6:]) {
			t.Errorf("ParseSecret(%q): error %q repeats the secret", tc.in, err)
		}
	}
}

func TestSecretNeverPrinted(t *testing.T) {
	t.Parallel()
	s := MustParseSecret(vecSecret)
	key := vecSecret[len(SecretPrefix):]
	type holder struct{ S Secret }
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "secret", s, "holder", holder{s})
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "secret", s)
	outs := []string{
		s.String(), fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %q %x %X %d", s, s, s, s, s, s, s, s),
		fmt.Sprintf("%v %+v %#v", holder{s}, holder{s}, &holder{s}), logged.String(),
	}
	for _, out := range outs {
		if strings.Contains(out, key) || strings.Contains(out, "49 242") || strings.Contains(strings.ToLower(out), "31f29") {
			t.Errorf("printed the key: %s", out)
		}
		if !strings.Contains(out, "whsec_***") {
			t.Errorf("printed %q, want whsec_***", out)
		}
	}
	if s.Encode() != vecSecret {
		t.Errorf("Encode = %q, want the text it was parsed from", s.Encode())
	}
}

func TestHeadersWithoutSecrets(t *testing.T) {
	t.Parallel()
	h := Headers(nil, "e1", vecTime, []byte("{}"))
	if h.Get(HeaderID) != "e1" || h.Get(HeaderTimestamp) != "1614265330" {
		t.Errorf("headers = %v", h)
	}
	if _, ok := h[http.CanonicalHeaderKey(HeaderSignature)]; ok {
		t.Errorf("a signature header without secrets: %v", h)
	}
}

func BenchmarkVerify(b *testing.B) {
	sec := MustParseSecret(vecSecret)
	body := bytes.Repeat([]byte("x"), 1024)
	h := Headers([]Secret{sec}, vecID, vecTime, body)
	v := &Verifier{Secrets: []Secret{sec}, Now: at(vecTime)}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := v.Verify(h, body); err != nil {
			b.Fatal(err)
		}
	}
}
