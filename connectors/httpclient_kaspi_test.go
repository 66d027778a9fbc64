package connectors_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/kaspi"
)

// TestConnectorAnswerOverTheLimit: a Kaspi listing larger than the limit that
// cmd/ordersync passes (BoundResponses, as the Transport of the connector's
// configuration) fails the listing with an error naming the key, after one request.
func TestConnectorAnswerOverTheLimit(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/vnd.api+json")
		w.Write([]byte(`{"data":[`))
		w.Write(bytes.Repeat([]byte(`{"type":"orders","id":"1"},`), 80_000)) // about 2 MiB
		w.Write([]byte(`{}],"meta":{"pageCount":1}}`))
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name      string
		transport http.RoundTripper
		want      string
	}{
		{"configured", connectors.BoundResponses(nil, 1<<20, "connectors.kaspi.max_response"), "connectors.kaspi.max_response (1MiB)"},
		{"configured above the size", connectors.BoundResponses(nil, 64<<20, "connectors.kaspi.max_response"), ""},
	} {
		requests.Store(0)
		c, err := kaspi.New(kaspi.Config{BaseURL: srv.URL, Token: "token", Warehouse: "WH1", States: []string{"NEW"},
			Statuses: []string{"APPROVED_BY_BANK"}, Transport: tc.transport, RatePerSecond: -1})
		if err != nil {
			t.Fatal(err)
		}
		to := time.Now()
		err = c.List(context.Background(), to.Add(-time.Hour), to, func([]connectors.Item) error { return nil })
		var tl *connectors.ResponseTooLargeError
		switch {
		case tc.want == "" && errors.As(err, &tl):
			t.Errorf("%s: %v, want the listing read", tc.name, err)
		case tc.want != "" && (!errors.As(err, &tl) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "kaspi: ")):
			t.Errorf("%s: err = %v, want a kaspi error naming %s", tc.name, err, tc.want)
		case tc.want != "" && requests.Load() != 1:
			t.Errorf("%s: the server received %d requests, want 1 (not retried)", tc.name, requests.Load())
		}
		t.Logf("%s: %v", tc.name, err)
	}
}
