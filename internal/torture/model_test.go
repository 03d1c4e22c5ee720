package torture

import "testing"

func put(key, value string, expect int64) call {
	return call{Kind: opPut, Key: key, Expect: expect, Value: value}
}
func get(key string) call               { return call{Kind: opGet, Key: key} }
func del(key string, expect int64) call { return call{Kind: opDel, Key: key, Expect: expect} }

func ok(rev uint64, value string) result { return result{Code: codeOK, Rev: rev, Value: value} }

var (
	notFound = result{Code: codeNotFound}
	killed   = result{Unknown: true}
)

func conflictAt(rev uint64) result { return result{Code: codeConflict, Rev: rev} }

// TestStep pins the register model one operation at a time.
func TestStep(t *testing.T) {
	t.Parallel()
	present := register{Exists: true, Value: "a", Rev: 5}
	unknownRev := register{Exists: true, Value: "b"}
	cases := []struct {
		name string
		s    register
		c    call
		r    result
		want []register // nil: the result is impossible
	}{
		{"read of a missing key", register{}, get("k"), notFound, []register{{}}},
		{"read invents a value", register{}, get("k"), ok(3, "x"), nil},
		{"read of the value", present, get("k"), ok(5, "a"), []register{present}},
		{"read at another revision", present, get("k"), ok(6, "a"), nil},
		{"read of another value", present, get("k"), ok(5, "z"), nil},
		{"read misses a present key", present, get("k"), notFound, nil},
		{"read learns an unknown revision", unknownRev, get("k"), ok(9, "b"), []register{{Exists: true, Value: "b", Rev: 9}}},
		{"create on a missing key", register{}, put("k", "c", 0), ok(7, ""), []register{{Exists: true, Value: "c", Rev: 7}}},
		{"create on a present key succeeds", present, put("k", "c", 0), ok(7, ""), nil},
		{"create on a present key conflicts", present, put("k", "c", 0), conflictAt(5), []register{present}},
		{"conflict with a wrong current revision", present, put("k", "c", 0), conflictAt(4), nil},
		{"compare-and-set at the revision", present, put("k", "c", 5), ok(8, ""), []register{{Exists: true, Value: "c", Rev: 8}}},
		{"compare-and-set goes back in revision", present, put("k", "c", 5), ok(5, ""), nil},
		{"compare-and-set at a stale revision succeeds", present, put("k", "c", 4), ok(8, ""), nil},
		{"compare-and-set on a missing key", register{}, put("k", "c", 4), conflictAt(0), []register{{}}},
		{"compare-and-set against an unknown revision", unknownRev, put("k", "c", 4), conflictAt(6), []register{{Exists: true, Value: "b", Rev: 6}}},
		{"blind write", present, put("k", "c", blind), ok(9, ""), []register{{Exists: true, Value: "c", Rev: 9}}},
		{"killed write that could apply", register{}, put("k", "c", 0), killed, []register{{}, {Exists: true, Value: "c"}}},
		{"killed write that could not", present, put("k", "c", 0), killed, []register{present}},
		{"delete at the revision", present, del("k", 5), ok(6, ""), []register{{}}},
		{"delete at a stale revision", present, del("k", 4), conflictAt(5), []register{present}},
		{"delete of a missing key", register{}, del("k", 4), notFound, []register{{}}},
		{"delete of a missing key succeeds", register{}, del("k", 4), ok(6, ""), nil},
		{"killed delete", present, del("k", 5), killed, []register{present, {}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := step(c.s, c.c, c.r)
			if len(got) != len(c.want) {
				t.Fatalf("step(%+v, %v, %v) = %+v, want %+v", c.s, c.c, c.r, got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("step(%+v, %v, %v) = %+v, want %+v", c.s, c.c, c.r, got, c.want)
				}
			}
		})
	}
}
