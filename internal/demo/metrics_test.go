package demo

import (
	"strings"
	"testing"
)

func TestMetricsAddr(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, want string
		bad      bool
	}{
		{in: ":9464", want: "127.0.0.1:9464"},
		{in: ":0", want: "127.0.0.1:0"},
		{in: "127.0.0.1:9464", want: "127.0.0.1:9464"},
		{in: "0.0.0.0:9464", want: "0.0.0.0:9464"},
		{in: "[::1]:9464", want: "[::1]:9464"},
		{in: "9464", bad: true},
		{in: "", bad: true},
	}
	for _, c := range cases {
		got, err := MetricsAddr(c.in)
		switch {
		case c.bad && (err == nil || !strings.Contains(err.Error(), "--metrics-listen")):
			t.Errorf("MetricsAddr(%q) = %q, %v; want an error naming --metrics-listen", c.in, got, err)
		case !c.bad && (err != nil || got != c.want):
			t.Errorf("MetricsAddr(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}
