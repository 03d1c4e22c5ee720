package reconcile

import (
	"context"
	"testing"

	"github.com/keeppeek/statestore/schema"
)

func registry(t *testing.T) *schema.Registry {
	t.Helper()
	r := schema.NewRegistry()
	if err := RegisterSchemas(r); err != nil {
		t.Fatal(err)
	}
	return r
}

type nopCaps struct{}

func (nopCaps) Source(string) (Source, bool) { return Source{}, false }
func (nopCaps) Changed() <-chan struct{}     { return nil }

type nopMedia struct{}

func (nopMedia) Subscribe(context.Context, SubscribeRequest) (Binding, error) { return Binding{}, nil }
func (nopMedia) Unsubscribe(context.Context, string) error                    { return nil }
func (nopMedia) StartPublication(context.Context, PublicationRequest) (Binding, error) {
	return Binding{}, nil
}
func (nopMedia) StopPublication(context.Context, string) error { return nil }
