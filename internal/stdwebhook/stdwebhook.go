// Package stdwebhook signs and verifies webhooks the Standard Webhooks way
// (https://www.standardwebhooks.com/): three headers, webhook-id, webhook-timestamp
// (unix seconds) and webhook-signature, the last holding space-separated "v1,<base64>"
// entries, each an HMAC-SHA256 of "<id>.<timestamp>.<body>" under a key given as
// "whsec_" + base64. Several entries let a sender rotate its secret without a
// moment in which the receiver refuses it.
//
// The outbox's webhook destination signs with it and the webhook inbox verifies with
// it. It knows nothing about what a body holds: verification is on the bytes as
// received, never on re-serialised JSON.
package stdwebhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every secret's text form.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a timestamp may be from the receiver's clock, either
// way, when Verifier.Tolerance is zero.
const DefaultTolerance = 5 * time.Minute

// version is the only signature scheme this package signs with and accepts.
const version = "v1"

// masked is every secret's printed form.
const masked = SecretPrefix + "***"

// Secret is a signing key. Printing it in any way (fmt verbs, slog) shows
// "whsec_***"; only Encode gives the key away.
type Secret struct {
	key []byte
}

// ParseSecret reads a secret in its text form, "whsec_" followed by the key in
// standard base64. Surrounding white space (a secrets file's final newline) is
// ignored. Errors say what is wrong and never repeat the secret.
func ParseSecret(s string) (Secret, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Secret{}, errors.New("stdwebhook: secret is empty")
	}
	enc, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return Secret{}, fmt.Errorf("stdwebhook: secret must start with %q", SecretPrefix)
	}
	if enc == "" {
		return Secret{}, fmt.Errorf("stdwebhook: secret has nothing after %q", SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		var ce base64.CorruptInputError
		if errors.As(err, &ce) {
			return Secret{}, fmt.Errorf("stdwebhook: secret is not standard base64 after %q (bad input at character %d of %d)",
				SecretPrefix, int64(ce)+1, len(enc))
		}
		return Secret{}, fmt.Errorf("stdwebhook: secret is not standard base64 after %q", SecretPrefix)
	}
	if len(key) == 0 {
		return Secret{}, errors.New("stdwebhook: secret decodes to an empty key")
	}
	return Secret{key: key}, nil
}

// MustParseSecret is ParseSecret for secrets written in code (tests, examples); it
// panics on an invalid secret.
func MustParseSecret(s string) Secret {
	sec, err := ParseSecret(s)
	if err != nil {
		panic(err)
	}
	return sec
}

// NewSecret makes a secret of key; the slice is copied.
func NewSecret(key []byte) Secret {
	return Secret{key: append([]byte(nil), key...)}
}

// GenerateSecret makes a fresh random secret of 32 bytes (the specification asks
// for 24 to 64).
func GenerateSecret() (Secret, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return Secret{}, fmt.Errorf("stdwebhook: generate secret: %w", err)
	}
	return Secret{key: key}, nil
}

// IsZero reports whether the secret holds no key.
func (s Secret) IsZero() bool { return len(s.key) == 0 }

// Encode returns the secret's text form, "whsec_<base64>", for a configuration
// file or a receiver's set-up. It is the one way to see the key: never log it.
func (s Secret) Encode() string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(s.key)
}

// String returns "whsec_***".
func (s Secret) String() string { return masked }

// GoString returns "whsec_***", so %#v does not print the key either.
func (s Secret) GoString() string { return masked }

// Format prints "whsec_***" whatever the verb, so %x or %d cannot print the key.
func (s Secret) Format(f fmt.State, verb rune) { _, _ = io.WriteString(f, masked) }

// LogValue keeps the key out of slog lines.
func (s Secret) LogValue() slog.Value { return slog.StringValue(masked) }

// mac is the raw HMAC-SHA256 of "<id>.<timestamp>.<body>" under key.
func mac(key []byte, id, timestamp string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(timestamp))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Sign returns one webhook-signature entry, "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>", with the timestamp in unix seconds.
func Sign(secret Secret, id string, ts time.Time, body []byte) string {
	return sign(secret, id, strconv.FormatInt(ts.Unix(), 10), body)
}

func sign(secret Secret, id, timestamp string, body []byte) string {
	return version + "," + base64.StdEncoding.EncodeToString(mac(secret.key, id, timestamp, body))
}

// Headers returns the three Standard Webhooks headers for a delivery: webhook-id,
// webhook-timestamp (unix seconds) and webhook-signature with one entry per secret,
// in the order given (the current secret first, then those being rotated out).
// With no secrets there is no webhook-signature header, and no receiver will accept
// the delivery.
func Headers(secrets []Secret, id string, ts time.Time, body []byte) http.Header {
	timestamp := strconv.FormatInt(ts.Unix(), 10)
	h := make(http.Header, 3)
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, timestamp)
	if len(secrets) > 0 {
		sigs := make([]string, len(secrets))
		for i, s := range secrets {
			sigs[i] = sign(s, id, timestamp, body)
		}
		h.Set(HeaderSignature, strings.Join(sigs, " "))
	}
	return h
}

