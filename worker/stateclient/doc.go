// Package stateclient is a worker's handle on the state store: the reads
// and writes of one authenticated principal (Client) and its control
// channel carrying watches (Local, for a store in the same process).
//
// Workers are written against Client and watchcache.Source so the same code
// runs in process or over the wire protocol: Local is the in-process
// binding the tests, the simulator and the demo use, and client.Linked
// (package client, Client.Link) is the binding over WebSocket that the
// worker processes of internal/workerproc run through.
//
// # Invariants
//
// Both are Local's.
//
//  1. Every call is made as the principal Local was created with; the store
//     decides authorization and assigns that principal as owner.
//     Code: Local.Get, Local.Put, Local.Delete, Local.Watch, Bound.Put.
//     Tests: TestLocalDropAndReconnect.
//  2. A Link sees a connection's messages in delivery order, then
//     Disconnected once no message of that connection can follow, then (on
//     Reconnect) Reconnected; a message of a dropped connection never
//     arrives after Disconnected.
//     Code: Local.Drop, Local.detach, Local.Reconnect.
//     Tests: TestLocalDropAndReconnect.
package stateclient
