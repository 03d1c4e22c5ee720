package regcheck

import "testing"

func put(key, value string, expect int64) Call {
	return Call{Kind: Put, Key: key, Expect: expect, Value: value}
}
func get(key string) Call               { return Call{Kind: Get, Key: key} }
func del(key string, expect int64) Call { return Call{Kind: Del, Key: key, Expect: expect} }

func ok(rev uint64, value string) Result { return Result{Code: OK, Rev: rev, Value: value} }

var (
	notFound = Result{Code: NotFound}
	killed   = Result{Unknown: true}
)

func conflictAt(rev uint64) Result { return Result{Code: Conflict, Rev: rev} }

// TestStep pins the register model one operation at a time.
func TestStep(t *testing.T) {
	t.Parallel()
	present := Register{Exists: true, Value: "a", Rev: 5}
	unknownRev := Register{Exists: true, Value: "b"}
	cases := []struct {
		name string
		s    Register
		c    Call
		r    Result
		want []Register // nil: the result is impossible
	}{
		{"read of a missing key", Register{}, get("k"), notFound, []Register{{}}},
		{"read invents a value", Register{}, get("k"), ok(3, "x"), nil},
		{"read of the value", present, get("k"), ok(5, "a"), []Register{present}},
		{"read at another revision", present, get("k"), ok(6, "a"), nil},
		{"read of another value", present, get("k"), ok(5, "z"), nil},
		{"read misses a present key", present, get("k"), notFound, nil},
		{"read learns an unknown revision", unknownRev, get("k"), ok(9, "b"), []Register{{Exists: true, Value: "b", Rev: 9}}},
		{"create on a missing key", Register{}, put("k", "c", 0), ok(7, ""), []Register{{Exists: true, Value: "c", Rev: 7}}},
		{"create on a present key succeeds", present, put("k", "c", 0), ok(7, ""), nil},
		{"create on a present key conflicts", present, put("k", "c", 0), conflictAt(5), []Register{present}},
		{"conflict with a wrong current revision", present, put("k", "c", 0), conflictAt(4), nil},
		{"compare-and-set at the revision", present, put("k", "c", 5), ok(8, ""), []Register{{Exists: true, Value: "c", Rev: 8}}},
		{"compare-and-set goes back in revision", present, put("k", "c", 5), ok(5, ""), nil},
		{"compare-and-set at a stale revision succeeds", present, put("k", "c", 4), ok(8, ""), nil},
		{"compare-and-set on a missing key", Register{}, put("k", "c", 4), conflictAt(0), []Register{{}}},
		{"compare-and-set against an unknown revision", unknownRev, put("k", "c", 4), conflictAt(6), []Register{{Exists: true, Value: "b", Rev: 6}}},
		{"Blind write", present, put("k", "c", Blind), ok(9, ""), []Register{{Exists: true, Value: "c", Rev: 9}}},
		{"killed write that could apply", Register{}, put("k", "c", 0), killed, []Register{{}, {Exists: true, Value: "c"}}},
		{"killed write that could not", present, put("k", "c", 0), killed, []Register{present}},
		{"delete at the revision", present, del("k", 5), ok(6, ""), []Register{{}}},
		{"delete at a stale revision", present, del("k", 4), conflictAt(5), []Register{present}},
		{"delete of a missing key", Register{}, del("k", 4), notFound, []Register{{}}},
		{"delete of a missing key succeeds", Register{}, del("k", 4), ok(6, ""), nil},
		{"killed delete", present, del("k", 5), killed, []Register{present, {}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := Step(c.s, c.c, c.r)
			if len(got) != len(c.want) {
				t.Fatalf("Step(%+v, %v, %v) = %+v, want %+v", c.s, c.c, c.r, got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("Step(%+v, %v, %v) = %+v, want %+v", c.s, c.c, c.r, got, c.want)
				}
			}
		})
	}
}
