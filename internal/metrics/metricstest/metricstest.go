// Package metricstest reads metrics back in tests, where latencies vary
// from run to run and only the number of observations can be compared.
package metricstest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Observations returns how many observations each series of histogram
// family name in g holds, keyed by the series' labels as "a=x,b=y"
// (label names in order).
func Observations(tb testing.TB, g prometheus.Gatherer, name string) map[string]uint64 {
	tb.Helper()
	fams, err := g.Gather()
	if err != nil {
		tb.Fatalf("gather metrics: %v", err)
	}
	out := map[string]uint64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() { // sorted by name when gathered
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(labels, ",")] = m.GetHistogram().GetSampleCount()
		}
	}
	return out
}
