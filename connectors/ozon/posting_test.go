package ozon

import (
	"encoding/json"
	"testing"

	"github.com/shopspring/decimal"
)

func TestParsePrice(t *testing.T) {
	t.Parallel()
	cases := []struct {
		raw      string
		want     string
		currency string
		bad      bool
	}{
		{raw: `"1530.0000"`, want: "1530"},
		{raw: `"279.0000"`, want: "279"},
		{raw: `" 1259 "`, want: "1259"},
		{raw: `1390.000000`, want: "1390"},
		{raw: `0.1`, want: "0.1"},
		{raw: `{"amount":"300","currency":"RUB"}`, want: "300", currency: "RUB"},
		{raw: `{"amount":0.1,"currency":"kzt"}`, want: "0.1", currency: "KZT"},
		{raw: `{"amount":"0.30000000000000004"}`, want: "0.30000000000000004"},
		{raw: `"12345678901234567890.123456789"`, want: "12345678901234567890.123456789"},
		{raw: ``, bad: true},
		{raw: `null`, bad: true},
		{raw: `""`, bad: true},
		{raw: `"ten"`, bad: true},
		{raw: `true`, bad: true},
		{raw: `[1]`, bad: true},
		{raw: `{"currency":"RUB"}`, bad: true},
		{raw: `{"amount":"1,5"}`, bad: true},
	}
	for _, c := range cases {
		got, cur, err := parsePrice(json.RawMessage(c.raw))
		if c.bad {
			if err == nil {
				t.Errorf("parsePrice(%s) = %s, want an error", c.raw, got)
			}
			continue
		}
		if err != nil || !got.Equal(decimal.RequireFromString(c.want)) || cur != c.currency {
			t.Errorf("parsePrice(%s) = %s %q %v, want exactly %s %q", c.raw, got, cur, err, c.want, c.currency)
		}
	}
}

func TestUsableID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"05708065-0029-1": true, "": false, "a:b": false, "a b": false, "a\nb": false,
		"12345678901234567890123456789012345678901234567890123456789012345": false,
	} {
		if got := usableID(id); got != want {
			t.Errorf("usableID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestAuthFailure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status int
		msg    string
		key    string
	}{
		{401, "Client-Id and Api-Key headers are required", keyAPIKey},
		{403, "Api-Key is missing a required role for a method", keyAPIKey},
		{404, "Invalid Api-Key, please check the key and try again", keyAPIKey},
		{400, "Client-Id header value should be positive integer", keyClientID},
		{404, "posting not found", ""},
		{400, "invalid request body", ""},
		{429, "You have reached request rate limit per second", ""},
	}
	for _, c := range cases {
		key, ok := authFailure(c.status, c.msg)
		if key != c.key || ok != (c.key != "") {
			t.Errorf("authFailure(%d, %q) = %q %v, want %q", c.status, c.msg, key, ok, c.key)
		}
	}
}
