package harness

import (
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Result is one measured row: a named workload at one concurrency level.
// Latency fields are per-operation nearest-rank figures in microseconds;
// OpsPerS is completed operations per wall-clock second. Zero fields other
// than Name are left out of the JSON form.
type Result struct {
	// Name identifies the workload, e.g. "raw_append_fdatasync".
	Name string `json:"name"`
	// P50us is the median operation latency in microseconds.
	P50us float64 `json:"p50_us,omitempty"`
	// P95us is the 95th-percentile operation latency in microseconds.
	P95us float64 `json:"p95_us,omitempty"`
	// MaxUs is the largest operation latency in microseconds.
	MaxUs float64 `json:"max_us,omitempty"`
	// OpsPerS is the throughput in operations per second.
	OpsPerS float64 `json:"ops_per_s,omitempty"`
	// Writers is the number of concurrent writers (1 for serial runs).
	Writers int `json:"writers,omitempty"`
	// Note carries free-form detail such as sample count or batch sizes.
	Note string `json:"note,omitempty"`
	// Quantiles is the latency distribution at QuantilePoints.
	Quantiles []Quantile `json:"quantiles,omitempty"`
	// Rounds holds the figures of each round of an alternating run
	// ([AlternateSerial], [AlternateConcurrent]), in run order.
	Rounds []RoundStat `json:"rounds,omitempty"`
	// Figures holds what a row measures besides latency and throughput,
	// by name, each name ending in its unit (for example
	// "idle_cpu_percent", "peak_disk_bytes").
	Figures map[string]float64 `json:"figures,omitempty"`
}

// Quantile is one point of a latency distribution: P percent of the
// operations took at most Us microseconds (nearest rank).
type Quantile struct {
	P  float64 `json:"p"`
	Us float64 `json:"us"`
}

// Report is the JSON document written by qualify's --json flag.
type Report struct {
	// Results holds every measured row in run order.
	Results []Result `json:"results"`
}

// WriteJSON writes rep as indented JSON to path, replacing the file.
func WriteJSON(path string, rep Report) error {
	if rep.Results == nil {
		rep.Results = []Result{}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	return os.WriteFile(path, b, 0o644)
}

// WriteTable prints results as an aligned table with the columns name,
// writers, p50 µs, p95 µs, max µs, ops/s and note: the name left-aligned, the
// figures right-aligned. Zero figures print as "-".
func WriteTable(w io.Writer, results []Result) error {
	rows := [][]string{{"name", "writers", "p50 µs", "p95 µs", "max µs", "ops/s", "note"}}
	for _, r := range results {
		rows = append(rows, []string{r.Name, intCell(r.Writers), numCell(r.P50us),
			numCell(r.P95us), numCell(r.MaxUs), numCell(r.OpsPerS), r.Note})
	}
	const cols = 7
	var width [cols]int
	for _, row := range rows {
		for c, cell := range row {
			width[c] = max(width[c], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		b.Reset()
		for c, cell := range row {
			pad := strings.Repeat(" ", width[c]-utf8.RuneCountInString(cell))
			switch {
			case c == 0:
				b.WriteString(cell + pad)
			case c == cols-1:
				if cell != "" {
					b.WriteString("  " + cell)
				}
			default:
				b.WriteString("  " + pad + cell)
			}
		}
		b.WriteByte('\n')
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

func intCell(v int) string {
	if v == 0 {
		return "-"
	}
	return strconv.Itoa(v)
}

func numCell(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
}
