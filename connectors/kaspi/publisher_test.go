package kaspi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/kaspisim"
)

// created is the order.created record the engine writes once 1C holds the order.
func created(t *testing.T, o order.Order) outbox.Record {
	t.Helper()
	data, err := json.Marshal(map[string]any{
		"order": json.RawMessage(o.Canonical()),
		"onec":  map[string]string{"ref": "8a3e1c52-0000-4000-8000-000000000001", "number": "КА-000001", "date": "2026-09-16T10:00:00"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return outbox.Record{ID: 1, EventID: "ev-" + o.ExternalID, Destination: "kaspi", Type: outbox.OrderCreated,
		AggregateType: "order", AggregateID: "kaspi:order:" + o.ExternalID, Sequence: 1, Data: data}
}

// listed lists the simulator and returns the mapped order with this code.
func listed(t *testing.T, c *kaspi.Connector, code string) order.Order {
	t.Helper()
	it, err := c.Get(context.Background(), code)
	if err != nil || it.Order == nil {
		t.Fatalf("Get(%s) = %+v, %v", code, it, err)
	}
	return *it.Order
}

func TestPublisherAcceptsOnceWhenDeliveredTwice(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	mustAdd(t, s, simOrder("6001", time.Now().Add(-time.Hour)))
	rec := created(t, listed(t, c, "6001"))
	pub := c.Publisher()

	for i := range 2 {
		if err := pub.Publish(context.Background(), rec); err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
	if got, want := s.Accepted()["6001"], 1; got != want {
		t.Errorf("Kaspi received %d acceptances, want %d", got, want)
	}
	o, _ := s.Order("6001")
	if o.Status != kaspisim.StatusAcceptedByMerchant || o.State != kaspisim.StatePickup {
		t.Errorf("at Kaspi: state %s status %s, want PICKUP ACCEPTED_BY_MERCHANT", o.State, o.Status)
	}
}

func TestPublisherConcurrentDeliveriesAcceptOnce(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	mustAdd(t, s, simOrder("6002", time.Now().Add(-time.Hour)))
	rec := created(t, listed(t, c, "6002"))
	pub := c.Publisher()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := pub.Publish(context.Background(), rec); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, want := s.Accepted()["6002"], 1; got != want {
		t.Errorf("Kaspi received %d acceptances, want %d", got, want)
	}
}

func TestPublisherSkipsAnOrderAcceptedAlready(t *testing.T) {
	t.Parallel()
	for _, status := range []string{kaspisim.StatusAcceptedByMerchant, kaspisim.StatusCompleted, kaspisim.StatusCancelled, kaspisim.StatusCancelling} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
			mustAdd(t, s, simOrder("6003", time.Now().Add(-time.Hour)))
			rec := created(t, listed(t, c, "6003"))
			if err := s.SetStatus("6003", status); err != nil {
				t.Fatal(err)
			}
			if err := c.Publisher().Publish(context.Background(), rec); err != nil {
				t.Fatalf("Publish = %v", err)
			}
			if got := s.Requests()[kaspisim.OpStatus]; got != 0 {
				t.Errorf("%d POSTs for an order in status %s, want 0", got, status)
			}
		})
	}
}

// A POST refused because the order was accepted meanwhile (by another process, or
// the merchant in the cabinet) is the outcome wanted.
func TestPublisherRefusalOfAnAcceptedOrderIsSuccess(t *testing.T) {
	t.Parallel()
	var s *kaspisim.Kaspi
	race := roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost {
			if err := s.SetStatus("6004", kaspisim.StatusAcceptedByMerchant); err != nil {
				return nil, err
			}
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{Transport: race})
	mustAdd(t, s, simOrder("6004", time.Now().Add(-time.Hour)))
	rec := created(t, listed(t, c, "6004"))
	if err := c.Publisher().Publish(context.Background(), rec); err != nil {
		t.Fatalf("Publish = %v, want success", err)
	}
	if got, want := s.Accepted()["6004"], 1; got != want {
		t.Errorf("%d POSTs, want %d", got, want)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestPublisherRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		op     string
		status int
	}{{kaspisim.OpStatus, http.StatusTooManyRequests}, {kaspisim.OpStatus, http.StatusServiceUnavailable}, {kaspisim.OpByCode, http.StatusTooManyRequests}} {
		t.Run(tt.op+"/"+http.StatusText(tt.status), func(t *testing.T) {
			t.Parallel()
			s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
			mustAdd(t, s, simOrder("6005", time.Now().Add(-time.Hour)))
			rec := created(t, listed(t, c, "6005"))
			s.Faults.Add(1, sim.Fault{Op: tt.op, Status: tt.status, RetryAfter: 7 * time.Second})

			err := c.Publisher().Publish(context.Background(), rec)
			var de *outbox.DeliveryError
			if !errors.As(err, &de) || de.RetryAfter != 7*time.Second || de.Dead {
				t.Fatalf("Publish = %#v, want a DeliveryError with RetryAfter 7s", err)
			}
			if err := c.Publisher().Publish(context.Background(), rec); err != nil {
				t.Fatalf("second delivery: %v", err)
			}
			if got, want := s.Accepted()["6005"], 1; got != want {
				t.Errorf("Kaspi accepted %d times, want %d", got, want)
			}
		})
	}
}

func TestPublisherServerErrorIsRetried(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	mustAdd(t, s, simOrder("6006", time.Now().Add(-time.Hour)))
	rec := created(t, listed(t, c, "6006"))
	s.Faults.Add(1, sim.Fault{Op: kaspisim.OpStatus, Status: http.StatusBadGateway})
	err := c.Publisher().Publish(context.Background(), rec)
	var de *outbox.DeliveryError
	if err == nil || (errors.As(err, &de) && de.Dead) {
		t.Fatalf("Publish = %v, want a retryable error", err)
	}
	if got := s.Requests()[kaspisim.OpStatus]; got != 1 {
		t.Errorf("%d POSTs, want 1: a POST is never retried inside a delivery", got)
	}
}

func TestPublisherUnauthorized(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	mustAdd(t, s, simOrder("6007", time.Now().Add(-time.Hour)))
	rec := created(t, listed(t, c, "6007"))
	_, bad := newEnvSameSim(t, s, "wrong-token")
	err := bad.Publisher().Publish(context.Background(), rec)
	var ae *connectors.AuthError
	if !errors.As(err, &ae) || ae.Key != "connectors.kaspi.token" || !strings.Contains(err.Error(), "connectors.kaspi.token") {
		t.Fatalf("Publish = %v, want an error naming connectors.kaspi.token", err)
	}
	var de *outbox.DeliveryError
	if errors.As(err, &de) && de.Dead {
		t.Error("refused credentials killed the event: it must wait for the token to be fixed")
	}
}

// newEnvSameSim is a second connector on the simulator s, with another token.
func newEnvSameSim(t *testing.T, s *kaspisim.Kaspi, token string) (*kaspisim.Kaspi, *kaspi.Connector) {
	t.Helper()
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c, err := kaspi.New(kaspi.Config{BaseURL: s.URL(), Token: token, Warehouse: "WH1", RatePerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestPublisherGivesUpOnPermanentRefusals(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	mustAdd(t, s, simOrder("6008", time.Now().Add(-time.Hour)))
	rec := created(t, listed(t, c, "6008"))

	unknown := rec
	unknown.Data = []byte(strings.ReplaceAll(string(rec.Data), `"6008"`, `"0000"`))
	notJSON := rec
	notJSON.Data = []byte(`[1,2,3]`)
	tests := []struct {
		name  string
		rec   outbox.Record
		fault int
	}{
		{"refused by Kaspi", rec, http.StatusBadRequest},
		{"unknown order", unknown, 0},
		{"not an order", notJSON, 0},
	}
	for _, tt := range tests {
		if tt.fault != 0 {
			s.Faults.Add(1, sim.Fault{Op: kaspisim.OpStatus, Status: tt.fault})
		}
		err := c.Publisher().Publish(context.Background(), tt.rec)
		var de *outbox.DeliveryError
		if !errors.As(err, &de) || !de.Dead {
			t.Errorf("%s: Publish = %v, want a dead DeliveryError", tt.name, err)
		}
	}
	if o, _ := s.Order("6008"); o.Status != kaspisim.StatusApprovedByBank {
		t.Errorf("status %s after refusals, want APPROVED_BY_BANK", o.Status)
	}
}

func TestPublisherIgnoresOtherEvents(t *testing.T) {
	t.Parallel()
	s, c := newEnv(t, kaspisim.Options{}, kaspi.Config{})
	mustAdd(t, s, simOrder("6009", time.Now().Add(-time.Hour)))
	o := listed(t, c, "6009")
	cancelledEv := created(t, o)
	cancelledEv.Type = outbox.OrderCancelled
	site := o
	site.Source = "site"
	before := len(s.RequestLog())
	for _, rec := range []outbox.Record{cancelledEv, created(t, site)} {
		if err := c.Publisher().Publish(context.Background(), rec); err != nil {
			t.Errorf("Publish(%s of %s) = %v", rec.Type, rec.AggregateID, err)
		}
	}
	if got := len(s.RequestLog()) - before; got != 0 {
		t.Errorf("%d requests to Kaspi for events that are not its business", got)
	}
}
