package main

import (
	"context"
	"fmt"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/internal/wsfanout"
	"github.com/keeppeek/statestore/schema"
)

// nameWSLoad is the WebSocket load test (it was ws_fanout before that
// name went to the 1,024-watcher fan-out beside the peers).
const nameWSLoad = "ws_load"

// runWSLoad is the WebSocket load test on a durable store: casKeys (127)
// concurrent sessions over real WebSocket connections on 127.0.0.1, each
// watching the namespace and writing its own key env.Ops/casKeys times (30
// with the default --ops), 16 puts per round and every watch acknowledging
// the round before the next. wsfanout.Run verifies that every update
// reached every watch exactly once in commit order. Latency is per (put,
// watch): from the put's send to that watch's decode of its update; ops/s
// counts puts.
func runWSLoad(env *Env) ([]harness.Result, error) {
	s, err := openScratch(env, nameWSLoad, statestore.Options{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	puts := max(1, env.Ops/casKeys)
	res, err := wsfanout.Run(context.Background(), s, wsfanout.Config{Sessions: casKeys, PutsPerSession: puts,
		Schema: schema.MediaIntentV1, Document: func(session, put int) []byte { return testdoc.MediaIntent(harness.DocBytes, session*1000+put) }})
	if err != nil {
		return nil, err
	}
	delivery := harness.NewLatencies(len(res.Delivery))
	for i, d := range res.Delivery {
		delivery.Record(d)
		if err := env.Run.Check(nameWSLoad+" delivery", -1, i, d); err != nil {
			return nil, err
		}
	}
	put := harness.NewLatencies(len(res.Put))
	for i, d := range res.Put {
		put.Record(d)
		if err := env.Run.Check(nameWSLoad+" put", -1, i, d); err != nil {
			return nil, err
		}
	}
	r := harness.Result{Name: nameWSLoad, Writers: 16, OpsPerS: float64(res.Puts) / res.Elapsed.Seconds(),
		Note: fmt.Sprintf("sessions=%d puts=%d updates=%d (%.0f/s) each verified once in order; latency put-send->update-decode per watch; put answer p50=%.0fus p95=%.0fus max=%.0fus",
			casKeys, res.Puts, res.Updates, float64(res.Updates)/res.Elapsed.Seconds(),
			harness.Micros(put.Percentile(50)), harness.Micros(put.Percentile(95)), harness.Micros(put.Max()))}
	delivery.Fill(&r)
	return []harness.Result{r}, nil
}
