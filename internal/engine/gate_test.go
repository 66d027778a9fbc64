package engine

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/ordersync/ordersync/internal/onec"
)

// countingClient is an onec.Client whose every method counts its calls and answers
// nothing.
type countingClient struct{ calls map[string]int }

func (c *countingClient) call(name string) { c.calls[name]++ }

func (c *countingClient) Ping(context.Context) (onec.Info, error) {
	c.call("Ping")
	return onec.Info{}, nil
}
func (c *countingClient) FindOrders(context.Context, string) ([]onec.Order, error) {
	c.call("FindOrders")
	return nil, nil
}
func (c *countingClient) CreateOrder(context.Context, onec.CreateOrder) (onec.Created, error) {
	c.call("CreateOrder")
	return onec.Created{}, nil
}
func (c *countingClient) CancelOrder(context.Context, string, string) (onec.Cancelled, error) {
	c.call("CancelOrder")
	return onec.Cancelled{}, nil
}
func (c *countingClient) Stock(context.Context, string) (onec.Stock, error) {
	c.call("Stock")
	return onec.Stock{}, nil
}
func (c *countingClient) ListOrders(context.Context, onec.ListQuery) ([]onec.Order, error) {
	c.call("ListOrders")
	return nil, nil
}
func (c *countingClient) SettleOrder(context.Context, onec.Order, onec.CreateOrder) error {
	c.call("SettleOrder")
	return nil
}
func (c *countingClient) FindReturns(context.Context, string) ([]onec.Return, error) {
	c.call("FindReturns")
	return nil, nil
}
func (c *countingClient) CreateReturn(context.Context, onec.CreateReturn) (onec.Created, error) {
	c.call("CreateReturn")
	return onec.Created{}, nil
}
func (c *countingClient) SettleReturn(context.Context, onec.Return, onec.CreateReturn) error {
	c.call("SettleReturn")
	return nil
}

// Every method of onec.Client that may change 1C waits, in the engine's client, for
// the attempt's row, and sends nothing when it could not be written; only the reads
// go out at once. A method added to onec.Client is held to it here: it is a read
// only when named so below.
func TestEveryCallThatMayChange1CWaitsForTheAttemptRow(t *testing.T) {
	reads := map[string]bool{"Ping": true, "FindOrders": true, "Stock": true, "ListOrders": true, "FindReturns": true}
	failed := errors.New("no attempt row")
	ctx := withOpened(context.Background(), func(context.Context) error { return failed })
	inner := &countingClient{calls: map[string]int{}}
	w := watchedClient{Client: inner, h: newHealth(nil, 0)}
	v := reflect.ValueOf(w)
	it := reflect.TypeFor[onec.Client]()
	for i := range it.NumMethod() {
		m := it.Method(i)
		fn := v.MethodByName(m.Name)
		args := []reflect.Value{reflect.ValueOf(ctx)}
		for j := 1; j < fn.Type().NumIn(); j++ {
			args = append(args, reflect.Zero(fn.Type().In(j)))
		}
		out := fn.Call(args)
		err, _ := out[len(out)-1].Interface().(error)
		switch {
		case reads[m.Name]:
			if inner.calls[m.Name] != 1 || err != nil {
				t.Errorf("%s is a read: it must go out at once (calls %d, err %v)", m.Name, inner.calls[m.Name], err)
			}
		default:
			if inner.calls[m.Name] != 0 || !errors.Is(err, failed) || onec.ClassOf(err) != onec.Transient {
				t.Errorf("%s may change 1C: with no attempt row it must send nothing and fail transiently (calls %d, err %v)",
					m.Name, inner.calls[m.Name], err)
			}
		}
	}
}
