package procstat

import "testing"

// TestParseStatus reads the resident lines of /proc/<pid>/status, in
// bytes, and refuses a file without them or with another unit.
func TestParseStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   string
		rss, hwm int64
		ok       bool
	}{
		{"both", "Name:\tqualify\nVmHWM:\t   19396 kB\nVmRSS:\t   15188 kB\nThreads:\t7\n", 15188 << 10, 19396 << 10, true},
		{"no HWM", "VmRSS:\t15188 kB\n", 0, 0, false},
		{"other unit", "VmHWM:\t1 kB\nVmRSS:\t15188 MB\n", 0, 0, false},
		{"not a number", "VmHWM:\t1 kB\nVmRSS:\tmany kB\n", 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rss, hwm, err := ParseStatus([]byte(tc.status))
			if (err == nil) != tc.ok || rss != tc.rss || hwm != tc.hwm {
				t.Errorf("ParseStatus = %d, %d, %v; want %d, %d, ok %v", rss, hwm, err, tc.rss, tc.hwm, tc.ok)
			}
		})
	}
}
