package yandexmarket_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors/yandexmarket"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/outbox"
	"github.com/ordersync/ordersync/internal/sim/ymsim"
)

func created(id, number string) outbox.Record {
	data, _ := json.Marshal(map[string]any{
		"order": order.Order{Source: "ym", ExternalID: id, MarketplaceID: id},
		"onec":  map[string]string{"ref": "guid-" + id, "number": number},
	})
	return outbox.Record{EventID: "ev-" + id, Type: outbox.OrderCreated, AggregateType: "order", AggregateID: "ym:order:" + id, Data: data}
}

// TestAcknowledgeOnceWhenDeliveredTwice: the same event, delivered twice in a row
// and twice at once, sets one external id and makes one transition, and Yandex
// refuses nothing.
func TestAcknowledgeOnceWhenDeliveredTwice(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{})
	now := time.Now()
	s.AddOrder(anOrder(1, now))
	s.AddOrder(anOrder(2, now))
	cancelled := anOrder(3, now)
	cancelled.Status, cancelled.Substatus = ymsim.StatusCancelled, ymsim.SubShopFailed
	s.AddOrder(cancelled)
	c := newConn(t, s, nil)
	p := c.Publisher()
	ctx := context.Background()
	for range 2 {
		if err := p.Publish(ctx, created("1", "ЗК-0001")); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { errs[i] = p.Publish(ctx, created("2", "ЗК-0002")) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, created("3", "ЗК-0003")); err != nil {
		t.Fatalf("a cancelled order: %v", err)
	}
	ids := s.ExternalIDs()
	if ids[1] != "ЗК-0001" || ids[2] != "ЗК-0002" || len(ids) != 2 {
		t.Fatalf("external ids %v, want orders 1 and 2 with their 1C numbers", ids)
	}
	if s.Transitions(1) != 1 || s.Transitions(2) != 1 || s.Transitions(3) != 0 {
		t.Fatalf("transitions %d %d %d, want 1 1 0", s.Transitions(1), s.Transitions(2), s.Transitions(3))
	}
	if len(s.RefusedTransitions()) != 0 || len(s.RefusedExternalIDs()) != 0 {
		t.Fatalf("refused transitions %v external ids %v, want none", s.RefusedTransitions(), s.RefusedExternalIDs())
	}
	if o, _ := s.Order(1); o.Substatus != yandexmarket.SubReadyToShip {
		t.Fatalf("order 1 is %s/%s", o.Status, o.Substatus)
	}
	var de *outbox.DeliveryError
	if err := p.Publish(ctx, created("404", "ЗК-404")); !errors.As(err, &de) || !de.Dead {
		t.Fatalf("an unknown order: %v, want a dead delivery", err)
	}
}

// TestAcknowledgeAfterReadyToShipSetByHand: an order marked ready in the cabinet is
// not sent a late external id (Yandex would refuse it) nor a second transition.
func TestAcknowledgeAfterReadyToShipSetByHand(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{})
	o := anOrder(7, time.Now())
	o.Substatus = ymsim.SubReadyToShip
	o.Status = ymsim.StatusProcessing
	s.AddOrder(o)
	c := newConn(t, s, nil)
	if err := c.Publisher().Publish(context.Background(), created("7", "ЗК-7")); err != nil {
		t.Fatal(err)
	}
	if len(s.ExternalIDs()) != 0 || s.Transitions(7) != 0 || len(s.RefusedExternalIDs()) != 0 || len(s.RefusedTransitions()) != 0 {
		t.Fatalf("external ids %v transitions %d refused %v %v", s.ExternalIDs(), s.Transitions(7), s.RefusedExternalIDs(), s.RefusedTransitions())
	}
}

// TestAcknowledgeOffCallsNothing: with Acknowledge false the event is taken as it is.
func TestAcknowledgeOffCallsNothing(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{})
	s.AddOrder(anOrder(8, time.Now()))
	c := newConn(t, s, func(cfg *yandexmarket.Config) { cfg.Acknowledge = false })
	if err := c.Publisher().Publish(context.Background(), created("8", "ЗК-8")); err != nil {
		t.Fatal(err)
	}
	if len(s.ExternalIDs()) != 0 || s.Transitions(8) != 0 {
		t.Fatal("Yandex was called with Acknowledge false")
	}
}

// TestAcknowledgeRateLimitedIsRetryAfter: a 420 on a write is a delivery error
// asking for a retry after the wait the headers give.
func TestAcknowledgeRateLimitedIsRetryAfter(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{})
	s.AddOrder(anOrder(9, time.Now()))
	c := newConn(t, s, nil)
	s.Throttle(1)
	var de *outbox.DeliveryError
	if err := c.Publisher().Publish(context.Background(), created("9", "ЗК-9")); !errors.As(err, &de) || de.RetryAfter <= 0 || de.Dead {
		t.Fatalf("err %v, want a DeliveryError with RetryAfter", err)
	}
}
