// Package wirestore converts between the store's own types (package
// statestore: result codes, errors, the write requests) and their
// keeppeek.statestore.v1 messages, both ways, for the server (wire/dispatch)
// and the Go client (client) alike. Package wire converts the values below
// the store (entries, update kinds, close reasons, watch messages); the
// store imports it, so these conversions, which name the store's types,
// live one level up.
//
// # Invariants
//
//  1. Every store code but OK maps to the wire code of the same spelling
//     and back, every wire code but UNSPECIFIED is reached, and
//     UNSPECIFIED or a code unknown to this version is reported as not
//     found, never taken for a known one; an error answered with one is
//     UNAVAILABLE naming the wire code.
//     Code: Code, StoreCode, StoreError.
//     Tests: TestEveryCodeRoundTrips, TestErrorRoundTrips.
//  2. An error crosses the wire with its code, field, message and current
//     revision; an error that is not the store's (which the store never
//     returns) is UNAVAILABLE with its text, as statestore.CodeOf has it.
//     Code: Error, StoreError.
//     Tests: TestErrorRoundTrips.
//  3. A write request crosses the wire unchanged: a blind write carries no
//     expected_revision, CreateOnly carries 0, IfRevision(n) carries n, and
//     a TTL travels in whole milliseconds rounded up, so a positive TTL
//     never becomes 0 (no lease); a negative TTL, which the wire cannot
//     carry, is TTL_INVALID before anything is sent.
//     Code: PutState, FillPutState, StorePutRequest, DeleteState, StoreDeleteRequest, expectedRevision, ttlMillis, storeTTL.
//     Tests: TestRequestsRoundTrip, TestFillPutStateReusesItsMessage.
package wirestore

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/keeppeek/statestore"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

var codes = [...]pb.StateStoreErrorCode{
	statestore.NotFound:         pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_NOT_FOUND,
	statestore.Conflict:         pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_CONFLICT,
	statestore.TTLInvalid:       pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_TTL_INVALID,
	statestore.PermissionDenied: pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_PERMISSION_DENIED,
	statestore.InvalidArgument:  pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_INVALID_ARGUMENT,
	statestore.SchemaInvalid:    pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_SCHEMA_INVALID,
	statestore.ValueTooLarge:    pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_VALUE_TOO_LARGE,
	statestore.QuotaExceeded:    pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_QUOTA_EXCEEDED,
	statestore.WatchTooBroad:    pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_WATCH_TOO_BROAD,
	statestore.WatchLimit:       pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_WATCH_LIMIT,
	statestore.Storage:          pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_STORAGE,
	statestore.Unavailable:      pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNAVAILABLE,
}

// Code returns the wire spelling of a store code. OK and unknown values
// have none (UNSPECIFIED).
func Code(c statestore.Code) pb.StateStoreErrorCode {
	if c < 0 || int(c) >= len(codes) {
		return pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNSPECIFIED
	}
	return codes[c]
}

// StoreCode returns the store code a wire code spells, and false for
// UNSPECIFIED or a code this version does not know (proto3 enums are open,
// so a newer server may send one).
func StoreCode(c pb.StateStoreErrorCode) (statestore.Code, bool) {
	if c == pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNSPECIFIED {
		return statestore.OK, false
	}
	for i, w := range codes {
		if w == c {
			return statestore.Code(i), true
		}
	}
	return statestore.OK, false
}

// Error returns the StateStoreError answering a request that failed with
// err.
func Error(err error) *pb.StateStoreError {
	e := &pb.StateStoreError{Code: Code(statestore.CodeOf(err)), Message: err.Error()}
	var se *statestore.Error
	if errors.As(err, &se) {
		e.Field, e.CurrentRevision = se.Field, se.CurrentRevision
		if se.Message != "" {
			e.Message = se.Message
		}
	}
	if e.Code == pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNSPECIFIED {
		e.Code = pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNAVAILABLE
	}
	return e
}

