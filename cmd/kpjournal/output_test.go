package main

import (
	"encoding/json"
	"regexp"
	"testing"
)

func TestIndexRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		first, last uint64
		want        string
	}{
		{1, 0, "none"},
		{13, 12, "none"},
		{13, 13, "13..13"},
		{1, 40, "1..40"},
	} {
		if got := indexRange(tc.first, tc.last); got != tc.want {
			t.Errorf("indexRange(%d, %d) = %q, want %q", tc.first, tc.last, got, tc.want)
		}
	}
}

func TestOptJSON(t *testing.T) {
	t.Parallel()
	type doc struct {
		A opt[string] `json:"a"`
		B opt[uint64] `json:"b"`
	}
	for _, tc := range []struct {
		in   doc
		want string
	}{
		{doc{}, `{"a":null,"b":null}`},
		{doc{some(""), some(uint64(0))}, `{"a":"","b":0}`}, // present zero values stay values
		{doc{some("x"), some(uint64(7))}, `{"a":"x","b":7}`},
	} {
		b, err := json.Marshal(tc.in)
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v marshals to %s (%v), want %s", tc.in, b, err, tc.want)
		}
		var back doc
		if err := json.Unmarshal(b, &back); err != nil || back != tc.in {
			t.Errorf("%s unmarshals to %+v (%v), want %+v", b, back, err, tc.in)
		}
	}
}

// An empty journal's index range is written "none", never as first..first-1.
func TestEmptyIndexRangesSayNone(t *testing.T) {
	t.Parallel()
	ts := newTestStore(t)
	ts.close()
	backwards := regexp.MustCompile(`\b1\.\.0\b`)
	for _, args := range [][]string{
		{"stat", "--dir", ts.dir},
		{"verify", "--dir", ts.dir},
		{"checkpoint", "--dir", ts.dir},
	} {
		code, out, errs := kp(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		wantContains(t, args[0]+" output", out, "indexes none")
		if backwards.MatchString(out) {
			t.Errorf("%v writes an empty range backwards:\n%s", args, out)
		}
	}
}