// Verification errors. Verify wraps them with the detail; match with errors.Is and
// answer 401 with the error's text, which never holds a secret.
var (
	// ErrMissingHeaders: one of the three headers is absent or empty.
	ErrMissingHeaders = errors.New("stdwebhook: missing header")
	// ErrTimestamp: webhook-timestamp is not unix seconds or is outside the tolerance.
	ErrTimestamp = errors.New("stdwebhook: bad timestamp")
	// ErrSignature: no v1 entry of webhook-signature matches any secret.
	ErrSignature = errors.New("stdwebhook: bad signature")
	// ErrID: the delivery is signed, but its webhook-id cannot be stored as an
	// event id (see CheckID). Answer 400: a retry of the same delivery would not help.
	ErrID = errors.New("stdwebhook: bad webhook-id")
)

// CheckID says what is wrong with a webhook-id ("" when nothing): it must be valid
// UTF-8 (two ids whose bytes differ must stay two ids, and PostgreSQL refuses
// invalid text) of printable characters (no NUL or other control character).
func CheckID(id string) string {
	if !utf8.ValidString(id) {
		return "is not valid UTF-8"
	}
	for _, r := range id {
		if !unicode.IsPrint(r) {
			return fmt.Sprintf("contains the non-printable character %U", r)
		}
	}
	return ""
}

// Verifier checks incoming deliveries. The zero Tolerance means DefaultTolerance and
// a nil Now means time.Now. A Verifier is safe for concurrent use once set up.
type Verifier struct {
	// Secrets are the keys a delivery may be signed with; any one matching is enough
	// (several during a rotation).
	Secrets []Secret
	// Tolerance is how far webhook-timestamp may be from Now, earlier or later.
	Tolerance time.Duration
	Now       func() time.Time
}

// Verify checks a delivery's headers against its body, the bytes exactly as
// received, and returns its webhook-id. Entries of versions other than v1 are
// ignored; v1 entries are compared in constant time. A delivery whose signature
// matches but whose webhook-id CheckID refuses is an error wrapping ErrID: the id
// returned is always one CheckID accepts.
func (v *Verifier) Verify(h http.Header, body []byte) (id string, err error) {
	// Only HTTP's optional white space is trimmed: a Unicode space (U+0085, U+00A0)
	// is part of the id, which CheckID then refuses.
	id = strings.Trim(h.Get(HeaderID), " \t")
	timestamp := strings.Trim(h.Get(HeaderTimestamp), " \t")
	signature := strings.Join(h.Values(HeaderSignature), " ")
	var missing []string
	if id == "" {
		missing = append(missing, HeaderID)
	}
	if timestamp == "" {
		missing = append(missing, HeaderTimestamp)
	}
	if strings.TrimSpace(signature) == "" {
		missing = append(missing, HeaderSignature)
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%w: %s", ErrMissingHeaders, strings.Join(missing, ", "))
	}

	if err := v.checkTimestamp(timestamp); err != nil {
		return "", err
	}

	if len(v.Secrets) == 0 {
		return "", fmt.Errorf("%w: no secret configured", ErrSignature)
	}
	want := make([][]byte, len(v.Secrets))
	for i, s := range v.Secrets {
		want[i] = mac(s.key, id, timestamp, body)
	}
	sawV1 := false
	for _, entry := range strings.Fields(signature) {
		ver, enc, ok := strings.Cut(entry, ",")
		if !ok || ver != version {
			continue
		}
		sawV1 = true
		got, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			continue
		}
		for _, w := range want {
			if hmac.Equal(got, w) {
				if msg := CheckID(id); msg != "" {
					return "", fmt.Errorf("%w: %s %s", ErrID, HeaderID, msg)
				}
				return id, nil
			}
		}
	}
	if !sawV1 {
		return "", fmt.Errorf("%w: no %s entry in %s", ErrSignature, version, HeaderSignature)
	}
	return "", fmt.Errorf("%w: no signature matches", ErrSignature)
}

func (v *Verifier) checkTimestamp(timestamp string) error {
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s is not unix seconds", ErrTimestamp, HeaderTimestamp)
	}
	tolerance := v.Tolerance
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	// Compare in seconds: a far-off timestamp would overflow a time.Duration.
	nowSec := now().Unix()
	tolSec := int64(tolerance / time.Second)
	switch {
	case sec < nowSec-tolSec:
		return fmt.Errorf("%w: too old (more than %s before now)", ErrTimestamp, tolerance)
	case sec > nowSec+tolSec:
		return fmt.Errorf("%w: in the future (more than %s after now)", ErrTimestamp, tolerance)
	}
	return nil
}