// StoreError returns the *statestore.Error a StateStoreError carries, so
// errors.Is(err, statestore.ErrConflict), errors.As and statestore.CodeOf
// work on it as on the store's own. A code this version does not know is
// UNAVAILABLE, its message naming the wire code.
func StoreError(m *pb.StateStoreError) *statestore.Error {
	e := &statestore.Error{Field: m.GetField(), Message: m.GetMessage(), CurrentRevision: m.GetCurrentRevision()}
	c, ok := StoreCode(m.GetCode())
	if !ok {
		c = statestore.Unavailable
		e.Message = fmt.Sprintf("the server answered with error code %v, unknown to this client: %s", m.GetCode(), e.Message)
	}
	e.Code = c
	return e
}

// PutState returns the PutState of req with requestID. A negative TTL is
// TTL_INVALID, as the store has it, and nothing is built.
func PutState(requestID uint64, req statestore.PutRequest) (*pb.PutState, error) {
	m := &pb.PutState{}
	if err := FillPutState(m, new(uint64), requestID, req); err != nil {
		return nil, err
	}
	return m, nil
}

// FillPutState sets the fields of m, a fresh or reset PutState, to
// PutState(requestID, req)'s, without allocating: rev is where
// expected_revision's value goes when req.Expect sets one (m then points
// at it), so that a caller can hold m and rev in one allocation. The
// document is shared with req. A negative TTL is TTL_INVALID, and m is
// left as it was.
func FillPutState(m *pb.PutState, rev *uint64, requestID uint64, req statestore.PutRequest) error {
	ms, err := ttlMillis(req.TTL)
	if err != nil {
		return err
	}
	m.RequestId, m.Namespace, m.Key, m.Schema = requestID, req.Namespace, req.Key, req.Schema
	m.Document, m.ExpectedRevision, m.TtlMs = req.Document, nil, ms
	if r, ok := req.Expect.Revision(); ok {
		*rev = r
		m.ExpectedRevision = rev
	}
	return nil
}

// StorePutRequest returns the PutRequest m carries.
func StorePutRequest(m *pb.PutState) statestore.PutRequest {
	return statestore.PutRequest{Namespace: m.GetNamespace(), Key: m.GetKey(), Schema: m.GetSchema(),
		Document: m.GetDocument(), Expect: storeExpect(m.ExpectedRevision), TTL: storeTTL(m.GetTtlMs())}
}

// DeleteState returns the DeleteState of req with requestID.
func DeleteState(requestID uint64, req statestore.DeleteRequest) *pb.DeleteState {
	return &pb.DeleteState{RequestId: requestID, Namespace: req.Namespace, Key: req.Key, ExpectedRevision: expectedRevision(req.Expect)}
}

// StoreDeleteRequest returns the DeleteRequest m carries.
func StoreDeleteRequest(m *pb.DeleteState) statestore.DeleteRequest {
	return statestore.DeleteRequest{Namespace: m.GetNamespace(), Key: m.GetKey(), Expect: storeExpect(m.ExpectedRevision)}
}

// expectedRevision is the optional expected_revision of x: absent for a
// blind write.
func expectedRevision(x statestore.Expect) *uint64 {
	rev, ok := x.Revision()
	if !ok {
		return nil
	}
	return &rev
}

func storeExpect(rev *uint64) statestore.Expect {
	if rev == nil {
		return statestore.Expect{}
	}
	return statestore.IfRevision(*rev)
}

// ttlMillis is ttl_ms of d, rounded up: 1 ns is 1 ms (which the server
// refuses as below its minimum), not 0 (no lease).
func ttlMillis(d time.Duration) (uint64, error) {
	if d < 0 {
		return 0, &statestore.Error{Code: statestore.TTLInvalid, Field: "ttl",
			Message: fmt.Sprintf("ttl %v is negative (0 means no lease)", d)}
	}
	ms := uint64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms, nil
}

// storeTTL converts ttl_ms; values past time.Duration's range saturate,
// which the store then clamps to its maximum like any other long TTL.
func storeTTL(ms uint64) time.Duration {
	if ms > uint64(math.MaxInt64/int64(time.Millisecond)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ms) * time.Millisecond
}
