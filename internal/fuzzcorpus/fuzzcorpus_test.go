package fuzzcorpus

import "testing"

func TestFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []any
		want   string
	}{
		{"empty", nil, "go test fuzz v1\n"},
		{"bytes with quotes and binary", []any{[]byte("a\"b\x00\xff")}, "go test fuzz v1\n[]byte(\"a\\\"b\\x00\\xff\")\n"},
		{"string", []any{"k\n1"}, "go test fuzz v1\nstring(\"k\\n1\")\n"},
		{"numbers keep their type", []any{uint64(7), int64(-3), uint32(5), true}, "go test fuzz v1\nuint64(7)\nint64(-3)\nuint32(5)\nbool(true)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := File(tt.values...); got != tt.want {
				t.Fatalf("File(%v) =\n%q\nwant\n%q", tt.values, got, tt.want)
			}
		})
	}
}
