package wsfanout_test

import (
	"context"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/internal/wsfanout"
	"github.com/keeppeek/statestore/schema"
)

func doc(session, put int) []byte { return testdoc.MediaIntent(512, session*1000+put) }

// The load test: 127 WebSocket sessions, each watching the namespace and
// writing its own key; Run fails unless every update reached every watch
// exactly once, in commit order.
func TestEveryUpdateReachesEveryWatchOnceInOrder(t *testing.T) {
	t.Parallel()
	s, err := statestore.Open(statestore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	puts := 2
	if testing.Short() {
		puts = 1
	}
	res, err := wsfanout.Run(context.Background(), s, wsfanout.Config{Sessions: 127, PutsPerSession: puts, Schema: schema.MediaIntentV1, Document: doc})
	if err != nil {
		t.Fatal(err)
	}
	if res.Puts != 127*puts || res.Updates != 127*127*puts || len(res.Delivery) != res.Updates || len(res.Put) != res.Puts {
		t.Fatalf("%d puts, %d updates, %d delivery and %d put samples; want %d, %d", res.Puts, res.Updates, len(res.Delivery), len(res.Put), 127*puts, 127*127*puts)
	}
	st := s.Stats().Watches
	if st.Open != 0 || st.Disconnected != 127 {
		t.Fatalf("after the run: %d watches open, %d removed by disconnect; want 0 and 127", st.Open, st.Disconnected)
	}
	for reason, n := range st.Closed {
		if n != 0 {
			t.Fatalf("%d watches closed with %v", n, reason)
		}
	}
}

func TestRunRefusesWritersAtTheAckBound(t *testing.T) {
	t.Parallel()
	s, err := statestore.Open(statestore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = wsfanout.Run(context.Background(), s, wsfanout.Config{Sessions: 40, Writers: 32, Schema: schema.MediaIntentV1, Document: doc})
	if err == nil || !strings.Contains(err.Error(), "unacknowledged-update bound 32") {
		t.Fatalf("Run with 32 writers = %v, want a refusal naming the bound", err)
	}
}
